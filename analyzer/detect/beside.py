"""A signature whose category depends on what else the log holds (rules/verdict.yaml `category_beside`).

The c10d client's "socket has timed out ... while trying to connect to (host, port)" is a rendezvous
connection failure before any collective (nccl-error); in a log that also holds an NCCL watchdog
timeout, collectives were running and timed out, and the connect timeout is part of that story
(nccl-timeout). Each entry names the rules whose findings change, the rules whose presence anywhere in
the log changes them, and the category they take. With `covered`, only a finding that a beside finding
covers changes: one that began no later and repeated at least as often (a NaN loss on every step, each
after an fp16 "overflow, skip step": the scaler skipped every update; one early overflow while the
scale calibrates does not explain a NaN loss a thousand steps on). With `same` ({capture: beside_capture}),
only a finding that names the same package as a beside finding changes (package names compared without
version specifiers, case, '-' vs '_' and submodules): pip's "Could not find a version that satisfies the
requirement decord" beside the run's own "No module named 'decord'" is why the package is missing.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import Finding


_NAME = re.compile(r"[A-Za-z0-9][\w.-]*")


def _package(value: Optional[str]) -> str:
    """'Decord==0.6.0' -> 'decord', 'flash_attn.ops' -> 'flash-attn' ('' when none)."""
    m = _NAME.match((value or "").strip().strip("'\""))
    return m.group(0).split(".")[0].lower().replace("_", "-") if m else ""


def _same(f: Finding, b: Finding, same: Optional[dict[str, str]]) -> bool:
    return all(_package(f.captures.get(k)) and _package(f.captures.get(k)) == _package(b.captures.get(v))
               for k, v in (same or {}).items())


def category_beside(findings: list[Finding], spec: Optional[list[dict[str, Any]]], lang: Optional[str]) -> None:
    for entry in spec or ():
        beside = [b for b in findings if b.rule_id in entry["beside"]]
        if not beside:
            continue
        for f in findings:
            if entry.get("same") and not any(_same(f, b, entry["same"]) for b in beside):
                continue
            if entry.get("covered") and not any(b.line <= f.line and b.count >= f.count for b in beside):
                continue
            if f.rule_id in entry["rules"] and f.category != entry["category"]:
                f.judgement = {"context": "category-beside", "severity_was": f.severity, "category_was": f.category,
                               "reason": tr(entry["reason"], lang)}
                f.category = entry["category"]
