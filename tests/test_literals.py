"""Required literals: the gate of the stdlib path and the content of the literal Set (LiteralSet).

A literal that a match can lack would silently drop findings on the paths that use the gate, so
besides the unit cases every shipped pattern is checked against every line of every fixture."""
import re
from pathlib import Path

import pytest

from llmtriage.engine.literals import MIN_LITERAL, required_literals

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("pattern, expected", [
    ("CUDA out of memory", {("CUDA out of memory", False)}),
    ("(?i)nan loss", {("nan loss", True)}),
    (r"\d+ GiB free", {(" GiB free", False)}),
    ("Error: (?P<msg>.*)", {("Error: ", False)}),
    ("(?:CUDA|NCCL) error", {(" error", False)}),                 # a run beats a two-way branch of equal length
    ("(?:CUDA|HIP|XPU)x", {("CUDA", False), ("HIP", False), ("XPU", False)}),
    ("(?:abc)+", {("abc", False)}),
    ("x(?i:abcdef)", {("abcdef", True)}),
    ("(?i)ab(?-i:cdefg)", {("cdefg", False)}),
    ("out of (?:memory)", {("out of memory", False)}),           # a literal group continues the run
    ("a?bcd", {("bcd", False)}),
    (r"tok(?:en)?s/s", {("tok", False)}),
    ("(?:abc)?de", None),                                         # optional parts require nothing
    ("(?:abcd|x)", None),                                         # one branch has no literal of 3
    (r"\w+ \d+", None),
    ("[", None),                                                  # not a pattern at all
])
def test_required_literals(pattern, expected):
    assert required_literals(pattern) == expected


def _rule_patterns(ruleset):
    out = set()
    for r in ruleset.rules:
        m = r["match"]
        out.update(p["regex"] for key in ("any", "requires", "unless") for p in m[key])
    return sorted(out)


def _holds(line: bytes, lits) -> bool:
    low = line.lower()
    return any((text.encode().lower() in low) if icase else (text.encode() in line) for text, icase in lits)


@pytest.mark.slow   # every pattern on every fixture line (stdlib re)
def test_every_shipped_pattern_match_on_every_fixture_line_holds_one_of_its_literals(ruleset):
    lines = set()
    for path in (ROOT / "fixtures").rglob("*.log"):
        lines.update(path.read_bytes().splitlines())
    for r in ruleset.rules:
        for ex in r.get("examples", {}).get("match", []):
            lines.update(ex["log"].encode().splitlines())
    patterns = _rule_patterns(ruleset)
    gated = checked = 0
    for p in patterns:
        lits = required_literals(p)
        if lits is None:
            continue
        gated += 1
        assert all(len(t) >= MIN_LITERAL for t, _ in lits)
        rx = re.compile(p.encode())
        for line in lines:
            if rx.search(line):
                checked += 1
                assert _holds(line, lits), (p, lits, line[:200])
    assert gated >= 0.95 * len(patterns) and checked > 1000
