"""A signature whose category depends on what else the log holds (rules/verdict.yaml `category_beside`).

The c10d client's "socket has timed out ... while trying to connect to (host, port)" is a rendezvous
connection failure before any collective (nccl-error); in a log that also holds an NCCL watchdog
timeout, collectives were running and timed out, and the connect timeout is part of that story
(nccl-timeout). Each entry names the rules whose findings change, the rules whose presence anywhere in
the log changes them, and the category they take. With `covered`, only a finding that a beside finding
covers changes: one that began no later and repeated at least as often (a NaN loss on every step, each
after an fp16 "overflow, skip step": the scaler skipped every update; one early overflow while the
scale calibrates does not explain a NaN loss a thousand steps on).
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import Finding


def category_beside(findings: list[Finding], spec: Optional[list[dict[str, Any]]], lang: Optional[str]) -> None:
    for entry in spec or ():
        beside = [b for b in findings if b.rule_id in entry["beside"]]
        if not beside:
            continue
        for f in findings:
            if entry.get("covered") and not any(b.line <= f.line and b.count >= f.count for b in beside):
                continue
            if f.rule_id in entry["rules"] and f.category != entry["category"]:
                f.judgement = {"context": "category-beside", "severity_was": f.severity, "category_was": f.category,
                               "reason": tr(entry["reason"], lang)}
                f.category = entry["category"]
