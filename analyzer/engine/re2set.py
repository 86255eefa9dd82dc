"""The multi-pattern matchers the engine asks "which patterns occur in these bytes?" (layer 2).

- `compile_set`: an RE2 `Set` of patterns in the form `set_form` gives them (Latin-1, `never_nl`,
  large bounds relaxed), under a DFA memory budget.
- `LiteralSet`: the stand-in when the pattern Set's DFA cache thrashes: literals each match must
  contain, in one Set whose DFA is bounded by the literals.
- `LazySet`: the pattern Set compiled on first use (what a scan holds while it is away from it).
- `GatedSet`: the Set's answers without the Set, for a log's first bytes: the literal gate picks
  candidates, each checked with its own small RE2 program (no Set compile, no DFA warm-up).
- `literal_gate`: the same literals for the stdlib path (no google-re2): `bytes` needles.
All answer with supersets where noted; the engine confirms such hits with the exact pattern.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional

from llmtriage.engine.literals import required_literals

try:  # pragma: no cover - exercised when google-re2 is installed
    import re2
except ImportError:  # pragma: no cover
    re2 = None

HAVE_RE2 = re2 is not None
RE2_MAX_MEM = 256 << 20
# The Set's budget caps its DFA state cache, which is most of the engine's memory: ~3 MB on ordinary
# logs, but ~30-40 MB with 156 rules where nearly every line is a different hit (the benchmark's
# every-line-a-hit log). When full, RE2 empties the cache and goes on (a many-match DFA never gives
# up half-way), so results stay exact, but a budget below the working set costs ~100x in speed: a
# scan that finds such input hands it to the literal Set (see engine.scan).
RE2_SET_MEM = 8 << 20
LITERAL_SET_MEM = 8 << 20
LITERAL_CAP = 12
# compiled programs a GatedSet keeps between blocks (~50 KB each): a long log's rare incidents flag
# patterns once, and kept for ever they grew a 100 MB log's scan by ~4 MB (110 programs)
GATED_PROGRAMS = 64

_BOUNDED = re.compile(r"(?<!\\)\{(\d+),(\d+)\}")
_SF_TOKEN = re.compile(r"\\.|\[\^?\]?|\]", re.S)


def relax_bounds(pattern: str, limit: int = 8) -> str:
    """A superset of `pattern` for the RE2 Set: `x{m,n}` with a large n becomes `x{m,}`.

    RE2 expands bounded repeats, so `[^\\n]{0,400}` costs hundreds of states per pattern and made
    the Set compile ~20x slower; the exact pattern still decides every hit (Engine.bytes_pattern)."""
    return _BOUNDED.sub(lambda m: m.group(0) if int(m.group(2)) <= limit else "{%s,}" % m.group(1), pattern)


def set_form(pattern: str) -> tuple[str, bool]:
    """The pattern as the RE2 Set holds it, and whether the Set's hits are then exact.

    Hits are decided by stdlib bytes patterns; the Set (Latin-1, see compile_set) agrees with them
    except in three places: large bounds are relaxed (relax_bounds), RE2's `\\s` lacks the vertical
    tab that Python's has (widened here: `\\s` becomes `[\\s\\x0b]`, and `\\S` `[^\\s\\x0b]`; a
    `\\S` inside a class stays a superset), and `(?i)` folds Latin-1 letters in non-ASCII patterns.
    Inexact entries are confirmed line by line (Scan.exact)."""
    out: list[str] = []
    exact = pattern.isascii()
    in_class = False
    last = 0
    # Only escapes, "[" (with a leading "^" and "]" that belong to it) and "]" change anything:
    # the text between them is copied in one piece (this runs for every pattern at start-up).
    for m in _SF_TOKEN.finditer(pattern):
        out.append(pattern[last:m.start()])
        last = m.end()
        tok = m.group()
        if tok[0] == "\\":
            e = tok[1]
            if e == "s":
                out.append("\\s\\x0b" if in_class else "[\\s\\x0b]")
            elif e == "S" and not in_class:
                out.append("[^\\s\\x0b]")
            else:
                exact = exact and e != "S"
                out.append(tok)
        elif tok[0] == "[" and not in_class:
            out.append(tok)
            in_class = True
        else:                       # "]", or a "[" (and what follows it) inside a class
            for ch in tok:
                if ch == "]" and in_class:
                    in_class = False
                out.append(ch)
    out.append(pattern[last:])
    form = "".join(out)
    relaxed = relax_bounds(form)
    return relaxed, exact and relaxed == form


def compile_set(patterns: list[str], mem: int) -> tuple[Any, int]:
    """An unanchored RE2 Set of `patterns`, or (None, 0) if even a generous budget cannot hold it.

    `never_nl` keeps every match inside one line, which is all the engine counts (hits are
    attributed per line): no NFA thread survives a newline, so hit-dense logs create about half
    the DFA states and blocks scan faster. A larger budget is tried only if the program itself does
    not fit (thousands of user rules)."""
    for budget in (mem, 4 * mem, RE2_MAX_MEM):
        opts = re2.Options()
        opts.max_mem = budget
        opts.log_errors = False
        opts.never_nl = True
        # Latin-1: one byte, one character, as in the stdlib bytes patterns that decide every hit.
        # In UTF-8 mode `[^\n]` does not match an invalid byte, and GBK logs are full of them.
        opts.encoding = re2.Options.Encoding.LATIN1
        s = re2.Set.SearchSet(opts)
        for p in patterns:
            s.Add("(?m)" + p)
        try:
            s.Compile()
        except re2.error:
            continue
        return s, budget
    return None, 0


def literal_index(patterns: list[str], wanted: list[int]) -> tuple[list[tuple[tuple[str, bool], list[int]]], list[int]]:
    """(literal, ignore_case) -> the patterns (of `wanted`) whose every match holds that literal
    (see literals.required_literals), and the patterns without a required literal: plain data, so
    that the engine can keep it on disk (engine.litcache)."""
    users: dict[tuple[str, bool], set[int]] = {}
    rest: list[int] = []
    for pi in wanted:
        lits = required_literals(patterns[pi])
        if lits is None:
            rest.append(pi)
        for text, icase in lits or ():
            users.setdefault((text, icase), set()).add(pi)
    return [(k, sorted(v)) for k, v in sorted(users.items())], rest


def literal_gate(index: tuple[list[tuple[tuple[str, bool], list[int]]], list[int]]
                 ) -> tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]]:
    """For the stdlib path: (needle, ignore ASCII case) -> patterns, from `literal_index`'s
    (literal, ignore case) -> patterns. Bytes patterns fold ASCII case only, and so does
    `bytes.lower`, so the gate never drops a hit."""
    users: dict[tuple[bytes, bool], set[int]] = {}
    for (text, icase), pis in index[0]:
        users.setdefault((text.encode().lower() if icase else text.encode(), icase), set()).update(pis)
    return [(k, sorted(v)) for k, v in sorted(users.items())], list(index[1])


def gate_candidates(gate: tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]], data: bytes) -> set[int]:
    """The patterns that may match `data`: those with a needle in it, and those without needles."""
    needles, always = gate
    low = data.lower()
    cand: set[int] = set(always)
    for (needle, icase), pis in needles:
        if needle in (low if icase else data):
            cand.update(pis)
    return cand


class GatedSet:
    """The Set's exact answers for a few KB of text without compiling the Set: compiling ~1000
    patterns into one Set and warming its DFA up costs more than triaging a small log. The literal
    gate picks the candidates and each is searched with its own RE2 program, built from the same
    Set form under the same options (so `same_as_set`: hits need no stdlib confirmation), compiled
    on first use and kept. Costs grow with bytes x needles: a scan asks it for a log's first block
    only, then moves to the Set (see engine.scan)."""

    same_as_set = True

    def __init__(self, forms: list[str], gate: tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]]):
        self._forms, self._gate = forms, gate
        self._progs: dict[int, Any] = {}
        self._lits: Optional[Any] = None

    @property
    def literal(self) -> bool:
        """Whether the candidates come from a LiteralSet (use_literals) rather than the bytes gate."""
        return self._lits is not None

    def use_literals(self, lits: Any) -> None:
        """Pick candidates with `lits` (a LiteralSet: one RE2 pass over literals each match must
        contain, a superset of the patterns that occur) instead of one `bytes` search per needle,
        whose cost grows with bytes x needles. The answers stay the Set's: each candidate is still
        searched with its own program. The literal Set's DFA is small whatever the input (~1-2 MB)
        where the pattern Set's grows to ~10-15 MB on a long log, and compiling it costs a fraction."""
        self._lits, self._gate = lits, ([], [])

    def _prog(self, pi: int) -> Any:
        progs = self._progs
        prog = progs.pop(pi, None)
        if prog is not None:
            progs[pi] = prog                 # the most recently used last (see candidates)
            return prog
        opts = re2.Options()
        opts.max_mem = LITERAL_SET_MEM
        opts.log_errors = False
        opts.never_nl = True
        opts.encoding = re2.Options.Encoding.LATIN1
        prog = progs[pi] = re2.compile(("(?m)" + self._forms[pi]).encode("utf-8", "surrogatepass"), opts)
        return prog

    def Match(self, data: bytes) -> list[int]:  # noqa: N802 - same name as re2.Set.Match
        return self.match_among(data, self.candidates(data))

    def candidates(self, data: bytes) -> set[int]:
        progs = self._progs
        if len(progs) > GATED_PROGRAMS:      # a new block: keep the GATED_PROGRAMS most recently used programs
            for pi in list(progs)[:len(progs) - GATED_PROGRAMS]:
                del progs[pi]
        if self._lits is not None:
            return set(self._lits.Match(data))
        return gate_candidates(self._gate, data)

    def release(self) -> None:
        """Drop the compiled programs (the scan moved to the Set): their memory goes to the Set's DFA."""
        self._progs.clear()

    def match_among(self, data: bytes, ids: Any) -> list[int]:
        """Which of the patterns `ids` occur in `data` (what `locate` asks of a block's pieces)."""
        return [pi for pi in ids if self._prog(pi).search(data) is not None]


