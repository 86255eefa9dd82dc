"""A distributed init that never completed: fewer ranks joined the process group than the world size, then a kill.

Lightning prints "Initializing distributed: GLOBAL_RANK: r, MEMBER: k/N" from every rank as it enters
init_process_group, and rank zero "All distributed processes registered. Starting with N processes" once all N
arrived. When fewer than N distinct members ever appear, rank zero never says the world is complete and no
progress follows, the job was only waiting for ranks its launcher never started (a Slurm job with fewer tasks than
num_nodes x devices, python run without srun). A scheduler cancel or launcher kill printed after that is a
consequence: it ends a job that never began, so it is not the root cause. No taxonomy category names a launcher
whose process count misses the trainer's world, so the finding is `unknown` with the reason (markers `init` of
rules/verdict.yaml, settings `init_incomplete` there, texts in rules/detectors.yaml).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.findings import Finding
from llmtriage.templates import render_template

_MEMBER = re.compile(r"\bMEMBER: (\d+)/(\d+)\b")
_REGISTERED = re.compile(r"Starting with (\d+) processes")


def init_incomplete(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                    lang: Optional[str]) -> None:
    hits = scanner.hits.get("init", ())
    members = [(line, int(m.group(1)), int(m.group(2)), text) for line, name, text in hits
               if name == "init-member" and (m := _MEMBER.search(text))]
    if not spec or not members or len(members) > int(spec.get("max_members", 63)):
        return
    world = max(n for _, _, n, _ in members)
    seen = {k for _, k, n, _ in members if n == world}
    last, _, _, shown = max(members)
    if world < 2 or len(seen) >= world or scanner.last_progress > last:
        return
    if any(name == "init-registered" and (m := _REGISTERED.search(text)) and int(m.group(1)) >= world
           for _, name, text in hits):
        return      # rank zero saw the whole world: init completed (another node's MEMBER lines are elsewhere)
    errors = [f for f in findings if f.severity == "error"]
    kills = [f for f in errors if f.category in spec["kills"] and f.line > last]
    if not kills or any(f.line > 0 and f not in kills and f.role == "cause" for f in errors):
        return      # no kill to explain, or another error explains the job
    hint = next((line for line, name, _ in hits if name == "init-srun-unused"), None)
    entry = detector_texts()["init_incomplete"]
    text = detector_text(entry, lang)
    values = {"seen": str(len(seen)), "world": str(world), "line": str(last), "hint": str(hint or "")}
    findings.append(detector_finding(entry, text, values, line=last, last_line=kills[-1].line, default_priority=47,
                                     evidence=shown))
    reason = render_template(text["kill_reason"], values).strip()
    for kill in kills:
        kill.judgement = {"context": "init-incomplete", "severity_was": kill.severity, "reason": reason}
        kill.severity = "warning"
