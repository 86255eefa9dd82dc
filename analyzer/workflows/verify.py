"""`llmtriage verify`: regenerate each failure for real, check that triage names it, and check
that every fix variant makes it go away. No click here (see cli_verify.py).

Nothing in this module imports torch or transformers: the reproducers run in child
interpreters, and the versions / CUDA availability are probed in one as well.
`load_verified()` / `verification_for()` read the record that `verify --record` writes
(rules/verified.json) for the knowledge base and the triage output.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import yaml

from llmtriage import analyze, load_rules
from llmtriage.errors import LlmtriageError
from llmtriage.ruleset.files import verified_path
from llmtriage.ruleset.verified import fix_table, merge_runs, read_record, verification, write_record


# ------------------------------------------------------------------ environment probe
_PROBE = (
    "import json, platform, torch, transformers\n"
    "print(json.dumps({'torch': torch.__version__, 'transformers': transformers.__version__,"
    " 'cuda_available': bool(torch.cuda.is_available()),"
    " 'cuda_device': torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,"
    " 'python': platform.python_version()}))\n"
)


def probe_environment() -> dict:
    """torch/transformers versions and CUDA availability, from a child interpreter."""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlmtriageError(f"cannot start the reproducer interpreter: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        raise LlmtriageError(
            f"reproducers need torch and transformers (pip install 'llmtriage[repro]'): {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ selection
def select_scenarios(names: Iterable[str] = ()) -> list:
    """Scenarios named by scenario name, category, expected rule id, module, or a
    `scenario:variant` / rule whose fix is `verified_by` one of them. No names: all."""
    from llmtriage.reproducers import all_scenarios   # deferred: the reproducer scenarios, only when verifying

    scenarios = all_scenarios()
    names = [n for n in names if n]
    if not names:
        return scenarios
    by_rule = _rules_verified_by()
    chosen: list = []
    unknown = []
    for name in names:
        base = name.split(":", 1)[0]
        hits = [s for s in scenarios
                if name in (s.name, s.category) or base == s.name or name in s.rules
                or s.module.rsplit(".", 1)[-1] == name
                or any(k.split(":", 1)[0] == s.name for k in by_rule.get(name, ()))]
        if not hits:
            unknown.append(name)
        chosen.extend(h for h in hits if h not in chosen)
    if unknown:
        raise LlmtriageError(f"no reproducer scenario or rule named: {', '.join(unknown)}"
                             f" (see `llmtriage verify --list`)")
    return chosen


def _rules_verified_by() -> dict:
    """rule id -> [scenario:variant, ...] from the fixes' `verified_by` fields (best effort)."""
    try:
        ruleset = load_rules()
    except Exception:
        return {}
    out: dict = {}
    rules = getattr(ruleset, "rules", ruleset)
    try:
        items = list(rules.values()) if isinstance(rules, dict) else list(rules)
    except TypeError:
        return {}
    for rule in items:
        rid = rule.get("id") if isinstance(rule, dict) else getattr(rule, "id", None)
        fixes = rule.get("fixes", []) if isinstance(rule, dict) else getattr(rule, "fixes", [])
        for fx in fixes or ():
            vb = fx.get("verified_by") if isinstance(fx, dict) else getattr(fx, "verified_by", None)
            if rid and vb:
                out.setdefault(rid, []).append(vb)
    return out


# ------------------------------------------------------------------ outcomes
@dataclass
class FixOutcome:
    name: str
    verified: bool
    exit_code: Optional[int]
    seconds: float
    problems: list = field(default_factory=list)
    run: Any = None


@dataclass
class ScenarioOutcome:
    name: str
    category: str
    device: str
    expected_rules: tuple
    reproduced: Optional[bool] = None
    detected: bool = False
    detected_as: Optional[dict] = None
    exit_code: Optional[int] = None
    fixes: list = field(default_factory=list)
    seconds: float = 0.0
    problems: list = field(default_factory=list)
    skipped: Optional[str] = None
    run: Any = None

    @property
    def ok(self) -> bool:
        """Nothing failed: verified, or skipped (a scenario this machine cannot run fails nothing)."""
        if self.skipped:
            return True
        return bool(self.reproduced and self.detected and all(f.verified for f in self.fixes))

    @property
    def status(self) -> str:
        """verified | failed | skipped: a skipped scenario is never counted as verified."""
        return "skipped" if self.skipped else ("verified" if self.ok else "failed")

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "device": self.device,
            "reproduced": self.reproduced,
            "detected_as": self.detected_as,
            "fixes": [{"name": f.name, "verified": f.verified, "exit_code": f.exit_code,
                       "seconds": round(f.seconds, 2), "problems": list(f.problems)} for f in self.fixes],
            "seconds": round(self.seconds, 2),
            "category": self.category,
            "expected_rules": list(self.expected_rules),
            "detected": self.detected,
            "exit_code": self.exit_code,
            "ok": self.ok,
            "status": self.status,
            "skipped": self.skipped,
            "problems": list(self.problems),
        }


