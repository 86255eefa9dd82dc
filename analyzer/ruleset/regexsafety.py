"""Time bounds for backtracking regexes (user rule patterns run in stdlib `re` in some paths).

- `blowup(pattern)`: the structural reason a pattern can backtrack exponentially, or None. An
  unbounded repeat over alternatives that can start with the same character (`(x|xx)+`,
  `(a|ab)*`) or over something that can match the empty string: `rules validate` rejects these.
- `risky(pattern)`: the pattern has a repeat over an alternation or over another repeat, so a
  backtracking engine may take super-linear time on some line. Such patterns are compiled by
  `bounded_compile` with the `regex` module and searched under a timeout (a timeout counts as no
  match); every other pattern keeps stdlib `re`, whose matching is then linear in practice.
"""
from __future__ import annotations

import re
from typing import Any, Iterator, Optional

try:
    import re._parser as _sre  # type: ignore[import-not-found]
    from re._constants import MAXREPEAT  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre  # type: ignore[no-redef]
    from sre_constants import MAXREPEAT  # type: ignore[no-redef]

TIMEOUT_S = 0.5
_ALL = frozenset(range(256))
_CATS = {
    "CATEGORY_DIGIT": frozenset(range(48, 58)),
    "CATEGORY_SPACE": frozenset(b" \t\n\r\f\v"),
    "CATEGORY_WORD": frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"),
}
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def parse(pattern: str) -> Optional[Any]:
    """The stdlib parse tree of `pattern` (None if it does not parse): parse once, pass it to
    `blowup`, `pump_probes`, `risky` and `nested_quantifier`."""
    try:
        return _sre.parse(pattern)
    except Exception:  # noqa: BLE001 - an invalid pattern is reported elsewhere
        return None


def _fold(chars: frozenset[int]) -> frozenset[int]:
    out = set(chars)
    for c in chars:
        if c < 0x110000:
            ch = chr(c)
            out.update(ord(x) for x in (ch.lower(), ch.upper()) if len(x) == 1)
    return frozenset(out)


def _category(name: str) -> frozenset[int]:
    if name.startswith("CATEGORY_NOT_"):
        return _ALL - _CATS.get("CATEGORY_" + name[len("CATEGORY_NOT_"):], frozenset())
    return _CATS.get(name, _ALL)


def _first(items: Any, icase: bool) -> tuple[frozenset[int], bool]:
    """(characters a match of `items` can start with, whether it can match the empty string)."""
    out: set[int] = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            return frozenset(out | (_fold(frozenset([av])) if icase else {av})), False
        if name in ("NOT_LITERAL", "ANY"):
            return _ALL, False
        if name == "IN":
            chars: set[int] = set()
            neg = False
            for iop, iav in av:
                iname = str(iop)
                if iname == "NEGATE":
                    neg = True
                elif iname == "LITERAL":
                    chars.add(iav)
                elif iname == "RANGE":
                    chars.update(range(iav[0], min(iav[1], 0x2FF) + 1))
                elif iname == "CATEGORY":
                    chars |= _category(str(iav))
                else:
                    chars |= _ALL
            got = frozenset(chars)
            if icase:
                got = _fold(got)
            return frozenset(out | ((_ALL - got) if neg else got)), False
        if name in ("AT",):
            continue
        if name == "SUBPATTERN":
            sub_icase = icase or bool(av[1] & re.IGNORECASE) if isinstance(av[1], int) else icase
            f, empty = _first(av[-1], sub_icase)
            out |= f
            if not empty:
                return frozenset(out), False
            continue
        if name == "BRANCH":
            empty_any = False
            for b in av[1]:
                f, empty = _first(b, icase)
                out |= f
                empty_any = empty_any or empty
            if not empty_any:
                return frozenset(out), False
            continue
        if name in _REPEATS:
            lo, _, sub = av
            f, empty = _first(sub, icase)
            out |= f
            if lo > 0 and not empty:
                return frozenset(out), False
            continue
        return _ALL, False          # anything else (group references, assertions): assume the worst
    return frozenset(out), True


def blowup(pattern: str, tree: Any = None) -> Optional[str]:
    """Why `pattern` can backtrack exponentially (for `rules validate`), or None."""
    tree = parse(pattern) if tree is None else tree
    if tree is None:
        return None
    icase = bool(tree.state.flags & re.IGNORECASE)
    found: list[str] = []

    def walk(items: Any) -> None:
        for op, av in items:
            name = str(op)
            if name in _REPEATS:
                lo, hi, sub = av
                if hi == MAXREPEAT or hi > 16:
                    _, empty = _first(sub, icase)
                    if empty:
                        found.append("an unbounded repeat of something that can match the empty string")
                    for sop, sav in _unwrap(sub):
                        if str(sop) == "BRANCH":
                            firsts = [_first(b, icase)[0] for b in sav[1]]
                            for i in range(len(firsts)):
                                for j in range(i + 1, len(firsts)):
                                    if firsts[i] & firsts[j]:
                                        found.append("an unbounded repeat over alternatives that can start with the "
                                                     "same character (e.g. '(x|xx)+')")
                walk(sub)
            elif name == "SUBPATTERN":
                walk(av[-1])
            elif name == "BRANCH":
                for b in av[1]:
                    walk(b)
            elif name in ("ASSERT", "ASSERT_NOT"):
                walk(av[1])

    walk(tree)
    if not found:
        return None
    return (f"can backtrack exponentially: {found[0]}; make the alternatives start differently, "
            "or bound the repeat")


