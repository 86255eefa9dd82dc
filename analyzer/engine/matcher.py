"""The detection engine's compiled form (layer 2): every rule pattern in one multi-pattern matcher.

`Engine(ruleset)` numbers the distinct patterns of the rules (match.any, requires, unless), adds
the bare-exception and traceback markers, and compiles them into one RE2 `Set` (`re2set`), a
Hyperscan database (`hsengine`, optional) or, without google-re2, a literal gate in front of stdlib
`re` (`mode="reference"` skips the gate and is the oracle for equivalence tests). `Engine.scan`
runs one `Scan` (engine/scan.py) over a binary stream: the per-scan state lives there.

The engine knows no detector: block observers (metric detectors, thread dumps, the verdict) are
factories the API passes in (`llmtriage.get_engine`), each called once per scan with the Scan.
"""
from __future__ import annotations

import io
from typing import Any, BinaryIO, Callable, Optional, Sequence

from llmtriage.engine.litcache import cached_forms, cached_index
from llmtriage.engine.re2set import (HAVE_RE2, RE2_SET_MEM, GatedSet, LazySet, LiteralSet, literal_gate, literal_index,
                                     relax_bounds, set_form)
from llmtriage.engine.scan import GATED_BYTES, THRASH_HITS, Scan
from llmtriage.findings import Report
from llmtriage.ruleset.loader import cache_dir
from llmtriage.ruleset.regexsafety import bounded_compile

BARE_EXC = r"\b(?:[A-Z][A-Za-z0-9_]*(?:Error|Exception)|Exception): "
# (also pytest's header of a failed test or collection error, "____ test_x ____" / "____ ERROR collecting x.py ____":
# its frames and "E   XError: ..." line are a traceback too)
TB_MARK = r"Traceback \(most recent call last\)|_{3} (?:ERROR (?:collecting|at setup of|at teardown of) |[Tt]est)"
MODES = ("re2", "hyperscan", "python", "reference")


