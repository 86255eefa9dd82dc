"""Verified-fix records, rules/verified.json: the one reader and writer (layer 1).

`llmtriage verify --record` regenerates each failure for real and writes, per fix variant
('scenario:variant', what a rule fix's `verified_by` points at), the result on each device and
transformers major: `runs["<device>/transformers-<major>"]` holds one run per pair (a 4.x run never
overwrites a 5.x one), and `devices["<device>"]` keeps the older shape, the run `best_run` picks
among that device's runs, for readers that know only it. The loader reads the "fixes" table into
`RuleSet.verified` (cached with the rules); triage output, the knowledge base and `verify` all pick
the run to show with `best_run`, which also lists the transformers versions that agree with it
(`transformers_versions`). Where the file lives is the business of `ruleset/files.py`
(`verified_path()`); every function here takes the path.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Optional

VERIFIED_FILE = "verified.json"
ABOUT = ("Written by `llmtriage verify --record` from real reproducer runs; do not edit by hand. "
         "fixes[<scenario>:<fix-variant>] is what a rule fix's verified_by points at; its runs are "
         "kept per <device>/transformers-<major>, devices[<device>] shows the best of a device's runs.")
RUN_KEYS = ("verified", "device", "torch", "transformers", "date")
# what best_run returns: RUN_KEYS and the transformers versions (oldest first) of the runs on the
# same device and torch with the same result as the one shown, e.g. ["4.57.6", "5.24.0"]
SHOWN_KEYS = RUN_KEYS + ("transformers_versions",)


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


def version_key(version: Any) -> tuple[int, ...]:
    """A version string as a tuple of its leading numbers ('5.24.0' -> (5, 24, 0); '' -> ())."""
    nums = re.match(r"\d+(?:\.\d+)*", str(version or "").strip())
    return tuple(int(n) for n in nums.group(0).split(".")) if nums else ()


def major(version: Any) -> str:
    """The major of a version string ('4.57.6' -> '4'; 'unknown' without a leading number)."""
    key = version_key(version)
    return str(key[0]) if key else "unknown"


def run_key(device: Any, transformers: Any) -> str:
    """The key of a run in an entry's `runs`: '<device>/transformers-<major>' (e.g. 'cpu/transformers-5')."""
    return f"{device}/transformers-{major(transformers)}"


def _candidates(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run of one entry, each with its device: `runs` (per device and transformers major)
    first, else `devices` (per device, the older shape), else the flat entry itself."""
    for table in ("runs", "devices"):
        runs = entry.get(table)
        if isinstance(runs, dict):
            cands = [dict(rec, device=rec.get("device") or str(key).split("/", 1)[0])
                     for key, rec in runs.items() if isinstance(rec, dict)]
            if cands:
                return cands
    return [dict(entry)] if "verified" in entry else []


def _rank(run: dict[str, Any]) -> tuple:
    # a verified run first, a GPU before the CPU, then the newest transformers
    return (run.get("verified") is not True, str(run.get("device")) == "cpu", str(run.get("device")),
            tuple(-n for n in version_key(run.get("transformers"))))


def best_run(entry: Any) -> Optional[dict[str, Any]]:
    """The run to show for one fix entry: a verified run first, a GPU before the CPU, the newest
    transformers major last.

    Accepts {"runs": {"DEV/transformers-N": {"verified", "device", "torch", ...}}}, the per-device
    form {"devices": {DEV: {"verified", "torch", ...}}} and a flat entry {"verified", "device",
    "torch", ...}. Returns {verified, device, torch, transformers, date, transformers_versions},
    `verified` True only for a recorded `true`, `transformers_versions` the sorted distinct
    transformers versions of the runs on the same device and torch with the same result (the shown
    one among them); None when the entry holds no run."""
    if not isinstance(entry, dict):
        return None
    cands = _candidates(entry)
    if not cands:
        return None
    best = min(cands, key=_rank)
    out = {k: (best.get(k) is True if k == "verified" else best.get(k)) for k in RUN_KEYS}
    same = {str(r["transformers"]) for r in cands
            if r.get("transformers") and (r.get("verified") is True) == out["verified"]
            and r.get("device") == best.get("device") and r.get("torch") == best.get("torch")}
    out["transformers_versions"] = sorted(same, key=lambda v: (version_key(v), v))
    return out


def transformers_text(run: Optional[dict[str, Any]], and_word: str = "and") -> Optional[str]:
    """'transformers 4.57.6 and 5.24.0' for a shown run (its `transformers_versions`, else its one
    `transformers`); None when it names none. `and_word` comes from the caller's words (en/zh)."""
    if not run:
        return None
    vs = [str(v) for v in (run.get("transformers_versions") or ()) if v] or (
        [str(run["transformers"])] if run.get("transformers") else [])
    if not vs:
        return None
    joined = vs[0] if len(vs) == 1 else f"{', '.join(vs[:-1])} {and_word} {vs[-1]}"
    return f"transformers {joined}"


def verification(verified_by: Optional[str], fixes: Any) -> Optional[dict[str, Any]]:
    """The run to show for a fix's `verified_by` key in a "fixes" table, or None if never run."""
    if not verified_by or not isinstance(fixes, dict):
        return None
    return best_run(fixes.get(verified_by))


def _put_run(entry: dict[str, Any], device: str, run: dict[str, Any]) -> None:
    """Record `run` (on `device`) in `entry`: runs[<device>/transformers-<major>] replaced, other
    devices and majors kept; devices[<device>] (the older shape) re-derived as the best of that
    device's runs. An entry written before `runs` existed has its `devices` runs moved in first."""
    runs = entry.get("runs")
    if not isinstance(runs, dict):
        runs = {}
        for dev, rec in (entry.get("devices") or {}).items():
            if isinstance(rec, dict):
                runs[run_key(dev, rec.get("transformers"))] = dict(rec, device=rec.get("device") or dev)
    runs[run_key(device, run.get("transformers"))] = dict(run, device=device)
    entry["runs"] = dict(sorted(runs.items()))
    devices = entry.get("devices") if isinstance(entry.get("devices"), dict) else {}
    mine = [r for r in entry["runs"].values() if r.get("device") == device]
    shown = min(mine, key=_rank)
    devices[device] = {k: v for k, v in shown.items() if k != "device"}
    entry["devices"] = devices


def merge_runs(record: dict[str, Any], outcomes: Iterable[Any], env: dict[str, Any], now: str) -> dict[str, Any]:
    """`record` with the results of `verify` outcomes (run at `now`, ISO 8601) merged in: a new
    dict; runs on other devices and with another transformers major are kept.

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
        _put_run(sc_entry, o.device, dict(
            base, reproduced=bool(o.reproduced), detected=o.detected, detected_as=o.detected_as,
            fail_variant=o.run.variant if o.run else None, verified=bool(o.ok)))
        for f in o.fixes:
            key = f"{o.name}:{f.name}"
            entry = data["fixes"].setdefault(key, {"scenario": o.name, "fix": f.name, "devices": {}})
            rule_id = (o.detected_as or {}).get("rule_id")
            entry.update(scenario=o.name, fix=f.name, category=o.category)
            # a fix counts as verified only when the failure was reproduced and recognised too
            _put_run(entry, o.device, dict(base, verified=bool(f.verified and o.ok), rule_id=rule_id))
            entry["verified"] = any(r.get("verified") for r in entry["runs"].values())
            # the rule triage named in the run shown (transformers majors may word the failure apart)
            entry["rule_id"] = min(entry["runs"].values(), key=_rank).get("rule_id") or rule_id
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
