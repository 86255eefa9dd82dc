"""Time stamps and line windows of a log file, shared by the job analysis and the fleet reader.

`parse_time(text)` finds the first time stamp of a line (`parse_times` every one) (ISO date-time, glog without a year, or
`[HH:MM:SS]`); `lines_around(path, line)` reads the lines around one line of a file in bounded
memory (from the tail when the window is near the end); `time_at(window, line)` picks the time stamp
of a line from such a window.
"""
from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Optional

from llmtriage.engine.logparse import decode_line, iter_blocks, normalise_text, split_prefix

TIME_WINDOW = 40          # lines around the failing line searched for a time stamp

_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_GLOG = re.compile(r"\b[IWEF]([01]?\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})")   # c10 writes August as "819"
_HMS = re.compile(r"\[(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\]")


def parse_time(text: str, year: int = 1970) -> Optional[tuple[str, float]]:
    """(kind, seconds) of the first time stamp in `text`: ISO date-time, glog (no year) or [HH:MM:SS]."""
    m = _ISO.search(text)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
        try:
            return "iso", datetime(y, mo, d, h, mi, s).timestamp() + frac
        except ValueError:
            return None
    m = _GLOG.search(text)
    if m:
        mo, d, h, mi, s = (int(x) for x in m.groups()[:5])
        try:
            return "iso" if year > 1970 else "glog", datetime(year, mo, d, h, mi, s).timestamp() + float("0." + m.group(6))
        except ValueError:
            return None
    m = _HMS.search(text)
    if m:
        h, mi, s = (int(x) for x in m.groups()[:3])
        return "hms", h * 3600 + mi * 60 + s + (float("0." + m.group(4)) if m.group(4) else 0.0)
    return None


def parse_times(text: str, year: int = 1970) -> list[tuple[str, float]]:
    """Every ISO or glog time stamp of `text`, in order (`parse_time` gives the first only): a line a
    collector prefixed with its own clock carries two."""
    out = []
    for rx in (_ISO, _GLOG):
        for m in rx.finditer(text):
            t = parse_time(text[m.start():], year)
            if t is not None:
                out.append((m.start(), t))
    return [t for _, t in sorted(out)]


def lines_around(path: Path, line: int, before: int = TIME_WINDOW, after: int = TIME_WINDOW,
                 total_lines: Optional[int] = None) -> list[tuple[int, str]]:
    """The lines [line-before, line+after] of a file. Streamed from the start and stopping after the
    window; when the window is near the end and `total_lines` is known, only the file's tail is read."""
    lo, hi = max(1, line - before), line + after
    out: list[tuple[int, str]] = []
    if total_lines is not None and total_lines - lo < 4000:
        # read backwards, 64 KiB at a time, only as far as the window needs (at most 4 MiB)
        need = total_lines - lo + 2
        size = os.path.getsize(path)
        pieces: list[bytes] = []
        newlines = 0
        start = size
        with open(path, "rb") as fh:
            while start > 0 and newlines < need and size - start < (4 << 20):
                step = min(64 << 10, start)
                start -= step
                fh.seek(start)
                piece = fh.read(step)
                pieces.append(piece)
                newlines += piece.count(b"\n")
        data = b"".join(reversed(pieces))
        del pieces
        parts = data.split(b"\n")
        if data.endswith(b"\n"):
            parts.pop()
        first_no = total_lines - len(parts) + 1
        if start == 0 or first_no + 1 <= lo:
            for i, raw in enumerate(parts):
                ln = first_no + i
                if lo <= ln <= hi and (start == 0 or i > 0):
                    out.append((ln, normalise_text(decode_line(raw[:4096])[0])))
            return out
    base = 1
    continued = False          # the previous block was cut inside a line (a line over 1 MiB)
    with open(path, "rb") as fh:
        for chunk, _ in iter_blocks(fh):
            n = chunk.count(b"\n")
            if base + n < lo:
                base += n
                continued = not chunk.endswith(b"\n")
                continue
            parts = chunk.split(b"\n")
            if chunk.endswith(b"\n"):
                parts.pop()
            for i, raw in enumerate(parts):
                ln = base + i
                if lo <= ln <= hi and not (i == 0 and continued):
                    out.append((ln, normalise_text(decode_line(raw[:4096])[0])))
            base += n
            continued = not chunk.endswith(b"\n")
            if base > hi:
                break
    return out


def time_at(window: list[tuple[int, str]], line: int, rank: Optional[int] = None) -> Optional[tuple[str, float, str]]:
    """The time stamp of `line`: on it, else the nearest before it (within a traceback's length), else
    the nearest after, else any older one (kind, t, text). With `rank`, only that rank's lines count."""
    year = 1970
    for _, t in window:
        m = _ISO.search(t)
        if m:
            year = int(m.group(1))
            break
    stamps = []
    for ln, t in window:
        if rank is not None:
            pre = split_prefix(t)
            if pre.rank is not None and pre.rank != rank:
                continue
        r = parse_time(t, year)
        if r is not None:
            m = _ISO.search(t) or _GLOG.search(t) or _HMS.search(t)
            stamps.append((ln, r[0], r[1], m.group(0) if m else ""))
    on = [s for s in stamps if s[0] == line]
    if on:
        return on[0][1], on[0][2], on[0][3]
    prev = [s for s in stamps if s[0] < line and line - s[0] <= 12]
    nxt = [s for s in stamps if s[0] > line and s[0] - line <= 12]
    older = [s for s in stamps if s[0] < line]
    pick = prev[-1] if prev else (nxt[0] if nxt else (older[-1] if older else None))
    return (pick[1], pick[2], pick[3]) if pick else None


__all__ = ["TIME_WINDOW", "parse_time", "lines_around", "time_at"]
