"""The pre-commit hook with the real `pre-commit` tool, in temporary git repos.

The current working tree of this repository (tracked and untracked, non-ignored files, as a new
commit) is the hook repo, so the test checks what is on disk, committed or not. pre-commit builds
the hook's Python environment from it (`pip install .`): the slow part, done once."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # pip-installs the hook into a pre-commit env: slow tier

ROOT = Path(__file__).resolve().parents[1]
OOM = ("Traceback (most recent call last):\n  File \"train.py\", line 5, in <module>\n    loss.backward()\n"
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.06 GiB is free.\n")


def _pre_commit() -> list[str]:
    exe = shutil.which("pre-commit")
    if exe:
        return [exe]
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed (it is in the `test` extra)")
    return [sys.executable, "-m", "pre_commit"]


def _git(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def hook_env(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    pc = _pre_commit()
    base = tmp_path_factory.mktemp("precommit")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com", PRE_COMMIT_HOME=str(base / "home"), GIT_CONFIG_NOSYSTEM="1",
               HOME=str(base / "userhome"), PIP_DISABLE_PIP_VERSION_CHECK="1", PRE_COMMIT_COLOR="never")
    (base / "userhome").mkdir()
    if os.environ.get("HOME"):   # keep pip's wheel cache warm (the hook env installs the same wheels)
        env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR") or str(Path(os.environ["HOME"]) / ".cache" / "pip")
    for k in ("FORCE_COLOR", "LLMTRIAGE_CONFIG", "LLMTRIAGE_NO_CONFIG"):
        env.pop(k, None)
    src = base / "llmtriage-src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        s = ROOT / f
        if s.is_file() and not f.startswith(("tests/", "benchmarks/")):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, src / f)
    _git("init", "-q", cwd=src, env=env)
    _git("add", "-A", cwd=src, env=env)
    _git("commit", "-qm", "llmtriage working tree", cwd=src, env=env)
    rev = _git("rev-parse", "HEAD", cwd=src, env=env).stdout.strip()
    proj = base / "experiments"
    proj.mkdir()
    _git("init", "-q", cwd=proj, env=env)
    return {"pc": pc, "env": env, "src": src, "rev": rev, "proj": proj}


def test_try_repo_refuses_a_crashed_log_and_the_installed_hook_honours_the_baseline(hook_env):
    pc, env, src, proj = hook_env["pc"], hook_env["env"], hook_env["src"], hook_env["proj"]
    (proj / "runs").mkdir()
    (proj / "runs" / "ok.log").write_text("{'loss': 1.9, 'grad_norm': 0.8, 'epoch': 1.0}\ntraining finished\n")
    (proj / "runs" / "crash.log").write_text("loading model\n" + OOM)
    (proj / "model.py").write_text("raise RuntimeError('CUDA out of memory. Tried to allocate 2 GiB')\n")
    _git("add", "-A", cwd=proj, env=env)

    # 1. `pre-commit try-repo` against the llmtriage repo
    r = subprocess.run([*pc, "try-repo", str(src), "llmtriage", "--ref", hook_env["rev"], "--files",
                        "runs/ok.log", "runs/crash.log", "model.py"], cwd=proj, env=env, capture_output=True,
                       text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "Failed" in out and "torch-cuda-oom" in out and "runs/crash.log" in out
    assert "model.py" not in out.split("hook id: llmtriage")[1]        # only log-like files are checked

    # 2. installed in .pre-commit-config.yaml: a real `git commit` with the crashed log is refused
    (proj / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {src}\n    rev: {hook_env['rev']}\n    hooks:\n      - id: llmtriage\n")
    subprocess.run([*pc, "install"], cwd=proj, env=env, check=True, capture_output=True, timeout=120)
    _git("add", "-A", cwd=proj, env=env)
    r = subprocess.run(["git", "commit", "-m", "add runs"], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "torch-cuda-oom" in r.stdout + r.stderr
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=proj, env=env, capture_output=True).returncode != 0

    # 3. acknowledge it in a baseline: the commit goes through; a new crash is refused again
    bl = subprocess.run([sys.executable, "-m", "llmtriage", "baseline", "runs/crash.log"], cwd=proj, env=env,
                        capture_output=True, text=True, timeout=120)
    assert bl.returncode == 0, bl.stderr
    (proj / ".llmtriage-baseline.json").write_text(bl.stdout)
    (proj / ".llmtriage.yaml").write_text("baseline: .llmtriage-baseline.json\n")
    _git("add", "-A", cwd=proj, env=env)
    r = subprocess.run(["git", "commit", "-m", "add runs"], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (proj / "runs" / "crash2.out").write_text(
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO "
        "for details), NCCL version 2.20.5\n")
    _git("add", "-A", cwd=proj, env=env)
    r = subprocess.run(["git", "commit", "-m", "another run"], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode != 0 and "crash2.out" in r.stdout + r.stderr, r.stdout + r.stderr
