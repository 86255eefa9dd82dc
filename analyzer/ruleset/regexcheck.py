"""Is a rule pattern usable and safe? (`check_regex`, run on every pattern when rules are validated.)

A pattern must compile in `regex` (V0, what confirms hits under a timeout) and in RE2 (the Set
that scans blocks), must not match the empty string, and must not backtrack badly: no nested
unbounded quantifiers, no repeat over alternatives that start alike (`regexsafety.blowup`), and
not too slow on pumped and adversarial inputs. Cost, measured on ~770 patterns: the stdlib tree
is parsed once and shared by every structural check; RE2 only parses (a Set entry) unless that
fails and its message is needed; the pump probes, which look for exponential backtracking, run
only for patterns that can backtrack super-linearly at all (`regexsafety.risky`).
"""
from __future__ import annotations

from typing import Any, Optional

import regex

from llmtriage.ruleset import regexsafety

try:  # pragma: no cover - depends on the install
    import re2
except ImportError:  # pragma: no cover
    re2 = None

ADVERSARIAL_LEN = 16 * 1024      # the matcher never hands more than this to `regex`
REGEX_BUDGET_S = 0.25

_RX: dict[str, Any] = {}
_TREES: dict[str, Any] = {}
_VERDICTS: dict[tuple[str, bool], Optional[str]] = {}
_PROBES: list[str] = []


def compiled(pattern: str) -> Any:
    """`regex.compile(pattern, V0)`, once per pattern per process (compiling is most of the cost)."""
    c = _RX.get(pattern)
    if c is None:
        c = _RX[pattern] = regex.compile(pattern, regex.V0)
    return c


def group_names(pattern: str) -> set[str]:
    """The named groups of a pattern that passed `check_regex`."""
    tree = _TREES.get(pattern)
    if tree is not None:
        return set(tree.state.groupdict)
    return set(compiled(pattern).groupindex)


def _re2_problem(pattern: str) -> Optional[str]:
    if re2 is None:
        return None
    opts = re2.Options()
    opts.log_errors = False
    try:
        re2.Set.SearchSet(opts).Add(pattern)     # parses only: ~40x cheaper than a compile
        return None
    except Exception:  # noqa: BLE001 - the compile below says why
        pass
    try:
        re2.compile(pattern, opts)
    except Exception as exc:  # noqa: BLE001 - any RE2 error is the pattern's problem
        msg = exc.args[0] if exc.args else exc
        if isinstance(msg, bytes):
            msg = msg.decode(errors="replace")
        return str(msg)
    return "rejected by RE2"


def check_regex(pattern: str, probe: bool = True) -> Optional[str]:
    """None if `pattern` is usable by both engines and safe; else the problem in one line.

    `probe=False` (the shipped rules on the triage path; CI checks them with probes) keeps every
    structural check but skips the timed probes, and with them the `regex` compile, unless the
    pattern can backtrack super-linearly (then it runs in `regex` at scan time: check it fully)."""
    key = (pattern, probe)
    if key not in _VERDICTS:
        _VERDICTS[key] = _check(pattern, probe)
    return _VERDICTS[key]


def non_ascii_problem(pattern: str) -> Optional[str]:
    """Lines are matched as bytes, a non-ASCII character as its UTF-8 bytes: inside `[...]` or
    under a quantifier it stands for one byte, not the character (`[：:]` never matches '：')."""
    in_class = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif not c.isascii():
                return (f"non-ASCII {c!r} inside a character class matches one byte of its UTF-8 form, not the "
                        f"character; write it as an alternation: (?:[...]|{c})")
        elif c == "[":
            in_class = True
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":      # a leading ']' belongs to the class
                i += 1
            continue
        elif not c.isascii() and i + 1 < n and pattern[i + 1] in "*+?{":
            return f"a quantifier after non-ASCII {c!r} repeats its last UTF-8 byte only; group it: (?:{c})?"
        i += 1
    return None


def _check(pattern: str, probe: bool) -> Optional[str]:
    why = non_ascii_problem(pattern)
    if why:
        return why
    tree = regexsafety.parse(pattern)
    if tree is not None and not probe and not regexsafety.risky(pattern, tree):
        return _check_structure(pattern, tree)
    try:
        rx = compiled(pattern)
    except regex.error as exc:
        return f"invalid regex: {exc}"
    why = _re2_problem(pattern)
    if why:
        return f"not in the RE2 subset ({why}); no look-around, backreferences or possessive quantifiers"
    if regexsafety.nested_quantifier(tree):
        return "nested unbounded quantifiers (e.g. '(a+)+') can backtrack catastrophically; bound the inner or outer one"
    why = regexsafety.blowup(pattern, tree) if tree is not None else None
    if why:
        return why
    if tree is None or regexsafety.risky(pattern, tree):
        for probe in regexsafety.pump_probes(pattern, tree=tree):
            try:
                rx.search(probe, timeout=REGEX_BUDGET_S)
            except TimeoutError:
                return (f"can backtrack exponentially: too slow on {probe[:8]!r}... x{len(probe)} (over {REGEX_BUDGET_S}s); "
                        "make alternatives under a repeat start differently (not '(x|xx)+'), or bound the repeat")
    if rx.search(""):
        return "matches the empty string, so it would hit every line"
    for probe in adversarial_inputs():
        try:
            rx.search(probe, timeout=REGEX_BUDGET_S)
        except TimeoutError:
            return (f"too slow on adversarial input ({probe[:8]!r}... x{len(probe)}): exceeded "
                    f"{REGEX_BUDGET_S}s; avoid overlapping unbounded gaps like '.*a.*b'")
    return None


def _check_structure(pattern: str, tree: Any) -> Optional[str]:
    """`check_regex` without the timed probes, for a pattern the stdlib parses and that cannot
    backtrack super-linearly (same messages as the full check)."""
    why = _re2_problem(pattern)
    if why:
        return f"not in the RE2 subset ({why}); no look-around, backreferences or possessive quantifiers"
    if regexsafety.nested_quantifier(tree):
        return "nested unbounded quantifiers (e.g. '(a+)+') can backtrack catastrophically; bound the inner or outer one"
    why = regexsafety.blowup(pattern, tree)
    if why:
        return why
    if tree.getwidth()[0] == 0:      # can match zero characters: does it match the empty line?
        try:
            if compiled(pattern).search(""):
                return "matches the empty string, so it would hit every line"
        except regex.error as exc:
            return f"invalid regex: {exc}"
    _TREES[pattern] = tree
    return None


def adversarial_inputs() -> list[str]:
    if not _PROBES:
        n = ADVERSARIAL_LEN
        _PROBES.extend([
            "a" * n + "!",
            " " * n + "x",
            ("word " * (n // 5))[:n],
            ("Error: " * (n // 7))[:n],
            ("0." * (n // 2))[:n],
        ])
    return _PROBES
