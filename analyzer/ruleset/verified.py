"""Verified-fix records, rules/verified.json: the one reader and writer (layer 1).

`llmtriage verify --record` regenerates each failure for real and writes, per fix variant
('scenario:variant', what a rule fix's `verified_by` points at), the result on each device. The
loader reads the "fixes" table into `RuleSet.verified` (cached with the rules); triage output, the
knowledge base and `verify` all pick the run to show with `best_run`. Where the file lives is the
business of `ruleset/files.py` (`verified_path()`); every function here takes the path.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Optional

VERIFIED_FILE = "verified.json"
ABOUT = ("Written by `llmtriage verify --record` from real reproducer runs; do not edit by hand. "
         "fixes[<scenario>:<fix-variant>] is what a rule fix's verified_by points at.")
RUN_KEYS = ("verified", "device", "torch", "transformers", "date")


def read_record(path: os.PathLike[str] | str) -> dict[str, Any]:
    """The whole record at `path` ({} when absent, unreadable or not a JSON object)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def fix_table(record: Any) -> dict[str, Any]:
    """The "fixes" table of a record ({} when missing or malformed)."""
    fixes = record.get("fixes") if isinstance(record, dict) else None
    return fixes if isinstance(fixes, dict) else {}


def best_run(entry: Any) -> Optional[dict[str, Any]]:
    """The run to show for one fix entry: a verified run first, a GPU before the CPU.

    Accepts the per-device form {"devices": {DEV: {"verified", "torch", ...}}} and a flat entry
    {"verified", "device", "torch", ...}. Returns {verified, device, torch, transformers, date},
    `verified` True only for a recorded `true`; None when the entry holds no run."""
    if not isinstance(entry, dict):
        return None
    runs = entry.get("devices")
    cands: list[dict[str, Any]] = []
    if isinstance(runs, dict):
        cands = [dict(rec, device=rec.get("device") or dev) for dev, rec in runs.items() if isinstance(rec, dict)]
    if not cands and "verified" in entry:
        cands = [dict(entry)]
    if not cands:
        return None
    best = min(cands, key=lambda r: (r.get("verified") is not True, str(r.get("device")) == "cpu",
                                     str(r.get("device"))))
    return {k: (best.get(k) is True if k == "verified" else best.get(k)) for k in RUN_KEYS}


def verification(verified_by: Optional[str], fixes: Any) -> Optional[dict[str, Any]]:
    """The run to show for a fix's `verified_by` key in a "fixes" table, or None if never run."""
    if not verified_by or not isinstance(fixes, dict):
        return None
    return best_run(fixes.get(verified_by))


def merge_runs(record: dict[str, Any], outcomes: Iterable[Any], env: dict[str, Any], now: str) -> dict[str, Any]:
    """`record` with the results of `verify` outcomes (run at `now`, ISO 8601) merged in: a new
    dict; runs on other devices are kept.

    An outcome has name, category, device, skipped, reproduced, detected, detected_as, ok, run
    (with .variant) and fixes (each with .name and .verified)."""
    data = json.loads(json.dumps(record)) if record else {}
    data.setdefault("fixes", {})
    data.setdefault("scenarios", {})
    base = {"torch": env.get("torch"), "transformers": env.get("transformers"),
            "python": env.get("python"), "date": now}
    for o in outcomes:
        if o.skipped:
            continue
        sc_entry = data["scenarios"].setdefault(o.name, {"category": o.category, "devices": {}})
        sc_entry["category"] = o.category
        sc_entry.setdefault("devices", {})[o.device] = dict(
            base, reproduced=bool(o.reproduced), detected=o.detected, detected_as=o.detected_as,
            fail_variant=o.run.variant if o.run else None)
        for f in o.fixes:
            key = f"{o.name}:{f.name}"
            entry = data["fixes"].setdefault(key, {"scenario": o.name, "fix": f.name, "devices": {}})
            entry.update(scenario=o.name, fix=f.name, category=o.category,
                         rule_id=(o.detected_as or {}).get("rule_id"))
            # a fix counts as verified only when the failure was reproduced and recognised too
            entry.setdefault("devices", {})[o.device] = dict(base, verified=bool(f.verified and o.ok))
            entry["verified"] = any(r.get("verified") for r in entry["devices"].values())
    data.pop("about", None)
    data.pop("updated", None)
    return {"about": ABOUT, "updated": now, **data}


def write_record(path: os.PathLike[str] | str, record: dict[str, Any]) -> Path:
    """Write `record` to `path` atomically (a temporary file beside it, then a rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p