def pump_probes(pattern: str, reps: int = 30, tree: Any = None) -> list[str]:
    """Inputs that pump each literal piece of `pattern` and then fail: a character or a literal run
    repeated `reps` times, then a control character no rule expects. `(x|xx)+y` takes about 1.6^n
    steps on n x's in a backtracking engine; these find such blow-ups whatever the alphabet."""
    tree = parse(pattern) if tree is None else tree
    if tree is None:
        return []
    pieces: set[str] = set()

    def walk(items: Any) -> None:
        run: list[str] = []
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                run.append(chr(av))
                pieces.add(chr(av))
                continue
            if run:
                pieces.add("".join(run))
                run = []
            if name == "IN":
                for iop, iav in av:
                    if str(iop) == "LITERAL":
                        pieces.add(chr(iav))
                    elif str(iop) == "RANGE":
                        pieces.add(chr(iav[0]))
                    elif str(iop) == "CATEGORY":
                        pieces.add({"CATEGORY_DIGIT": "0", "CATEGORY_SPACE": " "}.get(str(iav), "a"))
            elif name in _REPEATS:
                walk(av[2])
            elif name == "SUBPATTERN":
                walk(av[-1])
            elif name == "BRANCH":
                for b in av[1]:
                    walk(b)
            elif name in ("ANY", "NOT_LITERAL"):
                pieces.add("a")
        if run:
            pieces.add("".join(run))

    walk(tree)
    return [(p * reps)[:2000] + "\x01" for p in sorted(pieces)[:64] if p]


def nested_quantifier(tree: Any) -> bool:
    """An unbounded repeat inside another (`(a+)+`), in a tree from `parse`."""

    def walk(items: Any, under_unbounded: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in _REPEATS:
                lo, hi, sub = av
                unbounded = hi == MAXREPEAT or hi > 1000
                if unbounded and under_unbounded:
                    return True
                if walk(sub, under_unbounded or unbounded):
                    return True
            elif name == "SUBPATTERN":
                if walk(av[-1], under_unbounded):
                    return True
            elif name == "BRANCH":
                if any(walk(b, under_unbounded) for b in av[1]):
                    return True
            elif name in ("ASSERT", "ASSERT_NOT"):
                if walk(av[1], under_unbounded):
                    return True
        return False

    return tree is not None and walk(tree, False)


def _unwrap(items: Any) -> Any:
    """The top-level items of a repeat body, looking through plain groups."""
    items = list(items)
    while len(items) == 1 and str(items[0][0]) == "SUBPATTERN":
        items = list(items[0][1][-1])
    return items


def risky(pattern: str, tree: Any = None) -> bool:
    """True if a backtracking engine may need super-linear time for `pattern` on some line."""
    tree = parse(pattern) if tree is None else tree
    if tree is None:
        return True

    def walk(items: Any, under_repeat: bool) -> bool:
        for op, av in items:
            name = str(op)
            if name in _REPEATS:
                lo, hi, sub = av
                if under_repeat and hi > 1:
                    return True
                if walk(sub, under_repeat or hi == MAXREPEAT or hi > 16):
                    return True
            elif name == "SUBPATTERN":
                if walk(av[-1], under_repeat):
                    return True
            elif name == "BRANCH":
                if under_repeat:
                    return True
                if any(walk(b, under_repeat) for b in av[1]):
                    return True
            elif name in ("ASSERT", "ASSERT_NOT", "GROUPREF", "GROUPREF_EXISTS"):
                return True
        return False

    return walk(tree, False)


class Bounded:
    """A `regex` pattern whose searches give up after TIMEOUT_S (a timeout reads as no match);
    the same search/finditer calls the engine makes on stdlib patterns."""

    def __init__(self, compiled: Any):
        self._rx = compiled
        self.timeouts = 0

    def search(self, data: Any, pos: int = 0, endpos: Optional[int] = None) -> Any:
        try:
            return self._rx.search(data, pos, endpos if endpos is not None else len(data), timeout=TIMEOUT_S)
        except TimeoutError:
            self.timeouts += 1
            return None

    def finditer(self, data: Any) -> Iterator[Any]:
        it = self._rx.finditer(data, timeout=TIMEOUT_S)
        while True:
            try:
                m = next(it)
            except (StopIteration, TimeoutError):
                return
            yield m


def bounded_compile(pattern: Any) -> Any:
    """stdlib `re.compile(pattern)` for a pattern that cannot blow up, else a Bounded `regex` one.
    `pattern` is str or bytes (the engine matches bytes)."""
    text = pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern
    if not risky(text.replace("(?m)", "", 1) if text.startswith("(?m)") else text):
        return re.compile(pattern)
    import regex  # deferred: only patterns that can backtrack pay for it

    return Bounded(regex.compile(pattern, regex.V0))
