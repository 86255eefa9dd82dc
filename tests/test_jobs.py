"""Job-level analysis (`llmtriage job`) and run diff (`llmtriage diff`) on fixtures/jobs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmtriage.engine.logwindow import parse_time
from llmtriage.job.analysis import analyze_job
from llmtriage.job.diff import diff_runs, template_of
from llmtriage.job.inputs import rank_from_name



def run_cli(*args: str):
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], capture_output=True, env=env, timeout=300)

JOBS = Path(__file__).resolve().parents[1] / "fixtures" / "jobs"


@pytest.mark.parametrize("target, first, category, timed_out", [
    ("2rank-perfile-ts", 1, "cuda-oom", 1),
    ("8rank-perfile-nots", 5, "cuda-oom", 7),
    ("8rank-perfile-ts-two-causes", 6, "cuda-oom", 6),
    ("64rank-perfile", 42, "cuda-oom", 63),
    ("64rank-interleaved.log", 37, "cuda-oom", 63),
    ("8rank-interleaved-ts.log", 3, "cuda-oom", 7),
])
def test_first_failing_rank(target, first, category, timed_out):
    res = analyze_job([str(JOBS / target)])
    assert res.first is not None and res.first.rank == first
    assert res.root.category == category and res.root.severity == "error"
    assert sum(1 for r in res.ranks if r.status == "cascade") == timed_out
    # the cause first, then where it happened, then the cascade
    assert res.cascade.startswith(f"{res.root.title} ({category}) on rank {first}"), res.cascade
    assert "timed out in a collective" in res.cascade
    assert res.phase == "training" and res.step is not None


def test_timestamps_pick_the_earlier_of_two_causes():
    res = analyze_job([str(JOBS / "8rank-perfile-ts-two-causes")])
    assert res.first.rank == 6 and res.first.time_text.startswith("E0301 10:00:05")
    assert "1 rank then reported cuda-oom (2)" in res.cascade


def test_timeout_only_job_names_the_silent_rank():
    res = analyze_job([str(JOBS / "timeout-only-interleaved.log")])
    assert res.root.category == "nccl-timeout"
    assert res.silent_ranks == [0] and res.world_size == 8
    assert res.cascade.startswith("No rank printed a root-cause error") and "Rank 0 never reported" in res.cascade


def test_globs_and_parallel_jobs_give_the_same_answer():
    a = analyze_job([str(JOBS / "64rank-perfile" / "rank-*.log")], jobs=2)
    b = analyze_job([str(JOBS / "64rank-perfile")], jobs=1)
    assert a.first.rank == b.first.rank == 42 and len(a.ranks) == len(b.ranks) == 64
    assert [r.status for r in a.ranks] == [r.status for r in b.ranks]


def test_json_shape_keeps_standard_reports():
    res = analyze_job([str(JOBS / "2rank-perfile-ts")])
    d = res.to_dict()
    assert d["version"] == 1 and len(d["reports"]) == 2
    job = d["job"]
    assert job["first_rank"] == 1 and job["category"] == "cuda-oom" and job["root_cause"]["rule_id"] == "torch-cuda-oom"
    assert job["time"] == "2025-03-01 10:00:05,902"
    assert [r["rank"] for r in job["ranks"]] == [0, 1] and job["ranks"][1]["status"] == "cause"
    for rep in d["reports"]:
        assert {"source", "findings", "phase", "step"} <= set(rep)
        assert all({"rule_id", "category", "severity", "line"} <= set(f) for f in rep["findings"])


def test_cli_job_human_json_and_exit_codes():
    p = run_cli("job", str(JOBS / "8rank-perfile-nots"), "--no-color")
    assert p.returncode == 1, p.stderr
    out = p.stdout.decode()
    assert "first failing rank: rank 5" in out and "→ rank 5" in out and "7 ranks then timed out" in out
    p = run_cli("job", "--format", "json", "--jobs", "2", str(JOBS / "64rank-interleaved.log"))
    d = json.loads(p.stdout)
    assert d["job"]["first_rank"] == 37 and d["job"]["mode"] == "interleaved" and d["job"]["world_size"] == 64
    p = run_cli("job", str(JOBS / "does-not-exist-*.log"))
    assert p.returncode == 2 and b"Traceback" not in p.stderr


def test_cli_job_zh():
    p = run_cli("job", "--lang", "zh", "--no-color", str(JOBS / "2rank-perfile-ts"))
    assert "根因" in p.stdout.decode() and "最先失败的 rank" in p.stdout.decode()


def test_rank_from_file_names():
    assert rank_from_name(Path("node0-rank5.log")) == 5
    assert rank_from_name(Path("worker-12.out")) == 12
    assert rank_from_name(Path("train.log.3")) == 3
    assert rank_from_name(Path("train.log")) is None


def test_time_stamp_kinds():
    assert parse_time("[2025-03-01 10:00:05,902] x")[0] == "iso"
    assert parse_time("E0301 10:00:05.100000 42 x.py:1]")[0] == "glog"
    assert parse_time("[12:00:01] hello")[0] == "hms"
    assert parse_time("no time here") is None


def test_template_masks_numbers_hex_paths():
    a = template_of("[rank3]: loaded /data/shard-0001.bin in 12.5 s at 0x7f3a2b")
    b = template_of("[rank5]: loaded /data/other/shard-0002.bin in 3 s at 0x7f00ff")
    assert a == b == "loaded <path> in <num> s at <hex>"


def test_diff_runs():
    res = diff_runs(str(JOBS / "runs" / "good.log"), str(JOBS / "runs" / "bad.log"))
    assert res.divergence is not None and res.divergence["step"] == 300
    assert {"name": "transformers", "good": "4.46.3", "bad": "4.57.1"} in res.versions
    assert {"name": "learning_rate", "good": "2e-05", "bad": "0.001"} in res.args
    texts = " ".join(t["template"] for t in res.new_templates)
    assert "Gradient accumulation steps changed" in texts and "Gradient norm" in texts
    assert not any("'loss'" in t["template"] for t in res.new_templates)   # metric lines are not templates
    assert res.reports[1].findings[0].category == "nan-loss"
    d = res.to_dict()
    assert d["version"] == 1 and d["diff"]["metric_divergence"]["step"] == 300 and len(d["reports"]) == 2


def test_cli_diff():
    p = run_cli("diff", "--no-color", str(JOBS / "runs" / "good.log"), str(JOBS / "runs" / "bad.log"))
    assert p.returncode == 1, p.stderr            # the bad run has an error finding (nan-loss)
    out = p.stdout.decode()
    assert "transformers: 4.46.3 → 4.57.1" in out and "step 300" in out
    p = run_cli("diff", "--format", "json", str(JOBS / "runs" / "good.log"), str(JOBS / "runs" / "bad.log"))
    assert json.loads(p.stdout)["diff"]["changed_versions"]


@pytest.mark.parametrize("trailing_newline", [True, False])
def test_lines_around_reads_the_tail_like_the_whole_file(tmp_path, trailing_newline):
    """The tail shortcut (read backwards only as far as the window needs) returns exactly the lines
    a full streaming read returns, with long lines straddling the 64 KiB read steps."""
    import random

    from llmtriage.engine.logwindow import TIME_WINDOW as W, lines_around

    rng = random.Random(3)
    lines = [f"{i} " + "x" * rng.choice([0, 5, 80, 3000, 70_000]) for i in range(1, 900)]
    path = tmp_path / "rank0.log"
    path.write_text("\n".join(lines) + ("\n" if trailing_newline else ""))
    total = len(lines)
    for line in (1, 2, 450, total - 30, total - 1, total):
        fast = lines_around(path, line, total_lines=total)
        slow = lines_around(path, line)
        assert fast == slow
        assert [n for n, _ in fast] == list(range(max(1, line - W), min(total, line + W) + 1))
        assert all(text.split(" ", 1)[0] == str(n) for n, text in fast)
