"""Workflows: configuration, baseline, SARIF/GitHub formats, `run`, `watch`, `env`, Python API.

Real tools: child processes (one raising a traceback, one SIGKILLed, one interrupted with SIGINT),
a file that really grows, rotates and is truncated while `watch` follows it, the official SARIF
2.1.0 schema (tests/data, see its PROVENANCE file)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import llmtriage
from llmtriage.errors import ConfigError

DATA = Path(__file__).resolve().parent / "data"
OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 5, in <module>\n    loss.backward()\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use.\n")
NAN = "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.3}\n"
SHM = "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"


def cli(*args: str, cwd=None, env=None, input=None, timeout=120) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    for k in ("FORCE_COLOR", "LLMTRIAGE_CONFIG", "LLMTRIAGE_NO_CONFIG", "GITHUB_STEP_SUMMARY"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], capture_output=True, text=True, cwd=cwd,
                          env=e, input=input, timeout=timeout)


@pytest.fixture
def proj(tmp_path):
    (tmp_path / ".git").mkdir()          # the config search stops at the top of a work tree
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "oom.log").write_text("loading model\n" + OOM)
    (tmp_path / "logs" / "nan.log").write_text("{'loss': 2.1, 'grad_norm': 1.5, 'epoch': 0.1}\n" + NAN * 3)
    return tmp_path


# ------------------------------------------------------------------------------ configuration

def test_config_pyproject_found_upward_and_resolved(proj, monkeypatch):
    from llmtriage.cli.config import load_settings

    monkeypatch.delenv("LLMTRIAGE_NO_CONFIG", raising=False)
    (proj / "team-rules").mkdir()
    (proj / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "x"
        [tool.llmtriage]
        rules = ["team-rules"]
        disable = ["trainer-loss-nan"]
        min-severity = "warning"
        lang = "zh"
        [tool.other]
        rules = 3
    """))
    sub = proj / "a" / "b"
    sub.mkdir(parents=True)
    s = load_settings(sub)
    assert s["rules"] == [str((proj / "team-rules").resolve())]
    assert s["disable"] == ["trainer-loss-nan"] and s["min_severity"] == "warning" and s["lang"] == "zh"
    assert s["config_file"] == str(proj / "pyproject.toml") and "baseline_filter" not in s
    # the minimal parser used on Python 3.10 without tomli reads the same table
    from llmtriage.cli.config import _mini_toml, parse_settings

    raw = _mini_toml((proj / "pyproject.toml").read_text(), proj / "pyproject.toml")
    assert parse_settings(proj / "pyproject.toml", raw["tool"]["llmtriage"]) == s


def test_config_yaml_wins_and_search_stops_at_git_root(proj, monkeypatch):
    from llmtriage.cli.config import load_settings

    (proj / ".llmtriage.yaml").write_text("min_severity: error\n")
    (proj / "pyproject.toml").write_text("[tool.llmtriage]\nmin_severity = 'info'\n")
    assert load_settings(proj / "logs")["min_severity"] == "error"
    inner = proj / "inner"
    (inner / ".git").mkdir(parents=True)
    assert load_settings(inner) == {}
    monkeypatch.setenv("LLMTRIAGE_NO_CONFIG", "1")
    assert load_settings(proj) == {}


@pytest.mark.parametrize("text, key", [
    ("colour: red\n", "colour"),
    ("min_severity: fatal\n", "min_severity"),
    ("lang: fr\n", "lang"),
    ("disable: 3\n", "disable"),
    ("rules: [missing-dir]\n", "rules"),
    ("baseline: nope.json\n", "baseline"),
    ("engine: pcre\n", "engine"),
])
def test_config_errors_name_file_and_key(proj, text, key):
    from llmtriage.cli.config import load_settings

    (proj / ".llmtriage.yaml").write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_settings(proj)
    msg = str(ei.value)
    assert str(proj / ".llmtriage.yaml") in msg and f"'{key}'" in msg


def test_config_error_in_pyproject_names_table(proj):
    from llmtriage.cli.config import load_settings

    (proj / "pyproject.toml").write_text("[tool.llmtriage]\nseverity = 'error'\n")
    with pytest.raises(ConfigError, match=r"pyproject.toml: \[tool.llmtriage\] unknown key 'severity'"):
        load_settings(proj)


