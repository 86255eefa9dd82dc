"""Declarations and the child-process runner for reproducer scenarios.

Importing this module never imports torch or transformers: a scenario's variants run in a
child interpreter (``python -u <scenario file> <variant> <device>``) with a private HF_HOME,
offline hub settings and one thread; its combined stdout/stderr is the genuine log.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent

Check = Callable[[dict], Optional[str]]  # returns an error message, or None when satisfied


@dataclass(frozen=True)
class Variant:
    name: str
    description: str = ""
    env: tuple = ()  # extra (key, value) environment pairs for the child
    timeout: float = 180.0
    checks: Optional[tuple] = None  # overrides the scenario's checks for this variant

    @property
    def func(self) -> str:
        return self.name.replace("-", "_")


@dataclass(frozen=True)
class Scenario:
    name: str
    module: str
    category: str
    fail: Variant
    fixes: tuple
    description: str = ""
    rules: tuple = ()  # accepted rule ids for the top finding; empty = any rule of `category`
    devices: tuple = ("cpu",)
    checks: tuple = ()
    requires_no_cuda: bool = False  # the failure only exists where CUDA is unavailable

    @property
    def path(self) -> Path:
        return HERE / (self.module.rsplit(".", 1)[-1] + ".py")

    def variants(self):
        return (self.fail,) + tuple(self.fixes)

    def fix(self, name: str) -> Variant:
        for v in self.fixes:
            if v.name == name:
                return v
        raise KeyError(name)

    def checks_for(self, variant: Variant) -> tuple:
        return self.checks if variant.checks is None else variant.checks


@dataclass
class RunResult:
    scenario: str
    variant: str
    device: str
    returncode: Optional[int]
    log: str
    seconds: float
    result: dict = field(default_factory=dict)
    timed_out: bool = False


def child_env(home: Path, extra=()) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "PYTORCH_", "TORCH_"))
           and k not in ("PYTHONWARNINGS", "CUDA_VISIBLE_DEVICES_OVERRIDE")}
    env.update(
        OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(home / "hf_home"), PYTHONHASHSEED="0", TOKENIZERS_PARALLELISM="false",
        HF_HUB_DISABLE_TELEMETRY="1", PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8",
    )
    # the scenario file imports its siblings (_harness, _child) from its own directory
    env.pop("PYTHONSTARTUP", None)
    env.update(dict(extra))
    return env


def run_variant(scenario: Scenario, variant: Variant, device: str = "cpu", *,
                keep_dir: Optional[Path] = None) -> RunResult:
    """Run one variant in a fresh child interpreter and capture its combined output."""
    tmp = Path(tempfile.mkdtemp(prefix=f"llmtriage-{scenario.name}-{variant.name}-"))
    work = tmp / "run"
    work.mkdir()
    cmd = [sys.executable, "-u", str(scenario.path), variant.func, device, scenario.name]
    t0 = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.run(cmd, cwd=work, env=child_env(tmp, variant.env), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=variant.timeout)
        rc, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        rc, out, timed_out = None, exc.stdout or b"", True
    seconds = time.monotonic() - t0
    log = out.decode("utf-8", "replace")
    result: dict = {}
    rfile = work / "result.json"
    if rfile.exists():
        try:
            result = json.loads(rfile.read_text())
        except ValueError:
            result = {}
    if keep_dir is not None:
        shutil.copytree(work, keep_dir, dirs_exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return RunResult(scenario.name, variant.name, device, rc, log, seconds, result, timed_out)


# ---------------------------------------------------------------- scenario checks
class checks:  # namespace of reusable checks on result.json
    @staticmethod
    def completed(r: dict) -> Optional[str]:
        return None if r.get("completed") else "the variant did not complete"

    @staticmethod
    def finite_losses(r: dict) -> Optional[str]:
        losses = r.get("losses")
        if not losses:
            return "no losses recorded"
        bad = [x for x in losses if x is None or not math.isfinite(float(x))]
        return f"non-finite losses: {bad[:3]}" if bad else None

    @staticmethod
    def loss_decreases(r: dict) -> Optional[str]:
        losses = r.get("losses") or []
        if len(losses) < 2:
            return "fewer than 2 losses recorded"
        if not all(math.isfinite(float(x)) for x in losses):
            return "non-finite losses"
        return None if float(losses[-1]) < float(losses[0]) else f"loss did not decrease: {losses[0]} -> {losses[-1]}"

    @staticmethod
    def grads_flow(r: dict) -> Optional[str]:
        g = r.get("grad_norm")
        if g is None or not math.isfinite(float(g)) or float(g) <= 0:
            return f"gradient norm is {g}"
        return None

    @staticmethod
    def under_cap(r: dict) -> Optional[str]:
        peak, cap = r.get("peak_mib"), r.get("cap_mib")
        if peak is None or cap is None:
            return "peak memory / cap not recorded"
        return None if peak <= cap else f"peak {peak:.0f} MiB above cap {cap:.0f} MiB"

    @staticmethod
    def generated(r: dict) -> Optional[str]:
        text = r.get("generated")
        return None if isinstance(text, str) and text.strip() else "no text generated"

    @staticmethod
    def loaded(r: dict) -> Optional[str]:
        return None if r.get("loaded") else "the model was not loaded"

    @staticmethod
    def finite_logits(r: dict) -> Optional[str]:
        return None if r.get("logits_finite") else "logits missing or not finite"
