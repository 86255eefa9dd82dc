"""`match.checks`: a rule's numeric comparisons of its captures decide between rules that share a
line (multimodal placeholders vs features: a few extra placeholders are the sample's text, fewer
are truncation, twice as many are a multi-image sample cut and its image dropped)."""
import pytest

from llmtriage import analyze
from llmtriage.templates import checks_hold


@pytest.mark.parametrize("checks,caps,ok", [
    (["tokens > features"], {"tokens": "301", "features": "300"}, True),
    (["tokens > features"], {"tokens": "300", "features": "301"}, False),
    (["tokens <= features * 1.05"], {"tokens": "720", "features": "360"}, False),
    (["tokens <= features * 1.05"], {"tokens": "2117", "features": "2116"}, True),
    (["count >= 2"], {"count": "1"}, False),
    (["n == m + 1"], {"n": "4", "m": "3"}, True),
    (["size < 1,000"], {"size": "5"}, True),           # not a valid right-hand side: no check made
    (["tokens > features"], {"tokens": "301"}, True),  # an absent capture passes
    (["tokens > features"], {"tokens": "many", "features": "3"}, True),   # not a number: passes
])
def test_checks_hold(checks, caps, ok):
    assert checks_hold(checks, caps) is ok


def _top(text):
    rep = analyze(text)
    errors = [f for f in rep.findings if f.severity == "error"]
    return errors[0].rule_id if errors else None


@pytest.mark.parametrize("tokens,features,rule", [
    (2117, 2116, "mm-placeholders-exceed-features"),
    (1952, 2916, "multimodal-tokens-truncated"),
    (720, 360, "multimodal-tokens-truncated"),
])
def test_placeholder_counts_pick_the_cause(tokens, features, rule):
    log = ("Traceback (most recent call last):\n"
           '  File "/opt/conda/lib/python3.11/site-packages/transformers/models/qwen2_5_vl/modeling_qwen2_5_vl.py", line 1395, in forward\n'
           "    raise ValueError(\n"
           f"ValueError: Image features and image tokens do not match: tokens: {tokens}, features {features}\n")
    assert _top(log) == rule


def test_a_later_hit_that_passes_the_checks_counts():
    """The first hit fails the check (fewer placeholders: truncation's), a later rank's passes: the rule
    fires on that later line with that line's numbers."""
    err = "ValueError: Image features and image tokens do not match: tokens: {t}, features {f}\n"
    log = ("[rank0]: " + err.format(t=1952, f=2916)
           + "step 3 ok\n" * 3
           + "[rank1]: " + err.format(t=2117, f=2116))
    rep = analyze(log)
    hit = [f for f in rep.findings if f.rule_id == "mm-placeholders-exceed-features"]
    assert hit, [f.rule_id for f in rep.findings]
    assert hit[0].line == 5
    assert hit[0].captures["tokens"] == "2117" and "2117" in hit[0].message


def test_no_hit_passing_the_checks_stays_silent():
    err = "ValueError: Image features and image tokens do not match: tokens: {t}, features {f}\n"
    log = err.format(t=1952, f=2916) + err.format(t=720, f=360)
    assert not [f for f in analyze(log).findings if f.rule_id == "mm-placeholders-exceed-features"]