def test_cli_uses_config_and_reports_bad_config_in_one_line(proj):
    r = cli("triage", "logs/nan.log", cwd=proj)
    assert r.returncode == 1 and "trainer-loss-nan" in r.stdout
    (proj / ".llmtriage.yaml").write_text("disable: [trainer-loss-nan, trainer-grad-norm-nan]\nmin_severity: error\n")
    r = cli("triage", "--format", "json", "logs/nan.log", cwd=proj)
    ids = [f["rule_id"] for f in json.loads(r.stdout)["reports"][0]["findings"]]
    assert "trainer-loss-nan" not in ids, ids
    (proj / ".llmtriage.yaml").write_text("min_severity: [x]\n")
    r = cli("triage", "logs/oom.log", cwd=proj)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert ".llmtriage.yaml" in r.stderr and "min_severity" in r.stderr


# ------------------------------------------------------------------------------ baseline

def test_baseline_acknowledges_known_findings_only(proj):
    r = cli("baseline", "logs/oom.log", cwd=proj)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["version"] == 1 and {e["file"] for e in doc["findings"]} == {"logs/oom.log"}
    (proj / ".llmtriage-baseline.json").write_text(r.stdout)
    (proj / ".llmtriage.yaml").write_text("baseline: .llmtriage-baseline.json\n")
    r = cli("triage", "logs/oom.log", cwd=proj)
    assert r.returncode == 0, r.stdout + r.stderr
    # the same log re-run (different numbers) is still acknowledged; a new failure is not
    (proj / "logs" / "oom.log").write_text("loading model\n\n" + OOM.replace("2.50", "3.75"))
    assert cli("triage", "logs/oom.log", cwd=proj).returncode == 0
    assert cli("triage", "logs/nan.log", cwd=proj).returncode == 1
    (proj / "logs" / "oom2.log").write_text(OOM)      # another file: not acknowledged
    r = cli("triage", "--format", "github", "logs/oom2.log", "logs/oom.log", cwd=proj)
    assert r.returncode == 1 and "file=logs/oom2.log" in r.stdout and "file=logs/oom.log," not in r.stdout
    assert "acknowledged in the baseline" in r.stdout


def test_baseline_file_errors(proj):
    from llmtriage.report.baseline import load_baseline

    p = proj / "b.json"
    p.write_text("{\"version\": 1, \"findings\": [{\"file\": 1}]}")
    with pytest.raises(ConfigError, match=r"findings\[0\]"):
        load_baseline(p)
    p.write_text("not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_baseline(p)


# ------------------------------------------------------------------------------ CI formats

def test_sarif_is_valid_against_the_official_schema(proj):
    import jsonschema

    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    (proj / "logs" / "secret.log").write_text("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123\n" + OOM)
    r = cli("triage", "--format", "sarif", "logs/oom.log", "logs/nan.log", "logs/secret.log", "-", cwd=proj,
            input=SHM)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft4Validator)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    rule_ids = [x["id"] for x in run["tool"]["driver"]["rules"]]
    assert len(rule_ids) == len(set(rule_ids))
    by_file = {}
    for res in run["results"]:
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        by_file.setdefault(loc["artifactLocation"].get("uri", "-"), []).append((res["ruleId"], loc["region"]["startLine"]))
    assert ("torch-cuda-oom", 5) in by_file["logs/oom.log"]
    assert any(r_ == "trainer-loss-nan" and ln == 2 for r_, ln in by_file["logs/nan.log"])
    assert by_file["-"] and "hf_abcdefghij" not in r.stdout
    # one result per finding
    j = json.loads(cli("triage", "--format", "json", "logs/oom.log", "logs/nan.log", cwd=proj).stdout)
    assert sum(len(x["findings"]) for x in j["reports"]) == len(by_file["logs/oom.log"]) + len(by_file["logs/nan.log"])