def _triage(log: str, name: str):
    return analyze(log, name=name)


def evaluate_failure(scenario, run, outcome: ScenarioOutcome) -> None:
    outcome.exit_code = run.returncode
    outcome.run = run
    if run.timed_out:
        outcome.reproduced = False
        outcome.problems.append(f"failing variant timed out after {run.seconds:.0f}s")
    elif run.returncode == 0:
        outcome.reproduced = False
        outcome.problems.append("failing variant exited 0: the failure did not occur")
    else:
        outcome.reproduced = True
    report = _triage(run.log, f"{scenario.name}.{scenario.fail.name}.log")
    top = report.top
    if top is not None:
        outcome.detected_as = {"rule_id": top.rule_id, "category": top.category}
    if top is None:
        outcome.problems.append("triage found nothing")
    elif top.category != scenario.category:
        outcome.problems.append(f"top finding is {top.rule_id} ({top.category}), expected category {scenario.category}")
    elif scenario.rules and top.rule_id not in scenario.rules:
        outcome.problems.append(f"top finding is {top.rule_id}, expected one of {', '.join(scenario.rules)}")
    else:
        outcome.detected = outcome.reproduced is True


def evaluate_fix(scenario, variant, run, outcome: ScenarioOutcome) -> FixOutcome:
    problems: list = []
    if run.timed_out:
        problems.append(f"timed out after {run.seconds:.0f}s")
    elif run.returncode != 0:
        problems.append(f"exited {run.returncode}")
    report = _triage(run.log, f"{scenario.name}.{variant.name}.log")
    banned = set(scenario.rules)
    if outcome.detected_as:
        banned.add(outcome.detected_as["rule_id"])
    for f in report.findings:
        if f.rule_id in banned:
            problems.append(f"{f.rule_id} still fires (line {f.line})")
        elif f.severity == "error" and f.category == scenario.category:
            problems.append(f"{f.rule_id} ({f.category}) fires (line {f.line})")
    for check in scenario.checks_for(variant):
        msg = check(run.result)
        if msg:
            problems.append(msg)
    return FixOutcome(variant.name, not problems, run.returncode, run.seconds, problems, run)


# ------------------------------------------------------------------ the loop
def resolve_device(device: str, env: dict) -> str:
    if device == "auto":
        return "cuda" if env.get("cuda_available") else "cpu"
    if device not in ("cpu", "cuda"):
        raise LlmtriageError(f"unknown device {device!r} (auto, cpu or cuda)")
    return device


def skip_reason(scenario, device: str, env: dict) -> Optional[str]:
    if device not in scenario.devices:
        return f"{device} not supported (runs on {', '.join(scenario.devices)})"
    if device == "cuda" and not env.get("cuda_available"):
        return "CUDA is not available"
    if scenario.requires_no_cuda and env.get("cuda_available"):
        return "needs a machine without CUDA"
    return None


def run_verification(scenarios: list, *, device: str = "auto", jobs: int = 2, env: Optional[dict] = None,
                     progress: Optional[Callable[[ScenarioOutcome, int, int], None]] = None,
                     include_unsupported: bool = False) -> tuple[list, dict]:
    """Run every selected scenario on `device`; returns (outcomes, environment)."""
    from llmtriage.reproducers import run_variant   # deferred: as above

    _triage("rule warm-up\n", "warm-up.log")  # a broken rule set fails here, before minutes of runs
    env = env or probe_environment()
    dev = resolve_device(device, env)
    outcomes: list = []
    tasks: list = []
    for sc in scenarios:
        out = ScenarioOutcome(sc.name, sc.category, dev, tuple(sc.rules))
        out.skipped = skip_reason(sc, dev, env)
        if out.skipped and dev not in sc.devices and not include_unsupported:
            continue  # e.g. a CUDA-only scenario in a CPU run: not listed at all
        outcomes.append(out)
        if not out.skipped:
            tasks.extend((sc, v, out) for v in sc.variants())
    pending = {id(o): sum(1 for t in tasks if t[2] is o) for o in outcomes}
    results: dict = {}
    done_count = [0]
    total = sum(1 for o in outcomes if not o.skipped)

    def work(task):
        sc, v, out = task
        return task, run_variant(sc, v, dev)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for (sc, v, out), run in pool.map(work, tasks):
            results[(sc.name, v.name)] = run
            pending[id(out)] -= 1
            if pending[id(out)] == 0:
                _finish(sc, out, results)
                done_count[0] += 1
                if progress:
                    progress(out, done_count[0], total)
    return outcomes, env


