"""Optional Hyperscan block scanner (`pip install 'llmtriage[hyperscan]'`, `--engine hyperscan`).

`HyperscanSet` answers the one question the engine asks of its multi-pattern matcher, "which patterns
match somewhere in these bytes?" (`Match(data) -> list[int] | None`, the same as an RE2 `Set`), so
block scanning, bisection down to lines and per-line attribution are the engine's own code.

- Every pattern is compiled with SINGLEMATCH (one report per pattern per call) and MULTILINE.
- A pattern Hyperscan rejects is compiled in PREFILTER mode (a superset); one that still fails, and
  any non-ASCII pattern (Hyperscan's UTF-8 mode is undefined on the invalid UTF-8 that real logs
  hold), goes to a small RE2 Set beside it. The engine confirms every hit line with the exact
  pattern (`Engine._exact`), so supersets never leak into findings.
- Compiling ~370 patterns takes ~0.8 s; the serialized database is cached beside the rule cache,
  keyed on the pattern list, so a warm start only deserializes it (< 1 ms).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import hyperscan

from llmtriage.engine.re2set import compile_set
from llmtriage.ruleset import cachefile
from llmtriage.ruleset.cachefile import blake2b

_FLAGS = hyperscan.HS_FLAG_MULTILINE | hyperscan.HS_FLAG_SINGLEMATCH


class HyperscanSet:
    def __init__(self, patterns: list[str], cache_dir: Optional[Path] = None, re2_mem: int = 24 << 20):
        db, prefilter, leftover = _load_or_build(patterns, cache_dir)
        self._db = db
        self._scratch = hyperscan.Scratch(db) if db is not None else None
        self._left: Any = None
        self._left_ids = leftover
        if leftover:
            self._left, _ = compile_set([patterns[i] for i in leftover], re2_mem)
            if self._left is None:
                raise RuntimeError("patterns fit neither Hyperscan nor an RE2 Set")
        self._hits: list[int] = []

    def _on_match(self, pid: int, start: int, end: int, flags: int, ctx: Any) -> None:
        self._hits.append(pid)

    def Match(self, data: bytes) -> Optional[list[int]]:  # noqa: N802 - same name as re2.Set.Match
        hits = self._hits = []
        if self._db is not None and data:
            self._db.scan(data, match_event_handler=self._on_match, scratch=self._scratch)
        if self._left is not None:
            hits.extend(self._left_ids[j] for j in self._left.Match(data) or ())
        return hits or None


def _compile(patterns: list[str], ids: list[int], prefilter: set[int]) -> Any:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[patterns[i].encode() for i in ids], ids=ids, elements=len(ids),
               flags=[_FLAGS | (hyperscan.HS_FLAG_PREFILTER if i in prefilter else 0) for i in ids])
    return db


def _build(patterns: list[str]) -> tuple[Any, list[int], list[int]]:
    """(database, prefilter ids, leftover ids). One compile when every pattern is accepted as is."""
    ascii_ids = [i for i, p in enumerate(patterns) if p.isascii()]
    leftover = [i for i, p in enumerate(patterns) if not p.isascii()]
    try:
        return (_compile(patterns, ascii_ids, set()) if ascii_ids else None), [], leftover
    except hyperscan.error:
        pass
    ok: list[int] = []
    prefilter: list[int] = []
    for i in ascii_ids:
        for flag, bucket in ((0, ok), (hyperscan.HS_FLAG_PREFILTER, prefilter)):
            try:
                _compile(patterns, [i], {i} if flag else set())
            except hyperscan.error:
                continue
            bucket.append(i)
            break
        else:
            leftover.append(i)
    ids = ok + prefilter
    return (_compile(patterns, ids, set(prefilter)) if ids else None), prefilter, sorted(leftover)


def _load_or_build(patterns: list[str], cache_dir: Optional[Path]) -> tuple[Any, list[int], list[int]]:
    """The build, cached as data (id lists as JSON, the database in hyperscan's serialisation), keyed on the pattern list."""
    h = blake2b(getattr(hyperscan, "__version__", "hs").encode(), digest_size=16)
    for p in patterns:
        h.update(p.encode() + b"\n")
    path = cache_dir / f"hs-{h.hexdigest()[:24]}.bin" if cache_dir is not None else None
    if path is not None:
        blob = cachefile.read(path)     # a JSON header line, then hyperscan's own serialisation
        if blob is not None:
            try:
                head, _, raw = blob.partition(b"\n")
                meta = json.loads(head)
                db = hyperscan.loadb(raw, hyperscan.HS_MODE_BLOCK) if raw else None
                return db, [int(i) for i in meta["prefilter"]], [int(i) for i in meta["leftover"]]
            except (KeyError, TypeError, ValueError, hyperscan.error):
                cachefile.remove(path)
    db, prefilter, leftover = _build(patterns)
    if path is not None:
        head = json.dumps({"prefilter": prefilter, "leftover": leftover}).encode()
        cachefile.write(path, head + b"\n" + (hyperscan.dumpb(db) if db is not None else b""))
    return db, prefilter, leftover