def test_github_annotations_merge_repeats_and_respect_the_cap(proj):
    lines = []
    for i in range(400):   # thousands of repeats of several signatures, across ranks
        lines.append(f"[rank{i % 8}]: {NAN.strip()}")
        lines.append(f"[rank{i % 8}]: " + OOM.splitlines()[-1])
        lines.append(f"[rank{i % 8}]: {SHM.strip()}")
    (proj / "logs" / "big.log").write_text("\n".join(lines) + "\n")
    files = ["logs/big.log", "logs/oom.log", "logs/nan.log"]
    for k in range(12):
        (proj / "logs" / f"c{k}.log").write_text(OOM)
        files.append(f"logs/c{k}.log")
    r = cli("triage", "--format", "github", *files, cwd=proj)
    assert r.returncode == 1
    ann = [ln for ln in r.stdout.splitlines() if ln.startswith("::")]
    for kind in ("error", "warning", "notice"):
        assert sum(a.startswith(f"::{kind} ") for a in ann) <= 10
    assert sum(a.startswith("::error ") for a in ann) == 10
    assert any("more error findings" in a for a in ann)
    big = [a for a in ann if "file=logs/big.log" in a]       # its top finding made the cut
    assert big and "400x" in big[0] and "%0A" in big[0]          # merged, multi-line data escaped
    assert re.search(r"::error file=logs/big.log,line=\d+,endLine=\d+,title=", big[0])
    assert "%3A" not in big[0].split("::")[1].split("title=")[0]


# ------------------------------------------------------------------------------ run

def _py(tmp_path: Path, name: str, code: str) -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(code))
    return str(p)