def _finish(sc, out: ScenarioOutcome, results: dict) -> None:
    fail_run = results[(sc.name, sc.fail.name)]
    skipped = next((r.result["skipped"] for v in sc.variants()
                    if (r := results[(sc.name, v.name)]).result.get("skipped")), None)
    if skipped:  # a variant called kit.skip(): this machine cannot show the failure
        out.skipped = str(skipped)
        out.seconds = sum(results[(sc.name, v.name)].seconds for v in sc.variants())
        return
    evaluate_failure(sc, fail_run, out)
    out.seconds = fail_run.seconds
    for v in sc.fixes:
        run = results[(sc.name, v.name)]
        out.fixes.append(evaluate_fix(sc, v, run, out))
        out.seconds += run.seconds
    for f in out.fixes:
        out.problems.extend(f"{f.name}: {p}" for p in f.problems)


# ------------------------------------------------------------------ output
def totals(outcomes: list) -> dict:
    """Scenarios verified, failed and skipped, and the seconds of their runs (the sum of the table's
    per-scenario times; with --jobs > 1 they overlap, so the wall time is shorter)."""
    count = {k: sum(1 for o in outcomes if o.status == k) for k in ("verified", "failed", "skipped")}
    return {**count, "run_seconds": round(sum(round(o.seconds, 1) for o in outcomes), 1)}


def to_json(outcomes: list, env: dict, seconds: float) -> dict:
    return {
        "scenarios": [o.to_dict() for o in outcomes],
        "environment": env,
        "seconds": round(seconds, 2),
        "totals": totals(outcomes),
        "ok": all(o.ok for o in outcomes),
    }


def format_table(outcomes: list, seconds: float, env: dict) -> str:
    rows = [("SCENARIO", "DEVICE", "REPRODUCED", "DETECTED AS", "FIXES", "SECONDS")]
    for o in outcomes:
        if o.skipped:
            rows.append((o.name, o.device, "skipped", o.skipped, "", f"{o.seconds:.1f}" if o.seconds else ""))
            continue
        det = (o.detected_as or {}).get("rule_id", "-")
        if o.detected_as and not o.detected:
            det += " (wrong)" if o.reproduced else ""
        fixes = "  ".join(f"{f.name} {'ok' if f.verified else 'FAIL'}" for f in o.fixes)
        rows.append((o.name, o.device, "yes" if o.reproduced else "NO", det, fixes, f"{o.seconds:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(c.ljust(widths[i]) if i < 5 else c for i, c in enumerate(r)).rstrip() for r in rows]
    for o in outcomes:
        if o.status == "failed":
            for p in o.problems:
                lines.append(f"  {o.name}: {p}")
    t = totals(outcomes)
    ran = t["verified"] + t["failed"]
    lines.append(
        f"{t['verified']}/{ran} scenarios verified"
        + (f", {t['skipped']} skipped" if t["skipped"] else "")
        + f"; runs took {t['run_seconds']:.1f}s in all ({seconds:.1f}s wall)"
        + f" (torch {env.get('torch')}, transformers {env.get('transformers')})")
    return "\n".join(lines)


def save_logs(outcomes: list, directory: Path, env: dict) -> list:
    """Write each genuine log as <scenario>.<variant>.log plus a .meta.yaml beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    date = _dt.date.today().isoformat()
    for o in outcomes:
        if o.skipped or o.run is None:
            continue
        entries = [("fail", o.run, None)] + [("fix", f.run, f) for f in o.fixes]
        for kind, run, fx in entries:
            stem = f"{o.name}.{run.variant}"
            (directory / f"{stem}.log").write_text(run.log, encoding="utf-8")
            meta = {
                "scenario": o.name, "variant": run.variant, "kind": kind, "category": o.category,
                "exit_code": run.returncode, "device": o.device,
                "detected_as": o.detected_as if kind == "fail" else None,
                "verified": fx.verified if fx else None,
                "torch": env.get("torch"), "transformers": env.get("transformers"),
                "python": env.get("python"), "platform": platform.platform(terse=True), "date": date,
                "generated_by": f"llmtriage verify {o.name} --save-logs",
            }
            (directory / f"{stem}.meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
            written.append(directory / f"{stem}.log")
    return written


# ------------------------------------------------------------------ the verified record
def load_verified(path: Optional[Path] = None) -> dict:
    """The whole record (rules/verified.json unless `path`; {} when absent or unreadable)."""
    return read_record(path or verified_path())


def verification_for(verified_by: Optional[str], data: Optional[dict] = None) -> Optional[dict]:
    """The recorded result for a fix's `verified_by` ('scenario:variant'): a dict with
    verified, device, torch, transformers, date (a verified device preferred, CPU last) or None."""
    return verification(verified_by, fix_table(load_verified() if data is None else data))


def record(outcomes: list, env: dict, path: Optional[Path] = None) -> Path:
    """Merge this run's results into the verified record (rules/verified.json)."""
    p = Path(path) if path else verified_path()
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    return write_record(p, merge_runs(read_record(p), outcomes, env, now))


def run_and_report(names: Iterable[str] = (), *, device: str = "auto", jobs: int = 2) -> tuple[list, dict, float]:
    t0 = time.monotonic()
    outcomes, env = run_verification(select_scenarios(names), device=device, jobs=jobs)
    return outcomes, env, time.monotonic() - t0
