"""fastre.Gate: the lines it gives are exactly the lines holding a match, whatever the block's shape."""
import random

from llmtriage.engine.fastre import Gate


def test_gate_lines_are_the_lines_with_a_match():
    gate = Gate(rb"ab|c")
    rnd = random.Random(7)
    for _ in range(3000):
        view = bytes(rnd.choice(b"abc\nx") for _ in range(rnd.randint(0, 40)))
        want = [(i, line) for i, line in enumerate(view.split(b"\n")) if b"ab" in line or b"c" in line]
        assert list(gate.lines(view)) == want
        assert gate(view) == bool(want)


def test_gate_case_folding_is_a_superset_of_re_on_bytes():
    gate = Gate(rb"(?i)resum")
    assert gate(b"\xff\xfe RESUMING from") and gate(b"Resumed") and not gate(b"restart")
