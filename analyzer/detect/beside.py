"""A signature whose category depends on what else the log holds (rules/verdict.yaml `category_beside`).

The c10d client's "socket has timed out ... while trying to connect to (host, port)" is a rendezvous
connection failure before any collective (nccl-error); in a log that also holds an NCCL watchdog
timeout, collectives were running and timed out, and the connect timeout is part of that story
(nccl-timeout). Each entry names the rules whose findings change, the rules whose presence anywhere in
the log changes them, and the category they take.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import Finding


def category_beside(findings: list[Finding], spec: Optional[list[dict[str, Any]]], lang: Optional[str]) -> None:
    for entry in spec or ():
        if not any(f.rule_id in entry["beside"] for f in findings):
            continue
        for f in findings:
            if f.rule_id in entry["rules"] and f.category != entry["category"]:
                f.judgement = {"context": "category-beside", "severity_was": f.severity, "category_was": f.category,
                               "reason": tr(entry["reason"], lang)}
                f.category = entry["category"]
