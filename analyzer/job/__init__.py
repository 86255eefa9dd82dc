"""Multi-log jobs: per-rank logs, the first failing rank, cascades and run diffs."""
