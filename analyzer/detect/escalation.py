"""A SIGKILL that only finishes a termination already under way (verdict step).

Launchers and schedulers stop a job in two steps: SIGTERM, a grace period, then SIGKILL for whatever is
still alive (torchrun's "Unable to shutdown process N via Signals.SIGTERM, forcefully exiting via
Signals.SIGKILL", the kubelet's kill after terminationGracePeriodSeconds, Slurm's KillWait). A guess
that a SIGKILL came from the OOM killer (exit 137, "Killed", exitcode -9) is wrong when the same log
already showed the job receiving the termination: the SIGTERM's sender is the cause, and the SIGKILL its
follow-up. Data: `kill_after_term` in rules/verdict.yaml (which kill rules yield, to which categories).
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.spec import tr


def kill_after_term(findings: list[Finding], spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    """Demote each error cause of `spec["kills"]` (rule ids that only guess who sent a SIGKILL) to a
    symptom when an error cause of a `spec["terms"]` category (the job was told to terminate) starts on
    or above its first line: the kill is the termination's escalation, not a memory kill."""
    if not spec:
        return
    kills, terms = set(spec["kills"]), set(spec["terms"])
    live = [f for f in findings if f.severity == "error" and f.role == "cause" and f.judgement is None]
    for f in [k for k in live if k.rule_id in kills]:
        before = [g for g in live if g is not f and g.category in terms and g.rule_id not in kills and g.line <= f.line]
        if not before:
            continue
        term = min(before, key=lambda g: g.line)
        f.role, f.priority = "symptom", 0
        f.judgement = {"context": "kill-after-term", "severity_was": "error",
                       "reason": tr(spec["reason"], lang, line=term.line)}
