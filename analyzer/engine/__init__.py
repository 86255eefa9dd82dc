"""The scanning engine: log reader (ANSI, \r bars, rank prefixes, encodings), literal gates, RE2/hyperscan set scanners and the line matcher."""
