"""Infrastructure reproducers (reproducers/infra.py): a ctypes segfault, a Dynamo graph break under
fullgraph=True, a checkpoint save into a read-only output dir, torchrun preempted by SIGTERM.

The slow tests run them for real (torch in child processes); a scenario this machine cannot show
(no Dynamo, directory permissions not enforceable) reports itself skipped through kit.skip().
"""
from __future__ import annotations

import importlib.util

import pytest

from llmtriage.workflows import verify as V
from llmtriage import reproducers
from llmtriage.reproducers import RunResult

HAVE_TORCH = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None
INFRA = ["native-crash-segfault", "compile-error-fullgraph", "filesystem-error-readonly-checkpoint",
         "scheduler-kill-torchrun-sigterm"]
CATEGORY = {"native-crash-segfault": "native-crash", "compile-error-fullgraph": "compile-error",
            "filesystem-error-readonly-checkpoint": "filesystem-error",
            "scheduler-kill-torchrun-sigterm": "scheduler-kill"}


def test_infra_scenarios_are_registered_for_cpu():
    by_name = {s.name: s for s in reproducers.all_scenarios()}
    for name in INFRA:
        sc = by_name[name]
        assert sc.category == CATEGORY[name]
        assert "cpu" in sc.devices and sc.fixes
    assert [s.name for s in V.select_scenarios(["scheduler-kill"])] == ["scheduler-kill-torchrun-sigterm"]


def _run(sc, variant, rc, result, log="x\n"):
    return RunResult(sc.name, variant.name, "cpu", rc, log, 1.0, result)


def test_a_variant_that_calls_skip_makes_the_scenario_skipped_not_failed():
    sc = reproducers.get("filesystem-error-readonly-checkpoint")
    results = {(sc.name, sc.fail.name): _run(sc, sc.fail, 0, {"skipped": "permissions not enforced"})}
    for v in sc.fixes:
        results[(sc.name, v.name)] = _run(sc, v, 0, {"completed": True})
    out = V.ScenarioOutcome(sc.name, sc.category, "cpu", tuple(sc.rules))
    V._finish(sc, out, results)
    assert out.skipped == "permissions not enforced"
    assert out.ok and out.fixes == []
    assert "skipped" in V.format_table([out], 1.0, {})


def test_without_skip_a_silent_failure_is_not_reproduced():
    sc = reproducers.get("native-crash-segfault")
    results = {(sc.name, v.name): _run(sc, v, 0, {"completed": True}) for v in sc.variants()}
    out = V.ScenarioOutcome(sc.name, sc.category, "cpu", tuple(sc.rules))
    V._finish(sc, out, results)
    assert out.skipped is None and out.reproduced is False and not out.ok


@pytest.fixture(scope="module")
def infra_run():
    outcomes, _ = V.run_verification([reproducers.get(n) for n in INFRA], device="cpu", jobs=2)
    return {o.name: o for o in outcomes}


@pytest.mark.skipif(not HAVE_TORCH, reason="torch/transformers not installed (llmtriage[repro])")
@pytest.mark.reproducer
@pytest.mark.slow
@pytest.mark.parametrize("name", INFRA)
def test_infra_scenario_for_real(infra_run, name):
    o = infra_run[name]
    if o.skipped:
        pytest.skip(o.skipped)
    tail = "\n".join(o.run.log.splitlines()[-10:]) if o.run else ""
    assert o.reproduced, f"{name}: {o.problems}\n{tail}"
    assert o.detected and o.detected_as["category"] == CATEGORY[name], f"{name}: {o.problems}\n{tail}"
    for f in o.fixes:
        assert f.verified, f"{name}:{f.name}: {f.problems}"
    log = o.run.log
    if name == "native-crash-segfault":
        assert o.exit_code < 0 and "Segmentation fault" in log      # killed by SIGSEGV, faulthandler stack
    elif name == "compile-error-fullgraph":
        assert "torch._dynamo.exc" in log
        assert all(f.run.result.get("matches") for f in o.fixes)      # fixes compute the eager result
    elif name == "filesystem-error-readonly-checkpoint":
        assert "[Errno 13] Permission denied" in log and "checkpoint-2" in log
    elif name == "scheduler-kill-torchrun-sigterm":
        assert "got signal: 15" in log
        fix = o.fixes[0].run
        assert fix.result["resumed_from"] >= 3 and fix.result["finished"]   # no step redone from scratch
        assert "death signal" not in fix.log   # the resubmitted run was not killed
