"""Readable output and CI formats everywhere (issue 17, items 4 and 7): human output wraps to the
terminal width ($COLUMNS), JSON/SARIF/GitHub never do; `job`, `diff` and `env` speak sarif and github
like `triage`; `diff` fails on an error in the bad run; an interleaved log names ranks, not a file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmtriage.report.style import text_width, wrap

ROOT = Path(__file__).resolve().parents[1]
OOM_LOG = ROOT / "fixtures" / "cuda-oom" / "torchrun-4gpu-sft-backward.log"
JOBS = ROOT / "fixtures" / "jobs"
RUNS = JOBS / "runs"


def run(*args: str, columns: int | None = None, tmp: Path | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS", "LLMTRIAGE_LANG")}
    if columns is not None:
        e["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], capture_output=True, text=True, env=e,
                          timeout=300)


def _block(out: str, label: str) -> list[str]:
    """The lines of the paragraph that starts with '  Label:' (its continuation lines are indented)."""
    lines = out.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith(f"  {label}:"))
    block = [lines[i]]
    for ln in lines[i + 1:]:
        if not ln.startswith("    ") or ln.lstrip()[:2] in ("1.", "2."):
            break
        block.append(ln)
    return block


# ------------------------------------------------------------------------------ item 4: wrapping

def test_human_prose_wraps_to_columns_and_loses_no_word():
    top = json.loads(run("--format", "json", str(OOM_LOG)).stdout)["reports"][0]["findings"][0]
    out = run("--no-color", str(OOM_LOG), columns=60).stdout
    for label, text in (("What", top["explanation"]), ("Why", top["cause"])):
        block = _block(out, label)
        assert len(block) > 1, block                                  # wrapped ...
        assert all(text_width(ln) <= 60 for ln in block), block       # ... to the width
        joined = " ".join(ln.strip() for ln in block).removeprefix(f"{label}:").strip()
        assert joined == " ".join(text.split())                       # and nothing lost
    evidence = next(ln for ln in out.splitlines() if ln.startswith("    line "))
    assert evidence.endswith("…") and text_width(evidence) <= 60      # cut, not wrapped


def test_a_pipe_without_columns_is_not_wrapped():
    top = json.loads(run("--format", "json", str(OOM_LOG)).stdout)["reports"][0]["findings"][0]
    out = run("--no-color", str(OOM_LOG)).stdout
    assert f"  What: {' '.join(top['explanation'].split())}" in out.splitlines()


@pytest.mark.parametrize("fmt", ["json", "sarif", "github"])
def test_machine_formats_ignore_columns(fmt):
    assert run("--format", fmt, str(OOM_LOG), columns=30).stdout == run("--format", fmt, str(OOM_LOG)).stdout


def test_chinese_wraps_by_display_width():
    out = run("--no-color", "--lang", "zh", str(OOM_LOG), columns=50).stdout
    block = _block(out, "含义")
    assert len(block) > 1 and all(text_width(ln) <= 50 for ln in block), block


def test_wrap_keeps_long_words_whole_and_breaks_between_cjk():
    assert wrap("a " + "x" * 80 + " b", 40, 2).split("\n  ") == ["a", "x" * 80, "b"]
    lines = wrap("显存" * 40, 40, 0).split("\n")
    assert len(lines) > 1 and all(text_width(ln) <= 40 for ln in lines) and "".join(lines) == "显存" * 40
    assert wrap("one   two\nthree", None) == "one two three"


def test_job_and_diff_human_wrap_too():
    out = run("job", "--no-color", str(JOBS / "8rank-perfile-nots"), columns=70).stdout
    block = _block(out, "Cascade")
    assert len(block) > 1 and all(text_width(ln) <= 70 for ln in block), block
    assert block[0].startswith("  Cascade: The GPU ran out of memory")          # the cause first


# ------------------------------------------------------------------------------ item 7: job, diff, env formats

def test_job_sarif_and_github():
    r = run("job", "--format", "sarif", str(JOBS / "8rank-perfile-nots"))
    assert r.returncode == 1, r.stderr
    sarif = json.loads(r.stdout)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert {x["ruleId"] for x in results} >= {"torch-cuda-oom", "nccl-watchdog-timeout"}
    r = run("job", "--format", "github", str(JOBS / "8rank-perfile-nots"))
    assert r.returncode == 1
    assert any(ln.startswith("::error ") and "torch-cuda-oom" in ln for ln in r.stdout.splitlines())


def test_diff_fails_on_an_error_in_the_bad_run_and_speaks_ci_formats():
    r = run("diff", "--no-color", str(RUNS / "good.log"), str(RUNS / "bad.log"))
    assert r.returncode == 1
    assert run("diff", "--exit-zero", str(RUNS / "good.log"), str(RUNS / "bad.log")).returncode == 0
    assert run("diff", str(RUNS / "good.log"), str(RUNS / "good.log")).returncode == 0   # no error: 0
    sarif = json.loads(run("diff", "--format", "sarif", str(RUNS / "good.log"), str(RUNS / "bad.log")).stdout)
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"] for x in sarif["runs"][0]["results"]
            for loc in x.get("locations", [])}
    assert uris and all(u.endswith("bad.log") for u in uris)              # the bad run's findings only
    gh = run("diff", "--format", "github", str(RUNS / "good.log"), str(RUNS / "bad.log")).stdout
    assert "::error file=" in gh and "trainer-loss-nan" in gh and "good.log" not in gh


def test_env_sarif_and_github_match_json():
    js = run("env", "--no-torch", "--no-pip-check", "--format", "json")
    doc = json.loads(js.stdout)
    sarif = run("env", "--no-torch", "--no-pip-check", "--format", "sarif")
    assert sarif.returncode == js.returncode
    results = json.loads(sarif.stdout)["runs"][0]["results"]
    assert sorted(x["ruleId"] for x in results) == sorted(f["rule_id"] for f in doc["reports"][0]["findings"])
    gh = run("env", "--no-torch", "--no-pip-check", "--format", "github")
    assert gh.returncode == js.returncode and "environment" in gh.stdout


@pytest.mark.parametrize("cmd", [["job", "x.log"], ["diff", "a", "b"], ["env"]])
def test_help_lists_every_format(cmd):
    out = run(cmd[0], "--help").stdout
    assert "sarif" in out and "github" in out


# ------------------------------------------------------------------------------ item 7: interleaved ranks

TRACE = ('Traceback (most recent call last):\n  File "/work/train.py", line 88, in <module>\n    loss.backward()\n'
         "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU has a total capacity of "
         "79.15 GiB of which 1.02 GiB is free.\n")


def test_interleaved_failing_line_without_prefix_names_the_nearest_rank(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("[rank0]: step 10 loss 2.31\n[rank2]: step 10 loss 2.30\n[rank2]: saving checkpoint\n" + TRACE)
    doc = json.loads(run("job", "--format", "json", str(log)).stdout)["job"]
    assert doc["first_rank"] == 2 and doc["first_ranks"] == [2]
    out = run("job", "--no-color", str(log)).stdout
    assert "first failing rank: rank 2" in out and f"first failing rank: {log}" not in out
    assert doc["cascade"].startswith("The GPU ran out of memory") and "on rank 2" in doc["cascade"]


def test_interleaved_without_any_rank_never_names_a_path_as_a_rank(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("step 10 loss 2.31\n" * 30 + TRACE)
    doc = json.loads(run("job", "--format", "json", str(log)).stdout)["job"]
    assert doc["first_rank"] is None and doc["first_ranks"] == []
    out = run("job", "--no-color", str(log)).stdout
    first = next(ln for ln in out.splitlines() if "first failing rank:" in ln)
    assert str(log) not in first and "a rank the log does not name" in first
    assert str(log) not in doc["cascade"]


def test_every_option_of_every_command_has_help():
    import click

    from llmtriage.cli.app import LAZY_COMMANDS, cli

    ctx = click.Context(cli)

    def walk(cmd: click.Command, path: str):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), f"{path} {name}")

    missing = []
    for name in LAZY_COMMANDS:
        for path, cmd in walk(cli.get_command(ctx, name), name):
            assert (cmd.help or "").strip(), path
            for p in cmd.params:
                if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip():
                    missing.append(f"{path} {p.opts[0]}")
    assert not missing, missing


@pytest.mark.slow   # watch runs until its time limit, per format
@pytest.mark.parametrize("fmt", ["human", "json"])
def test_watch_from_end_says_once_on_stderr_that_it_is_watching(tmp_path, fmt):
    log = tmp_path / "train.log"
    log.write_bytes(OOM_LOG.read_bytes())             # an old failure: skipped, not reported
    r = run("watch", str(log), "--from-end", "--format", fmt, "--interval", "0.1", "--max-seconds", "1",
            "--no-color")
    assert r.returncode == 0 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "watching from its end" in lines[0], r.stderr
    assert f"({log.stat().st_size} bytes already there are skipped)" in lines[0]
    r = run("watch", str(log), "--format", fmt, "--max-seconds", "0.3", "--no-color")
    assert "watching" not in r.stderr and r.returncode == 1     # without --from-end: the old finding, no notice