def test_run_passes_output_through_and_diagnoses_a_traceback(tmp_path):
    script = _py(tmp_path, "train.py", """
        import sys
        print("step 1 loss 2.31")
        print("a warning on stderr", file=sys.stderr)
        def step():
            raise RuntimeError("CUDA out of memory. Tried to allocate 1.20 GiB. GPU 0 has a total capacity of 23.6 GiB")
        step()
    """)
    log = tmp_path / "copy.log"
    r = cli("run", "--log", str(log), "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout == "step 1 loss 2.31\n"                      # stdout untouched, nothing added
    assert r.stderr.startswith("a warning on stderr\nTraceback (most recent call last):")
    diag = r.stderr.split("─" * 72)[1]
    assert "exited with code 1" in diag and "torch-cuda-oom" in diag and "1.20 GiB" in diag
    copy = log.read_text()
    assert "step 1 loss 2.31" in copy and "RuntimeError: CUDA out of memory" in copy and "llmtriage" not in copy


def test_run_child_killed_by_sigkill_exits_137(tmp_path):
    script = _py(tmp_path, "big.py", """
        import os, signal
        print("Loading checkpoint shards:  50%|█████     | 1/2", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = cli("run", "--format", "json", "--", sys.executable, script, cwd=tmp_path)
    assert r.returncode == 137
    assert "Loading checkpoint shards" in r.stdout
    doc = json.loads(r.stderr[r.stderr.index("{"):])
    top = doc["reports"][0]["findings"][0]
    assert top["rule_id"] == "process-sigkilled" and top["category"] == "host-oom"
    kept = doc["reports"][0]["source"]
    assert os.path.exists(kept) and "Loading checkpoint shards" in Path(kept).read_text()
    os.unlink(kept)


def test_run_success_is_silent_and_command_not_found(tmp_path):
    r = cli("run", "--", sys.executable, "-c", "print('ok')", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "ok\n", "")
    r = cli("run", "--", sys.executable, "-c", "import sys; sys.exit(3)", cwd=tmp_path)
    assert r.returncode == 3 and "exited with code 3" in r.stderr
    r = cli("run", "--", "definitely-not-a-command-xyz", cwd=tmp_path)
    assert r.returncode == 127 and "definitely-not-a-command-xyz" in r.stderr
    r = cli("run", cwd=tmp_path)
    assert r.returncode == 2


def test_run_streams_unbuffered_and_forwards_sigint(tmp_path):
    script = _py(tmp_path, "loop.py", """
        import signal, sys, time
        def stop(sig, frame):
            print("child got SIGINT, saving checkpoint")
            sys.exit(5)
        signal.signal(signal.SIGINT, stop)
        print("ready")
        while True:
            time.sleep(0.05)
    """)
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "FORCE_COLOR")}
    p = subprocess.Popen([sys.executable, "-m", "llmtriage", "run", "--", sys.executable, script], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
    try:
        assert p.stdout.readline() == "ready\n"    # arrives while the child is still running
        assert p.poll() is None
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 5
    assert "child got SIGINT, saving checkpoint" in out
    assert "exited with code 5" in err


# ------------------------------------------------------------------------------ watch

WRITER = """
import os, sys, time
path, go = sys.argv[1], sys.argv[2]
def w(text, mode="a"):
    with open(path, mode) as fh:
        fh.write(text)
        fh.flush()
w("{'loss': 2.3, 'grad_norm': 1.1, 'epoch': 0.01}\\n" * 50, "w")
time.sleep(0.3)
w("{'loss': 2.2, 'grad_norm': 1.0, 'epoch': 0.02}\\n{'loss': na")      # a partial line...
time.sleep(0.3)
w("n, 'grad_norm': nan, 'learning_rate': 4e-05, 'epoch': 0.03}\\n")  # ...completed later: line 52
w(%(nan)r * 20)                                                          # repeats: not reported again
for _ in range(200):                                                     # still running until told
    if os.path.exists(go):
        break
    time.sleep(0.05)
os.rename(path, path + ".1")                                             # rotation
w("restarted\\n" + %(oom)r, "w")
time.sleep(0.5)
with open(path, "w") as fh:                                              # truncation
    fh.write("x\\n")
time.sleep(0.5)
w(%(shm)r)
time.sleep(0.3)
"""


def test_watch_follows_a_growing_rotated_and_truncated_file(tmp_path):
    log, go = tmp_path / "train.log", tmp_path / "go"
    writer = subprocess.Popen([sys.executable, "-c", WRITER % {"nan": NAN, "oom": OOM, "shm": SHM}, str(log),
                               str(go)])
    e = dict(os.environ)
    e.pop("FORCE_COLOR", None)
    w = subprocess.Popen([sys.executable, "-m", "llmtriage", "watch", str(log), "--until-exit", str(writer.pid),
                          "--interval", "0.1", "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=e)
    events = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ev = json.loads(w.stdout.readline())
            events.append(ev)
            if ev["event"] == "finding" and ev["finding"]["category"] == "nan-loss":
                break
        assert writer.poll() is None           # reported while the run is still going
        go.touch()
        writer.wait(timeout=30)
        out, err = w.communicate(timeout=30)
    finally:
        writer.kill()
        w.kill()
    events += [json.loads(x) for x in out.splitlines()]
    findings = [ev["finding"] for ev in events if ev["event"] == "finding"]
    ids = [f["rule_id"] for f in findings]
    assert len(ids) == len(set(ids)), ids                       # each finding once
    nan = next(f for f in findings if f["category"] == "nan-loss")
    assert nan["line"] == 52
    assert "torch-cuda-oom" in ids and any(f["category"] == "shm-exhausted" for f in findings)
    kinds = [ev["event"] for ev in events]
    assert "rotated" in kinds and "truncated" in kinds
    assert kinds.index("rotated") < kinds.index("truncated")
    oom = next(f for f in findings if f["rule_id"] == "torch-cuda-oom")
    assert oom["line"] == 5                                    # line numbers restart in the new file
    assert w.returncode == 1


def test_watch_unit_partial_lines_context_and_from_end(tmp_path, engine):
    from llmtriage.workflows.watch import Follower

    p = tmp_path / "a.log"
    p.write_text("boot\n")
    fol = Follower(str(p), engine)
    assert fol.poll() == []
    with open(p, "a") as fh:
        fh.write(OOM[:40])
    assert fol.poll() == []                    # incomplete line waits
    with open(p, "a") as fh:
        fh.write(OOM[40:])
    evs = fol.poll()
    assert [e.finding.rule_id for e in evs][:1] == ["torch-cuda-oom"] and evs[0].finding.line == 5
    with open(p, "a") as fh:
        fh.write(OOM)
    assert [e for e in fol.poll() if e.kind == "finding" and e.finding.rule_id == "torch-cuda-oom"] == []
    fol.close()
    late = Follower(str(p), engine, from_end=True)
    first = late.poll()                       # once: watching, with the bytes skipped; no old finding
    assert [(e.kind, e.detail) for e in first] == [("watching", str(p.stat().st_size))]
    assert late.poll() == []
    with open(p, "a") as fh:
        fh.write(SHM)
    assert [e.finding.category for e in late.poll()] == ["shm-exhausted"]
    late.close()


# ------------------------------------------------------------------------------ env

@pytest.mark.slow   # imports torch and probes the whole machine
def test_env_json_report_on_this_machine():
    r = cli("env", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    env = doc["environment"]
    assert env["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert set(env["packages"]) >= {"transformers", "accelerate", "deepspeed", "peft", "flash-attn", "bitsandbytes"}
    assert env["pip_check"]["ok"] in (True, False)
    assert {"HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME", "cache_dir"} <= set(env["hub"])
    t = env["torch"]
    assert "version" in t and "is_available" in t and isinstance(t["devices"], list)
    rules = {x["id"] for x in json.loads(cli("rules", "list", "--format", "json").stdout)}
    for f in doc["reports"][0]["findings"]:
        assert f["rule_id"] in rules or f["rule_id"].startswith("env-")
    if not t["cuda_build"]:   # other findings (e.g. HF_HUB_OFFLINE with an empty cache in CI) may rank first
        assert "torch-not-compiled-with-cuda" in [f["rule_id"] for f in doc["reports"][0]["findings"]]


def test_env_without_torch(tmp_path):
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)      # an import of torch fails exactly as when it is not installed
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    r = cli("env", "--no-pip-check", env={"PYTHONPATH": str(tmp_path / "site"), "HF_HUB_OFFLINE": "1",
                                            "HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 0, r.stderr
    assert "torch       not available: ModuleNotFoundError: No module named 'torch'" in r.stdout
    assert "python-module-not-found" in r.stdout and "hf-offline-cache-miss" in r.stdout


def test_env_problems_map_to_rules(engine):
    from llmtriage.workflows.envdoctor import diagnose

    env = {
        "torch": {"version": "2.4.0+cu124", "cuda_build": "12.4", "is_available": True, "arch_list": ["sm_80", "sm_90"],
                  "devices": [{"index": 0, "name": "Tesla V100", "memory_bytes": 32 << 30, "capability": "7.0"}]},
        "driver": {"driver": "535.54", "driver_cuda": "12.2", "gpu_present": True},
        "packages": {"flash-attn": None, "bitsandbytes": None},
        "pip_check": {"ok": False, "problems": ["peft 0.13.0 has requirement torch>=2.5, but you have torch 2.4.0."]},
        "hub": {"HF_ENDPOINT": "hf-mirror.com", "cache_dir": "/nonexistent", "cache_disk": {"total_bytes": 1 << 40,
                                                                                           "free_bytes": 3 << 30}},
        "shm": {"total_bytes": 64 << 20, "free_bytes": 64 << 20},
    }
    found = {f.rule_id: f for f in diagnose(env, "", engine)}
    assert {"nvidia-driver-too-old", "no-kernel-image-for-gpu", "pip-dependency-conflict", "torch-shm-file-failed",
            "env-low-disk-space", "hub-connection-error"} <= set(found)
    assert found["nvidia-driver-too-old"].severity == "error" and found["nvidia-driver-too-old"].fixes
    assert found["env-low-disk-space"].category == "disk-full"
    env["torch"] = {"version": "2.4.0+cpu", "cuda_build": None, "is_available": False, "devices": []}
    assert diagnose(env, "", engine)[0].rule_id == "torch-not-compiled-with-cuda"
    assert diagnose(env, "", engine)[0].severity == "error"


# ------------------------------------------------------------------------------ API, hooks file, laziness

def test_python_api_triage_text_and_path(proj):
    rep = llmtriage.triage("loading\n" + OOM)
    assert rep.findings[0].rule_id == "torch-cuda-oom" and rep.to_dict()["findings"][0]["line"] == 5
    assert llmtriage.triage(str(proj / "logs" / "oom.log")).source.endswith("oom.log")


def test_pre_commit_hooks_file():
    import yaml

    hooks = yaml.safe_load((Path(__file__).resolve().parents[1] / ".pre-commit-hooks.yaml").read_text())
    h = {x["id"]: x for x in hooks}["llmtriage"]
    assert h["language"] == "python" and h["entry"].startswith("llmtriage")
    for name in ("a.log", "runs/x.out", "job.err"):
        assert re.search(h["files"], name)
    assert not re.search(h["files"], "train.py")


def test_integrations_import_without_transformers():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "import llmtriage.workflows.integrations as m\n"
            "w = m.MetricWatcher()\n"
            "print([f.rule_id for f in w.feed({'loss': float('nan'), 'grad_norm': float('nan'), 'epoch': 0.1}, 3)])\n"
            "try:\n    m.LlmtriageCallback\nexcept ImportError:\n    print('no transformers')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "trainer-loss-nan" in r.stdout and "no transformers" in r.stdout
