"""Reproducers and `llmtriage verify`.

The `reproducer` tests run every CPU scenario for real (torch + transformers in child
processes, 2 at a time): the failure must happen, triage must name it, each fix must work.
They skip when torch/transformers are not importable. CUDA scenarios carry the `gpu` marker.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from llmtriage.workflows import verify as V
from llmtriage import reproducers

HAVE_REPRO = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "tokenizers"))
needs_repro = pytest.mark.skipif(not HAVE_REPRO, reason="torch/transformers not installed (llmtriage[repro])")

CPU_SCENARIOS = [s for s in reproducers.all_scenarios() if "cpu" in s.devices]
CUDA_SCENARIOS = [s for s in reproducers.all_scenarios() if "cuda" in s.devices]


# ------------------------------------------------------------------ no torch needed
def test_import_does_not_load_torch():
    code = ("import sys, llmtriage.reproducers as r, llmtriage.workflows.verify; r.all_scenarios(); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_registry_is_consistent():
    names = [s.name for s in reproducers.all_scenarios()]
    assert len(names) == len(set(names))
    for sc in reproducers.all_scenarios():
        assert sc.path.exists(), sc.path
        src = sc.path.read_text()
        assert sc.fixes, sc.name
        for v in sc.variants():
            assert f"def {v.func}(kit)" in src, (sc.name, v.name)
        assert set(sc.devices) <= {"cpu", "cuda"}


def test_seed_article_failures_are_covered():
    cats = {s.category for s in CPU_SCENARIOS}
    # OOM, weight loading failure (missing / damaged), NaN loss, seq too long, nothing trains,
    # version conflicts, no GPU: the failures the two seed articles name that a CPU can show
    assert {"host-oom", "weights-not-found", "checkpoint-corrupt", "nan-loss", "seq-too-long", "no-grad",
            "dependency-mismatch", "cuda-unavailable"} <= cats
    fixes = {f"{s.name}:{f.name}" for s in CPU_SCENARIOS for f in s.fixes}
    assert {"host-oom:grad-accum", "host-oom:grad-checkpointing", "host-oom-eval:no-grad",
            "host-oom-eval:bf16-weights", "nan-loss-lr:lower-lr-clip"} <= fixes


def test_select_by_name_category_and_errors():
    assert [s.name for s in V.select_scenarios(["seq-too-long"])] == ["seq-too-long"]
    assert {s.name for s in V.select_scenarios(["autograd-misuse"])} == {"autograd-backward-twice", "autograd-inplace"}
    assert [s.name for s in V.select_scenarios(["host-oom:grad-accum"])] == ["host-oom"]
    with pytest.raises(V.LlmtriageError):
        V.select_scenarios(["no-such-scenario"])


def _fake_outcomes():
    o = V.ScenarioOutcome("host-oom", "host-oom", "cpu", ())
    o.reproduced, o.detected = True, True
    o.detected_as = {"rule_id": "cpu-allocator-oom", "category": "host-oom"}
    o.fixes = [V.FixOutcome("grad-accum", True, 0, 1.0), V.FixOutcome("grad-checkpointing", False, 1, 1.0, ["exited 1"])]
    return [o]


def test_json_shape_and_record_roundtrip(tmp_path):
    env = {"torch": "2.x", "transformers": "5.x", "python": "3.11"}
    data = V.to_json(_fake_outcomes(), env, 2.0)
    s = data["scenarios"][0]
    assert {"name", "device", "reproduced", "detected_as", "fixes", "seconds"} <= set(s)
    assert set(s["detected_as"]) == {"rule_id", "category"}
    assert [{k: f[k] for k in ("name", "verified")} for f in s["fixes"]] == [
        {"name": "grad-accum", "verified": True}, {"name": "grad-checkpointing", "verified": False}]
    path = V.record(_fake_outcomes(), env, tmp_path / "verified.json")
    rec = json.loads(path.read_text())
    assert rec["fixes"]["host-oom:grad-accum"]["devices"]["cpu"]["torch"] == "2.x"
    got = V.verification_for("host-oom:grad-accum", rec)
    assert got["verified"] is False  # the scenario as a whole failed: nothing counts as verified
    assert V.verification_for("nope:nope", rec) is None
    table = V.format_table(_fake_outcomes(), 2.0, env)
    assert "host-oom" in table and "grad-checkpointing FAIL" in table


def test_verified_file_is_generated_not_handwritten():
    path = V.verified_path()
    if not path.exists():
        pytest.skip("no verified.json recorded yet")
    data = json.loads(path.read_text())
    assert "llmtriage verify --record" in data["about"]
    for key, entry in data["fixes"].items():
        sc_name, fix = key.split(":", 1)
        assert reproducers.get(sc_name).fix(fix)  # every record names an existing variant
        for dev, r in entry["devices"].items():
            assert {"verified", "torch", "transformers", "date"} <= set(r)


def test_saved_genuine_logs_agree_with_their_meta():
    """fixtures/reproduced/<scenario>.<variant>[.transformers-N].log: a genuine log saved by
    `verify --save-logs`, its .meta.yaml beside it (versions, what triage named). The golden of a
    failing run names the rule recorded at save time; a verified fix's log has no error of the
    scenario's category. Logs of both transformers majors are kept where their wording differs (and of an
    older minor, `.transformers-4.46.log`, where it words the failure differently again), and
    a scenario that runs on both devices keeps its CUDA log as `<scenario>.<variant>.cuda.log` where
    the GPU words the failure differently (a device-side assert instead of the CPU's IndexError)."""
    import yaml

    root = Path(__file__).resolve().parents[1] / "fixtures" / "reproduced"
    majors = set()
    for log in sorted(root.glob("*.log")):
        meta = yaml.safe_load(log.with_name(log.name[:-4] + ".meta.yaml").read_text(encoding="utf-8"))
        sc = reproducers.get(meta["scenario"])
        assert meta["variant"] in [v.name for v in sc.variants()], log.name
        stem = f"{meta['scenario']}.{meta['variant']}"
        major, minor = str(meta["transformers"]).split(".")[:2]
        majors.add(major)
        names = (f"{stem}.log", f"{stem}.transformers-{major}.log", f"{stem}.transformers-{major}.{minor}.log")
        if meta.get("device") == "cuda":
            names += (f"{stem}.cuda.log",)
        assert log.name in names, log.name
        golden = json.loads(log.with_name(log.name[:-4] + ".expected.json").read_text(encoding="utf-8"))
        if meta["kind"] == "fail":
            assert golden["findings"][0]["rule_id"] == meta["detected_as"]["rule_id"], log.name
        elif meta["verified"]:
            assert not [f for f in golden["findings"]
                        if f["severity"] == "error" and f["category"] == meta["category"]], log.name
    assert {"4", "5"} <= majors


def test_cli_list():
    from click.testing import CliRunner

    from llmtriage.cli.verify import verify

    res = CliRunner().invoke(verify, ["--list", "--format", "json"])
    assert res.exit_code == 0, res.output
    names = [s["name"] for s in json.loads(res.output)["scenarios"]]
    assert "host-oom" in names
    res = CliRunner().invoke(verify, ["definitely-unknown"])
    assert res.exit_code == 2


# ------------------------------------------------------------------ real reproducers
@functools.lru_cache(maxsize=1)
def _probe() -> dict:
    return V.probe_environment()


@pytest.fixture(scope="module")
def cpu_run():
    outcomes, env = V.run_verification(CPU_SCENARIOS, device="cpu", jobs=2)
    return {o.name: o for o in outcomes}, env


@needs_repro
@pytest.mark.reproducer
@pytest.mark.parametrize("name", [s.name for s in CPU_SCENARIOS])
def test_cpu_scenario(cpu_run, name):
    outcomes, env = cpu_run
    o = outcomes[name]
    if o.skipped:
        pytest.skip(o.skipped)
    tail = "\n".join(o.run.log.splitlines()[-8:]) if o.run else ""
    assert o.reproduced, f"{name}: failure not reproduced: {o.problems}\n{tail}"
    assert o.detected, f"{name}: not recognised: {o.problems}\n{tail}"
    for f in o.fixes:
        ftail = "\n".join(f.run.log.splitlines()[-8:]) if f.run else ""
        assert f.verified, f"{name}:{f.name}: {f.problems}\n{ftail}"


@needs_repro
@pytest.mark.reproducer
@pytest.mark.gpu
@pytest.mark.parametrize("name", [s.name for s in CUDA_SCENARIOS])
def test_cuda_scenario(name):
    env = _probe()
    if not env.get("cuda_available"):
        pytest.skip("CUDA is not available")
    outcomes, _ = V.run_verification([reproducers.get(name)], device="cuda", jobs=1, env=env)
    o = outcomes[0]
    if o.skipped:
        pytest.skip(o.skipped)
    assert o.ok, o.problems
