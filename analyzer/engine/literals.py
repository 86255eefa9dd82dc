"""Necessary literals of a rule pattern: the engine's memory-bounded fallback matcher.

`required_literals(pattern)` returns a set of (literal, ignore_case) pairs such that every match of
the pattern contains at least one of them (or None when no literal of MIN_LITERAL characters is
required). It walks the stdlib parser's tree of the pattern:

- a run of literal characters in a sequence is required as a whole;
- an alternation requires the union of its branches' sets (every branch must have one);
- a repeat with a minimum of at least one requires what its body requires;
- anything else (classes, optional parts, anchors) only ends the current run.

Of all the candidates in a sequence the one whose shortest literal is longest wins. An RE2 Set of
such literals is an Aho-Corasick automaton: its DFA has at most one state per literal prefix, so it
stays small on any input, unlike the Set of full patterns (see `matcher.LiteralSet`).
"""
from __future__ import annotations

import re
from re import _constants as _C  # type: ignore[attr-defined]
from re import _parser as _P  # type: ignore[attr-defined]
from typing import Optional

MIN_LITERAL = 3
Literals = set[tuple[str, bool]]
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT, getattr(_C, "POSSESSIVE_REPEAT", _C.MAX_REPEAT))


def required_literals(pattern: str) -> Optional[Literals]:
    try:
        tree = _P.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    return _sequence(list(tree), bool(tree.state.flags & re.IGNORECASE))


def _score(lits: Literals) -> float:
    return min(len(s) for s, _ in lits) - 0.5 * (len(lits) - 1) ** 0.5


def _sequence(items: list, icase: bool) -> Optional[Literals]:
    best: Optional[Literals] = None
    run: list[str] = []

    def consider(cand: Optional[Literals]) -> None:
        nonlocal best
        if cand and min(len(s) for s, _ in cand) >= MIN_LITERAL and (best is None or _score(cand) > _score(best)):
            best = cand

    def flush() -> None:
        if run:
            consider({("".join(run), icase)})
            run.clear()

    for op, av in items:
        if op is _C.LITERAL:
            run.append(chr(av))
            continue
        if op is _C.SUBPATTERN:
            _, add, remove, body = av
            inner = (icase or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE
            if inner == icase and all(o is _C.LITERAL for o, _ in body):   # a literal group: the run goes on
                run.extend(chr(a) for _, a in body)
                continue
            flush()
            consider(_sequence(list(body), inner))
        elif op is _C.BRANCH:
            flush()
            union: Optional[Literals] = set()
            for alt in av[1]:
                branch = _sequence(list(alt), icase)
                if branch is None:
                    union = None
                    break
                union |= branch
            consider(union)
        elif op in _REPEATS and av[0] >= 1:
            flush()
            consider(_sequence(list(av[2]), icase))
        else:                      # classes, ANY, optional parts, anchors, lookarounds: the run ends
            flush()
    flush()
    return best
