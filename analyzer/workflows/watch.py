"""`llmtriage watch FILE`: follow a growing log and report each new finding once, as it appears.

Each poll reads the bytes appended since the last one (complete lines only; a partial last line
waits for its newline) and runs the normal engine over them plus up to 256 KiB of the lines before
them, so `requires`/`unless` conditions and tracebacks that straddle two polls still resolve.
A finding is reported once per rule id (per exception headline for `unknown`), with its line
number in the whole file. Rotation (the path now names another file: the rest of the old one is
read first) and truncation restart at the top of the new content; findings already reported stay
reported. Truncation is seen when the file got shorter, and also when a copytruncate rotation let
it regrow past the old offset between two polls: the bytes just before the offset, or the first
bytes of the file, are no longer the ones read (same inode, size not smaller).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterator, Optional

from llmtriage.findings import Finding
from llmtriage.engine.matcher import scan_bytes

CONTEXT_BYTES = 256 * 1024
SIG_BYTES = 64                # bytes remembered at the start of the file and before the offset
READ_MAX = 8 << 20            # bytes read per step (a huge backlog is processed in pieces)
PARTIAL_MAX = 1 << 20         # a "line" without a newline longer than this is processed anyway


@dataclass
class Event:
    kind: str                 # "finding" | "rotated" | "truncated" | "waiting" | "watching" (--from-end)
    finding: Optional[Finding] = None
    detail: str = ""


@dataclass
class Follower:
    path: str
    engine: Any
    from_end: bool = False
    reported: set[str] = field(default_factory=set)
    fh: Optional[BinaryIO] = None
    ident: Optional[tuple[int, int]] = None
    pos: int = 0
    pending: bytes = b""
    context: bytes = b""
    lines: int = 0            # complete lines consumed from the current file
    _first: bool = True
    _waiting: bool = False
    head: bytes = b""         # the first SIG_BYTES of the file as read
    sig: bytes = b""          # the SIG_BYTES read just before `pos`

    def _pread(self, n: int, at: int) -> bytes:
        assert self.fh is not None
        if hasattr(os, "pread"):
            return os.pread(self.fh.fileno(), n, at)
        self.fh.seek(at)
        return self.fh.read(n)

    def _rewritten(self) -> bool:
        """Same file and not shorter, but not the bytes we read: rewritten in place (copytruncate)."""
        try:
            if self.sig and self._pread(len(self.sig), self.pos - len(self.sig)) != self.sig:
                return True
            return bool(self.head) and self._pread(len(self.head), 0) != self.head
        except OSError:
            return False

    def _open(self) -> Optional[Event]:
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            if not self._waiting:
                self._waiting = True
                return Event("waiting", detail=self.path)
            return None
        st = os.fstat(fh.fileno())
        self.fh, self.ident = fh, (st.st_dev, st.st_ino)
        self._reset()
        event = None
        if self._first and self.from_end:
            self.pos = fh.seek(0, os.SEEK_END)
            self.head = self._pread(SIG_BYTES, 0)
            self.sig = self._pread(min(SIG_BYTES, self.pos), self.pos - min(SIG_BYTES, self.pos))
            event = Event("watching", detail=str(self.pos))     # once: what it holds now is skipped
        self._first = False
        self._waiting = False
        return event

    def _reset(self) -> None:
        self.pos = 0
        self.head = self.sig = b""
        self.pending = b""
        self.context = b""
        self.lines = 0

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None

    def poll(self) -> list[Event]:
        """Read what was appended since the last call; return the events (new findings first seen)."""
        events: list[Event] = []
        if self.fh is None:
            ev = self._open()
            if ev is not None:
                events.append(ev)
            if self.fh is None:
                return events
        try:
            st = os.stat(self.path)
            ident: Optional[tuple[int, int]] = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            st, ident = None, None
        if ident != self.ident:
            # rotated (or removed): finish the old file, then move to the new one when it exists
            events += self._drain(final=True)
            self.close()
            if ident is not None:
                events.append(Event("rotated", detail=self.path))
                self._open()
                if self.fh is not None:
                    events += self._drain()
            return events
        if st is not None and (st.st_size < self.pos or self._rewritten()):
            events.append(Event("truncated", detail=self.path))
            self._reset()
        events += self._drain()
        return events

    def _drain(self, final: bool = False) -> list[Event]:
        assert self.fh is not None
        events: list[Event] = []
        while True:
            self.fh.seek(self.pos)
            data = self.fh.read(READ_MAX)
            if not data:
                break
            if len(self.head) < SIG_BYTES and self.pos == len(self.head):
                self.head = (self.head + data)[:SIG_BYTES]
            self.sig = (self.sig + data)[-SIG_BYTES:]
            self.pos += len(data)
            events += self._feed(data, final=False)
        if final and self.pending:
            events += self._feed(b"\n", final=True)
        return events

    def _feed(self, data: bytes, final: bool) -> list[Event]:
        buf = self.pending + data
        cut = buf.rfind(b"\n")
        if cut < 0:
            if len(buf) < PARTIAL_MAX:
                self.pending = buf
                return []
            cut = len(buf) - 1
        complete, self.pending = buf[:cut + 1], buf[cut + 1:]
        window = self.context + complete
        base = self.lines - self.context.count(b"\n")      # lines before the window
        report = scan_bytes(self.engine, window, self.path)
        events = []
        for f in report.findings:
            key = f.rule_id if f.rule_id != "unknown" else f"unknown:{f.evidence[:200]}"
            if key in self.reported:
                continue
            self.reported.add(key)
            f.last_line = (f.last_line or f.line) + base
            f.line += base
            f.source = self.path
            events.append(Event("finding", f))
        self.lines += complete.count(b"\n")
        if len(window) > CONTEXT_BYTES:
            tail = window[-CONTEXT_BYTES:]
            nl = tail.find(b"\n")
            window = tail[nl + 1:] if nl >= 0 else b""
        self.context = window
        return events


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return stat[stat.rfind(b")") + 2:][:1] != b"Z"
    except OSError:
        return True


def follow(path: str, engine: Any, *, until_pid: Optional[int] = None, interval: float = 0.5,
           from_end: bool = False, max_seconds: Optional[float] = None,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[Event]:
    """Yield events until interrupted, until `until_pid` has exited (after a last read) or after
    `max_seconds`."""
    fol = Follower(path, engine, from_end=from_end)
    start = time.monotonic()
    try:
        while True:
            done = until_pid is not None and not pid_alive(until_pid)
            yield from fol.poll()
            if done:
                if fol.fh is not None:
                    yield from fol._drain(final=True)
                return
            if max_seconds is not None and time.monotonic() - start >= max_seconds:
                return
            sleep(interval)
    finally:
        fol.close()
