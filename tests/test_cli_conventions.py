"""CLI conventions (issue 17): one bad input never loses the others, -q, -o, --config, --select,
--top bounds, visible baselines, fix snippets by default."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OOM_LOG = ROOT / "fixtures" / "cuda-oom" / "torchrun-4gpu-sft-backward.log"
SEGV_LOG = ROOT / "fixtures" / "native-crash" / "sft-segfault-bitsandbytes-step1.log"


@pytest.fixture
def inputs(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x00\x01\x02ELF" * 64)
    return [str(OOM_LOG), str(tmp_path / "missing.log"), str(empty), str(binary), str(SEGV_LOG)]


def test_bad_inputs_are_reported_per_file_in_json_and_the_good_ones_still_triaged(cli, inputs):
    r = cli("--format", "json", *inputs)
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    reps = {Path(x["source"]).name: x for x in doc["reports"]}
    assert [Path(x["source"]).name for x in doc["reports"]] == [Path(p).name for p in inputs]
    assert reps[OOM_LOG.name]["findings"][0]["category"] == "cuda-oom"
    assert reps[SEGV_LOG.name]["findings"][0]["category"] == "native-crash"
    assert "no such file" in reps["missing.log"]["error"].lower() or "cannot open" in reps["missing.log"]["error"]
    assert "empty input" in reps["empty.log"]["error"]
    assert "binary" in reps["core.bin"]["error"]
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 3 and all(x.startswith("error: ") for x in err) and "Traceback" not in r.stderr.decode()


def test_bad_inputs_in_sarif_github_and_human(cli, inputs):
    r = cli("--format", "sarif", *inputs)
    assert r.returncode == 2
    run = json.loads(r.stdout)["runs"][0]
    assert {x["ruleId"] for x in run["results"]} >= {"torch-cuda-oom", "segmentation-fault"}
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert run["invocations"][0]["executionSuccessful"] is False and len(notes) == 3
    r = cli("--format", "github", *inputs)
    assert r.returncode == 2
    assert r.stdout.decode().count("title=llmtriage%3A input error::") == 3
    r = cli("--no-color", *inputs)
    assert r.returncode == 2
    out = r.stdout.decode()
    assert out.count("✖ input error: ") == 3 and "[cuda-oom / torch-cuda-oom]" in out


def test_parallel_jobs_report_bad_inputs_the_same_way(cli, inputs):
    seq = json.loads(cli("--format", "json", *inputs).stdout)
    par = cli("--format", "json", "-j", "2", *inputs)
    assert par.returncode == 2
    assert [r.get("error", "")[:20] for r in json.loads(par.stdout)["reports"]] == \
           [r.get("error", "")[:20] for r in seq["reports"]]


def test_quiet_prints_one_line_per_input(cli, inputs):
    r = cli("-q", *inputs)
    lines = r.stdout.decode().splitlines()
    assert len(lines) == len(inputs)
    assert lines[0].startswith(f"{OOM_LOG}: error cuda-oom/torch-cuda-oom") and lines[0].endswith("line 42")
    assert "input error" in lines[1]


def test_output_file_and_select(cli, tmp_path):
    out = tmp_path / "report.json"
    r = cli("--format", "json", "-o", str(out), str(OOM_LOG))
    assert r.returncode == 1 and r.stdout == b""
    cats = [f["category"] for f in json.loads(out.read_text(encoding="utf-8"))["reports"][0]["findings"]]
    assert cats[0] == "cuda-oom" and len(set(cats)) > 1
    doc = json.loads(cli("--format", "json", "--select", "cuda-oom", str(OOM_LOG)).stdout)
    assert {f["category"] for f in doc["reports"][0]["findings"]} == {"cuda-oom"}
    doc = json.loads(cli("--format", "json", "--only", "torchrun-child-failed", str(OOM_LOG)).stdout)
    assert [f["rule_id"] for f in doc["reports"][0]["findings"]] == ["torchrun-child-failed"]
    r = cli("--only", "native-crash", str(OOM_LOG))
    assert r.returncode == 0


@pytest.mark.parametrize("top", ["0", "-1"])
def test_top_rejects_zero_and_negative(cli, top):
    r = cli("--top", top, str(OOM_LOG))
    assert r.returncode == 2 and b"--top" in r.stderr and b"Traceback" not in r.stderr


def test_config_option_names_the_file(cli, tmp_path):
    cfg = tmp_path / "team.yaml"
    cfg.write_text("disable: [torch-cuda-oom]\n", encoding="utf-8")
    doc = json.loads(cli("--format", "json", "--config", str(cfg), str(OOM_LOG), cwd=str(tmp_path)).stdout)
    assert "torch-cuda-oom" not in [f["rule_id"] for f in doc["reports"][0]["findings"]]
    r = cli("--config", str(tmp_path / "nope.yaml"), str(OOM_LOG))
    assert r.returncode == 2 and b"--config names a file that does not exist" in r.stderr


def test_baselined_findings_are_announced_and_no_baseline_shows_them(cli, tmp_path):
    log = tmp_path / "oom.log"
    log.write_bytes(OOM_LOG.read_bytes())
    r = cli("baseline", "oom.log", cwd=str(tmp_path))
    (tmp_path / ".llmtriage-baseline.json").write_bytes(r.stdout)
    (tmp_path / ".llmtriage.yaml").write_text("baseline: .llmtriage-baseline.json\n", encoding="utf-8")
    r = cli("--no-color", "oom.log", cwd=str(tmp_path))
    out = r.stdout.decode()
    assert r.returncode == 0 and "findings baselined (see .llmtriage-baseline.json" in out
    r = cli("--no-color", "--no-baseline", "oom.log", cwd=str(tmp_path))
    assert r.returncode == 1 and "baselined" not in r.stdout.decode()


def test_fix_snippets_are_shown_without_verbose(cli):
    out = cli("--no-color", str(OOM_LOG)).stdout.decode()
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in out


def test_a_cut_evidence_line_ends_with_an_ellipsis(cli):
    line = [x for x in cli("--no-color", str(OOM_LOG)).stdout.decode().splitlines() if x.startswith("    line 42")][0]
    assert line.endswith("…") and "torch.OutOfMemoryError" in line
