"""Bytes regexes for the block observers: RE2 when installed (a bare `Match` call per hit, no Python
Match object), the stdlib `re` otherwise; and `Lazy`, attributes compiled on first access.

Used by `metric_parse`, `metrics`, `throughput` and `phase`; importing it compiles nothing.
"""
from __future__ import annotations

import re
from typing import Any, Iterator, Optional

try:  # pragma: no cover - depends on the install
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

UNANCHORED = getattr(getattr(_re2, "_Anchor", None), "UNANCHORED", None)


def compile_bytes(pattern: bytes) -> Any:
    """`pattern` compiled with re2 when it is in the RE2 subset, else with `re`."""
    if _re2 is not None:
        try:
            opts = _re2.Options()
            opts.log_errors = False
            return _re2.compile(pattern, opts)
        except Exception:  # pragma: no cover - pattern outside the RE2 subset
            pass
    return re.compile(pattern)


def raw_of(compiled: Any) -> Any:
    """The bare RE2 object behind a `re2` pattern (its `Match` returns spans, no Match objects), or None."""
    if _re2 is None or not isinstance(compiled, getattr(_re2, "_Regexp", ())):
        return None
    raw = getattr(compiled, "_regexp", None)
    return raw if raw is not None and hasattr(raw, "Match") else None


def spans(compiled: Any, raw: Any, view: bytes, pos: int = 0, endpos: Optional[int] = None) -> list[tuple[int, int]]:
    """(start, end) of every match of `compiled` in view[pos:endpos], as `finditer` gives them, without a
    Python Match object per match (`raw` = `raw_of(compiled)`: one C call per match)."""
    end = len(view) if endpos is None else endpos
    if raw is None:
        return [m.span() for m in compiled.finditer(view, pos, end)]
    out = []
    match = raw.Match
    anchor = UNANCHORED
    while True:
        sp = match(anchor, view, pos, end)[0]
        if sp[0] < 0:
            break
        out.append(sp)
        if pos == end:
            break
        pos = pos + 1 if pos == sp[1] else sp[1]
    return out


def search_raw(raw: Any, compiled: Any, view: bytes) -> bool:
    """Whether `compiled` occurs in `view` (a bare RE2 call when available)."""
    if raw is not None:
        return raw.Match(UNANCHORED, view, 0, len(view))[0][0] >= 0
    return compiled.search(view) is not None


class Lazy:
    """Attributes made by `_make_<name>` on first access, plain attributes after that."""

    def __getattr__(self, name: str) -> Any:
        make = getattr(type(self), "_make_" + name, None)
        if make is None:
            raise AttributeError(name)
        value = make(self)
        setattr(self, name, value)
        return value


class Gate:
    """A necessary condition checked before a costly stdlib search: `pattern` (which every text the guarded search
    matches holds: a superset of it, never a line break in a match) compiled with RE2 when installed. A block
    the gate finds nothing in is skipped; the guarded code then runs unchanged, so results cannot differ."""

    def __init__(self, pattern: bytes) -> None:
        self.rx = compile_bytes(pattern)
        self.raw = raw_of(self.rx)

    def __call__(self, view: bytes, pos: int = 0) -> bool:
        if self.raw is not None:
            return self.raw.Match(UNANCHORED, view, pos, len(view))[0][0] >= 0
        return self.rx.search(view, pos) is not None

    def find(self, view: bytes, pos: int = 0) -> int:
        """The start of the first match at or after `pos`, or -1."""
        if self.raw is not None:
            return self.raw.Match(UNANCHORED, view, pos, len(view))[0][0]
        m = self.rx.search(view, pos)
        return -1 if m is None else m.start()

    def lines(self, view: bytes) -> Iterator[tuple[int, bytes]]:
        """(index, line) of the lines of `view.split(b"\\n")` that hold a match of the gate, in order."""
        pos = at = i = 0
        while True:
            s = self.find(view, pos)
            if s < 0:
                return
            a = view.rfind(b"\n", 0, s) + 1
            i += view.count(b"\n", at, a)
            at = a
            e = view.find(b"\n", s)
            if e < 0:
                yield i, view[a:]
                return
            yield i, view[a:e]
            pos = e + 1
