"""Baselines: acknowledge known findings so checks (the pre-commit hook, CI) fail only on new ones.

`llmtriage baseline LOGS... > .llmtriage-baseline.json` writes::

    {"version": 1, "tool": "llmtriage",
     "findings": [{"file": "logs/run1.log", "rule_id": "torch-cuda-oom", "fingerprint": "9f2c...",
                   "severity": "error", "title": "...", "line": 42}]}

A finding is acknowledged when an entry has its rule id, its fingerprint and its file (paths are
relative to the baseline file's folder, or to the working directory; `"file": "*"` matches any
log). The fingerprint hashes the rule id and the evidence line with digits, hex ids and spacing
normalised, so re-running or re-numbering a log keeps it while a different failure changes it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.errors import ConfigError
from llmtriage.findings import Finding, Report

BASELINE_VERSION = 1
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b")
_NUM = re.compile(r"\d+")
_WS = re.compile(r"\s+")


def fingerprint(f: Finding) -> str:
    ev = _WS.sub(" ", _NUM.sub("0", _HEX.sub("#", f.evidence or f.message))).strip()
    return hashlib.sha256(f"{f.rule_id}\0{ev}".encode("utf-8", "replace")).hexdigest()[:20]


def _rel(path: str, base: Path) -> str:
    if path == "-":
        return "-"
    p = Path(path).resolve()
    try:
        return p.relative_to(base.resolve()).as_posix()
    except ValueError:
        return os.path.relpath(p, base.resolve()).replace(os.sep, "/") if os.name != "nt" else p.as_posix()


def make_baseline(reports: Iterable[Report], root: Optional[Path] = None) -> dict[str, Any]:
    root = root or Path.cwd()
    entries = []
    for r in reports:
        for f in r.findings:
            entries.append({"file": _rel(r.source, root), "rule_id": f.rule_id, "fingerprint": fingerprint(f),
                            "severity": f.severity, "title": f.title, "line": f.line})
    entries.sort(key=lambda e: (e["file"], e["rule_id"], e["line"]))
    return {"version": BASELINE_VERSION, "tool": "llmtriage", "findings": entries}


@dataclasses.dataclass
class Baseline:
    path: Path
    entries: list[dict[str, Any]]

    def __post_init__(self) -> None:
        self._keys: set[tuple[str, str, str]] = {(e["file"], e["rule_id"], e["fingerprint"]) for e in self.entries}

    def acknowledged(self, source: str, f: Finding) -> bool:
        fp = fingerprint(f)
        if ("*", f.rule_id, fp) in self._keys:
            return True
        cands = {source.replace(os.sep, "/")}
        if source != "-":
            cands.add(_rel(source, self.path.parent))
            cands.add(_rel(source, Path.cwd()))
        return any((c, f.rule_id, fp) in self._keys for c in cands)

    def filter(self, report: Report) -> Report:
        """A copy of `report` without the acknowledged findings (their number in extra["baselined"])."""
        keep = [f for f in report.findings if not self.acknowledged(report.source, f)]
        out = dataclasses.replace(report, findings=keep, extra=dict(report.extra))
        dropped = len(report.findings) - len(keep)
        if dropped:
            out.extra["baselined"] = dropped
            out.extra["baseline_file"] = _rel(str(self.path), Path.cwd())
        return out


def load_baseline(path: str | os.PathLike) -> Baseline:
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read baseline: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: baseline is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != BASELINE_VERSION or not isinstance(doc.get("findings"), list):
        raise ConfigError(f"{p}: not an llmtriage baseline (expected {{\"version\": 1, \"findings\": [...]}})")
    entries = []
    for i, e in enumerate(doc["findings"]):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("file", "rule_id", "fingerprint")):
            raise ConfigError(f"{p}: findings[{i}]: needs string keys file, rule_id and fingerprint")
        entries.append(e)
    return Baseline(p.resolve(), entries)