class Engine:
    """Compiled form of a RuleSet. Reusable across inputs, one scan at a time; not thread-safe."""

    def __init__(self, ruleset: Any, *, lang: Optional[str] = None, mode: str = "auto",
                 disabled: frozenset[str] = frozenset(), observers: Sequence[Callable[[Scan], Any]] = (),
                 set_mem: int = RE2_SET_MEM, thrash_hits: float = THRASH_HITS,
                 gated_candidates: Optional[float] = None):
        self.ruleset = ruleset
        self.observers = list(observers)
        self.lang = lang
        self.thrash_hits = thrash_hits
        # past the first GATED_BYTES: the mean candidates a block above which the Set answers
        # (None: scan.LITERAL_GATED_MAX_CANDIDATES; tests of the Set's own paths pass 0)
        self.gated_candidates = gated_candidates
        self.rules = [r for r in ruleset.rules if r["id"] not in disabled and r.get("status") != "deprecated"]
        if mode == "auto":
            mode = "re2" if HAVE_RE2 else "python"
        if mode == "re2" and not HAVE_RE2:
            raise RuntimeError("google-re2 is not installed")
        if mode not in MODES:
            raise ValueError(f"unknown engine mode {mode!r}")
        self.mode = mode
        self._number_patterns()
        self._bytes_re: dict[int, Any] = {}
        self._not_re: dict[int, list[Any]] = {}
        self._gate: Optional[tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]]] = None
        self._litset: Optional[LiteralSet] = None
        self._index: Optional[tuple[list[tuple[tuple[str, bool], list[int]]], list[int]]] = None
        self._gated: Optional[GatedSet] = None
        self.set: Any = None
        self.set_mem = 0
        self.inexact: set[int] = set()     # Set entries that are supersets: confirm hits with `re`
        if self.mode == "hyperscan":
            from llmtriage.engine.hsengine import HyperscanSet   # deferred: the optional hyperscan extra

            self.set = HyperscanSet([relax_bounds(p) for p in self.patterns], cache_dir(), set_mem)
            self.inexact = set(range(len(self.patterns)))     # PCRE and RE2 classes differ at the edges
        elif self.mode == "re2":
            forms = cached_forms(self.patterns, cache_dir(), lambda: [set_form(p) for p in self.patterns])
            self._forms = [f for f, _ in forms]
            self.set_mem = set_mem
            # compiled when a scan first needs it: a small log is answered by the gated set alone
            self.set = LazySet(self._forms, set_mem, self.gated_set)
            self.inexact = {pi for pi, (_, exact) in enumerate(forms) if not exact}

    def _number_patterns(self) -> None:
        self.patterns: list[str] = []
        index: dict[str, int] = {}
        self.any_users: list[list[int]] = []       # pattern -> rule indices using it in match.any
        self.doc_users: list[bool] = []            # pattern used by requires/unless
        self.rule_any: list[list[int]] = []
        self.rule_req: list[list[int]] = []
        self.rule_unless: list[list[int]] = []

        def add(p: str) -> int:
            if p not in index:
                index[p] = len(self.patterns)
                self.patterns.append(p)
                self.any_users.append([])
                self.doc_users.append(False)
            return index[p]

        for ri, r in enumerate(self.rules):
            ids = [add(p["regex"]) for p in r["match"]["any"]]
            for pi in ids:
                self.any_users[pi].append(ri)
            self.rule_any.append(ids)
            req = [add(p["regex"]) for p in r["match"]["requires"]]
            unl = [add(p["regex"]) for p in r["match"]["unless"]]
            for pi in req + unl:
                self.doc_users[pi] = True
            self.rule_req.append(req)
            self.rule_unless.append(unl)
        self.bare_idx = add(BARE_EXC)
        # The traceback marker rides in the Set too, so blocks without one cost no extra scan.
        self.tb_idx = add(TB_MARK)

    # ---------------------------------------------------------------- compiled helpers
    def located(self) -> list[int]:
        """The patterns a stand-in for the Set must answer: rules', the bare exception, the traceback mark."""
        return [pi for pi in range(len(self.patterns))
                if self.any_users[pi] or self.doc_users[pi] or pi in (self.bare_idx, self.tb_idx)]

    def bytes_pattern(self, pi: int) -> Any:
        """The exact pattern in stdlib `re` (python/reference modes, and a scan that left the Set)."""
        c = self._bytes_re.get(pi)
        if c is None:
            c = self._bytes_re[pi] = bounded_compile(("(?m)" + self.patterns[pi]).encode())
        return c

    def not_patterns(self, ri: int) -> list[Any]:
        c = self._not_re.get(ri)
        if c is None:
            c = [bounded_compile(p["regex"].encode()) for p in self.rules[ri]["match"]["not"]]
            self._not_re[ri] = c
        return c

    def literal_index(self) -> tuple[list[tuple[tuple[str, bool], list[int]]], list[int]]:
        """Required literals -> patterns (re2set.literal_index), from the cache folder when it has them."""
        if self._index is None:
            located = self.located()
            self._index = cached_index(self.patterns, located, cache_dir(),
                                       lambda: literal_index(self.patterns, located))
        return self._index

    def gate(self) -> tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]]:
        """The literal gate of the stdlib path and of the gated set (see re2set.literal_gate)."""
        if self._gate is None:
            self._gate = literal_gate(self.literal_index())
        return self._gate

    def gated_set(self) -> GatedSet:
        """The Set's answers for a log's first block, without the Set (re2set.GatedSet)."""
        if self._gated is None:
            self._gated = GatedSet(self._forms, self.gate())
        return self._gated

    def literal_gated_set(self) -> GatedSet:
        """The gated set picking its candidates with the literal Set (GatedSet.use_literals): what a
        scan past its first GATED_BYTES asks, until a block has too many candidates for it."""
        gated = self.gated_set()
        if not gated.literal:
            gated.use_literals(self.literal_set())
            self._gate = None            # the bytes gate's needles are not asked any more
        return gated

    def expect_bytes(self, size: int) -> None:
        """A hint from the caller: inputs of up to `size` bytes follow. One too big for the gated
        start builds the literal-gated set now, before anything else is allocated."""
        if size > GATED_BYTES and isinstance(self.set, LazySet) and not self.set.compiled:
            self.literal_gated_set()

    def drop_gated_set(self) -> None:
        """A scan moved to the Set: free the gated set, its programs and needles (built again if a
        later scan starts before the Set is compiled)."""
        if self._gated is not None:
            self._gated.release()
        self._gated = None
        if self.mode == "re2":
            self._gate = None

    def literal_set(self) -> LiteralSet:
        if self._litset is None:
            self._litset = LiteralSet(self.patterns, self.literal_index())
        return self._litset

    def release_set(self) -> None:
        """Drop the pattern Set and its DFA cache (a scan left it); it is compiled afresh on return."""
        if self.mode == "re2":
            self.set = LazySet(self._forms, self.set_mem, self.gated_set)

    # ---------------------------------------------------------------- scanning
    def scan(self, fh: BinaryIO, source: str = "-", *, on_line_count: Optional[Callable[[int], None]] = None
             ) -> Report:
        return Scan(self, on_line_count).run(fh, source)


def scan_bytes(engine: Engine, data: bytes, source: str = "-") -> Report:
    return engine.scan(io.BytesIO(data), source)
