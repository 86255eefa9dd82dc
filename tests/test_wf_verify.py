"""`llmtriage verify` totals (issue 17, item 9): the total is the sum of the per-scenario times, and a
scenario this machine cannot run is counted as skipped, never as verified."""
from __future__ import annotations

import json
import re

from click.testing import CliRunner

from llmtriage.cli.verify import verify
from llmtriage.workflows import verify as V


def _outcomes() -> list:
    ok = V.ScenarioOutcome("oom-batch", "cuda-oom", "cpu", ("torch-cuda-oom",), reproduced=True, detected=True,
                           detected_as={"rule_id": "torch-cuda-oom", "category": "cuda-oom"}, seconds=12.34)
    ok.fixes = [V.FixOutcome("smaller-batch", True, 0, 6.0)]
    bad = V.ScenarioOutcome("nan-lr", "nan-loss", "cpu", ("trainer-loss-nan",), reproduced=True, detected=False,
                            detected_as={"rule_id": "other", "category": "unknown"}, seconds=3.21,
                            problems=["top finding is other"])
    skipped = V.ScenarioOutcome("readonly-ckpt", "filesystem-error", "cpu", (), skipped="permissions not enforced",
                                seconds=1.04)
    return [ok, bad, skipped]


def test_status_never_counts_a_skipped_scenario_as_verified():
    ok, bad, skipped = _outcomes()
    assert (ok.status, bad.status, skipped.status) == ("verified", "failed", "skipped")
    assert skipped.ok          # a skip fails nothing (exit status), but it is not verified
    t = V.totals([ok, bad, skipped])
    assert (t["verified"], t["failed"], t["skipped"]) == (1, 1, 1)
    doc = V.to_json([ok, skipped], {}, 5.0)
    assert doc["totals"]["verified"] == 1 and doc["totals"]["skipped"] == 1
    assert [s["status"] for s in doc["scenarios"]] == ["verified", "skipped"]


def test_table_total_is_the_sum_of_the_per_scenario_times():
    outs = _outcomes()
    table = V.format_table(outs, 9.9, {"torch": "2.5", "transformers": "4.46"})
    col = [float(m) for m in re.findall(r"(\d+\.\d)\s*$", "\n".join(table.splitlines()[1:4]), re.M)]
    assert col == [12.3, 3.2, 1.0]
    last = table.splitlines()[-1]
    assert last.startswith("1/2 scenarios verified, 1 skipped;"), last
    assert f"runs took {sum(col):.1f}s in all" in last and "9.9s wall" in last


def test_cli_progress_says_skipped_and_the_summary_matches(monkeypatch):
    outs = _outcomes()

    def fake_run(scenarios, *, device, jobs, env, progress, include_unsupported):
        for i, o in enumerate(outs, 1):
            progress(o, i, len(outs))
        return outs, env

    monkeypatch.setattr(V, "select_scenarios", lambda names: [])
    monkeypatch.setattr(V, "probe_environment", lambda: {"torch": "2.5", "transformers": "4.46"})
    monkeypatch.setattr(V, "run_verification", fake_run)
    r = CliRunner().invoke(verify, ["--format", "json"])
    assert r.exit_code == 1                          # one scenario failed
    assert "readonly-ckpt: skipped (permissions not enforced)" in r.stderr
    assert "readonly-ckpt: ok" not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["totals"] == {"verified": 1, "failed": 1, "skipped": 1, "run_seconds": 16.5}
