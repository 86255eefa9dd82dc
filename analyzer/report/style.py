"""Layout of human (terminal) output, shared by every human renderer: ANSI styles, severity icons,
the terminal width and word wrapping that knows CJK text (two columns a character, a break allowed
between any two of them). JSON, SARIF and GitHub output never pass through here.
"""
from __future__ import annotations

import os
import re
import shutil
import unicodedata
from typing import Any, Optional

SEV = {"error": ("✖", "red"), "warning": ("▲", "yellow"), "info": ("•", "blue")}
MAX_WIDTH = 120           # paragraphs wider than this read badly even on a wide terminal
MIN_WIDTH = 40            # below this a wrapped paragraph is one word a line: don't wrap tighter
_CODES = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "green": "32", "blue": "34", "cyan": "36",
          "magenta": "35"}
_CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_TOKEN = re.compile(rf"\s+|[{_CJK}]|[^\s{_CJK}]+")
_NO_LINE_START = set("，。；：、）】」』！？,.;:!?)")


class Style:
    """`st(text, "bold", "red")`: ANSI-styled text when colour is on, else the text unchanged."""

    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, *codes: str) -> str:
        if not self.color or not codes:
            return text
        return "\x1b[" + ";".join(_CODES[c] for c in codes) + "m" + text + "\x1b[0m"


def terminal_width(stream: Any = None, default: Optional[int] = None) -> Optional[int]:
    """Columns to wrap human output to: $COLUMNS when set, else the terminal's width when `stream` is a
    terminal, else `default` (None: a pipe or a file is not wrapped). At most MAX_WIDTH."""
    cols: Optional[int] = None
    env = os.environ.get("COLUMNS", "")
    if env.strip().isdigit() and int(env) > 0:
        cols = int(env)
    elif stream is not None and getattr(stream, "isatty", lambda: False)():
        cols = shutil.get_terminal_size((default or 80, 24)).columns
    else:
        cols = default
    return min(cols, MAX_WIDTH) if cols else None


def text_width(text: str) -> int:
    """Columns `text` takes on a terminal (CJK and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap(text: Any, width: Optional[int], indent: int = 4, first: Optional[int] = None) -> str:
    """`text` with its whitespace collapsed, wrapped to `width` columns: later lines start with `indent`
    spaces; the first line starts at column `first` (default `indent`: the caller writes what comes
    before it). A word longer than a line stays whole. `width` None: one line."""
    text = " ".join(str(text).split())
    if not width:
        return text
    start = indent if first is None else first
    avail = max(width, MIN_WIDTH)
    lines: list[str] = []
    cur, col, space = "", start, False
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok.isspace():
            space = True
            continue
        w = text_width(tok)
        gap = 1 if space and cur else 0
        if cur and col + gap + w > avail and tok not in _NO_LINE_START:
            lines.append(cur)
            cur, col = tok, indent + w
        else:
            cur += " " * gap + tok
            col += gap + w
        space = False
    lines.append(cur)
    return ("\n" + " " * indent).join(lines)


def cut(text: str, width: int) -> str:
    """At most `width` characters; a cut line ends with an ellipsis (mask secrets before cutting)."""
    return text if len(text) <= width else text[:width - 1] + "…"


__all__ = ["SEV", "Style", "terminal_width", "text_width", "wrap", "cut", "MAX_WIDTH"]
