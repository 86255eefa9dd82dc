"""Full-log fixtures: the folder names the expected category; goldens pin the whole report.

fixtures/<category>/<slug>.log   top finding must have that category
fixtures/healthy/<slug>.log      no error-severity finding
fixtures/unknown/<slug>.log      top finding is `unknown`
`<slug>.expected.json` beside a log is compared with the report (`pytest --update-golden` rewrites).
"""
import json
from pathlib import Path

import pytest

from llmtriage import reports_to_dict, scan_source

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
# fixtures/jobs/ holds multi-rank job folders (tests/test_jobs.py); fixtures/reproduced/ genuine reproducer
# logs (tests/test_reproducers.py checks them against their .meta.yaml).
LOGS = sorted(p for p in FIXTURES.rglob("*.log") if p.relative_to(FIXTURES).parts[0] != "jobs")
_REPORTS: dict = {}      # path -> report of the session engine: each fixture is scanned once per process


def _report(engine, path):
    rep = _REPORTS.get(path)
    if rep is None:
        rep = _REPORTS[path] = scan_source(engine, path, name=path.name)
    return rep


def _golden_view(report):
    d = reports_to_dict([report])["reports"][0]
    return {
        "findings": [{k: f[k] for k in ("rule_id", "category", "severity", "line", "count", "rank", "message")}
                     for f in d["findings"]],
        "exception": d["exception"]["type"] if d["exception"] else None,
    }


@pytest.mark.parametrize("path", LOGS, ids=[str(p.relative_to(FIXTURES)) for p in LOGS])
def test_fixture(engine, path, golden):
    report = _report(engine, path)
    folder = path.relative_to(FIXTURES).parts[0]
    errors = [f for f in report.findings if f.severity == "error"]
    if folder == "healthy":
        assert not errors, [f.rule_id for f in errors]
    elif folder in ("reproduced", "jobs"):
        pass  # genuine reproducer logs are checked by test_reproducers / their meta files
    else:
        assert errors, "no error finding"
        assert errors[0].category == folder, [(f.rule_id, f.category) for f in errors[:3]]
        assert report.findings[0] is errors[0]
    golden(path.with_suffix(".expected.json"), json.dumps(_golden_view(report), indent=2, ensure_ascii=False) + "\n")


def test_every_rule_is_top_of_a_fixture(ruleset):
    # read from the goldens: test_fixture proves every golden equals its fixture's report
    tops = set()
    for path in LOGS:
        golden = path.with_suffix(".expected.json")
        findings = json.loads(golden.read_text(encoding="utf-8"))["findings"] if golden.exists() else []
        if findings:
            tops.add(findings[0]["rule_id"])
    missing = sorted(r["id"] for r in ruleset.rules if r["id"] not in tops)
    assert not missing, f"rules that are the top finding of no fixture: {missing}"


@pytest.mark.slow   # the reference engine runs every pattern on every block: ~80 s for all four modes
@pytest.mark.parametrize("mode", ["auto", "set", "literal-set", "python", "hyperscan"])
def test_fast_path_equals_reference_path_on_every_fixture(ruleset, mode):
    """auto: fixtures are small, so the gated set (literal gate + one RE2 program per candidate)
    answers them; set: the pattern Set from the first byte; literal-set: the thrash fallback
    (LiteralSet) answers every block, confirmed line by line."""
    from llmtriage import get_engine
    from llmtriage.engine.re2set import HAVE_RE2, RE2_SET_MEM, LiteralSet, compile_set

    if mode == "hyperscan":
        pytest.importorskip("hyperscan")
    if mode in ("set", "literal-set") and not HAVE_RE2:
        pytest.skip("google-re2 not installed")
    fast = get_engine(ruleset, mode="auto" if mode in ("set", "literal-set") else mode)
    ref = get_engine(ruleset, mode="reference")
    if mode == "set":
        fast.set = compile_set(fast._forms, RE2_SET_MEM)[0]
    if mode == "literal-set":
        fast.set = LiteralSet(fast.patterns, fast.literal_index())
        fast.inexact = set(range(len(fast.patterns)))
    for path in LOGS:
        a = [(f.rule_id, f.line, f.count, f.last_line, f.captures) for f in scan_source(fast, path).findings]
        b = [(f.rule_id, f.line, f.count, f.last_line, f.captures) for f in scan_source(ref, path).findings]
        assert a == b, path


def test_a_missing_golden_fails_without_any_opt_in(golden, tmp_path, monkeypatch, request):
    if request.config.getoption("--update-golden"):
        pytest.skip("goldens are being regenerated")
    monkeypatch.delenv("LLMTRIAGE_UPDATE_GOLDENS", raising=False)
    monkeypatch.delenv("CI", raising=False)
    missing = tmp_path / "deleted.expected.json"
    with pytest.raises(pytest.fail.Exception, match="is missing"):
        golden(missing, "{}\n")
    assert not missing.exists()
    monkeypatch.setenv("LLMTRIAGE_UPDATE_GOLDENS", "1")
    golden(missing, "{}\n")
    assert missing.read_text(encoding="utf-8") == "{}\n"