class LazySet:
    """The pattern Set, compiled on first use (~20 ms): what an engine holds until a scan needs it
    (a small log never does, see GatedSet), and while a scan is away from the Set, so the thrashed
    DFA cache is freed before the literal Set's grows (peak RSS ~5 MB lower). A rule set too big for
    any Set budget (thousands of user rules) gets `fallback()`'s answers instead."""

    def __init__(self, forms: list[str], mem: int, fallback: Callable[[], Any]):
        self._forms, self._mem, self._fallback, self._set = forms, mem, fallback, None
        self.failed = False

    @property
    def compiled(self) -> bool:
        return self._set is not None

    def Match(self, data: bytes) -> Any:  # noqa: N802 - same name as re2.Set.Match
        if self._set is None:
            self._set, _ = compile_set(self._forms, self._mem)
            if self._set is None:
                self.failed = True
                self._set = self._fallback()
        return self._set.Match(data)


class LiteralSet:
    """The stand-in for a pattern Set whose DFA cache thrashes (diverse text where nearly every
    position is a new DFA state): the same `Match(bytes)` question, answered with a superset.

    One RE2 Set holds, for every pattern, literals that each of its matches must contain (see
    `literals.required_literals`; at most LITERAL_CAP characters of each, the end of the literal): a
    literal Set's DFA has at most one state per literal prefix (~1-2 MB with 160 rules), whatever
    the input. The rare pattern without a required literal goes to a small Set of its own.
    The scan confirms every candidate on its line with the exact pattern."""

    def __init__(self, patterns: list[str], index: tuple[list[tuple[tuple[str, bool], list[int]]], list[int]]):
        users: dict[tuple[str, bool], set[int]] = {}
        for (text, icase), pis in index[0]:
            users.setdefault((text[-LITERAL_CAP:], icase), set()).update(pis)
        rest = list(index[1])
        keys = sorted(users)
        self.lit_pats = [sorted(users[k]) for k in keys]
        self.lits, _ = compile_set([("(?i)" if icase else "") + _literal(text) for text, icase in keys],
                                   LITERAL_SET_MEM)
        self.rest_pats = rest
        self.rest: Optional[Any] = None
        if rest:
            self.rest, _ = compile_set([set_form(patterns[pi])[0] for pi in rest], LITERAL_SET_MEM)
        if self.lits is None or (rest and self.rest is None):   # pragma: no cover - literals always fit
            raise RuntimeError("literal Set does not compile")

    def Match(self, data: bytes) -> list[int]:  # noqa: N802 - same name as re2.Set.Match
        out: set[int] = set()
        for li in self.lits.Match(data) or ():
            out.update(self.lit_pats[li])
        if self.rest is not None:
            out.update(self.rest_pats[i] for i in self.rest.Match(data) or ())
        return list(out)


def _literal(text: str) -> str:
    """`text` as an RE2 literal: ASCII punctuation and spaces as \\xHH, everything else as is."""
    return "".join(c if c.isalnum() or ord(c) > 127 else "\\x%02x" % ord(c) for c in text)
