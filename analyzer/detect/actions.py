"""Next action of a finding and of a report (retry / fix / replace-node / none), from rules/actions.yaml.

A finding the verdict judged survived gets `none`; otherwise the first context override that applies
(category, rule, markers seen in the log, the phase the job died in, the evidence line, a step-time surge),
then the rule's own action, then its category's default.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.spec import action_spec, compiled as _rx, tr, verdict_spec



# --------------------------------------------------------------------------- actions

def _override_applies(o: dict[str, Any], f: Finding, seen: set[str], phase: Optional[str] = None,
                      speed: Optional[dict[str, Any]] = None) -> bool:
    if o.get("categories") and f.category not in o["categories"]:
        return False
    # the last logged step took `ratio` times the run's median step (report.extra["throughput"]): the work
    # between two collectives had already grown before the failure (a long rollout or evaluation)
    if o.get("step_surge") and not _step_surge(o["step_surge"], speed):
        return False
    # the phase the job died in (detect/phase.py, set before the verdict runs): a collective timing out
    # while a checkpoint is written is not the same failure as one timing out mid-step
    if o.get("phases") and phase not in o["phases"]:
        return False
    if o.get("rules") and f.rule_id not in o["rules"]:
        return False
    if any(s not in seen for s in o.get("seen", ())):
        return False
    if o.get("seen_any") and not any(s in seen for s in o["seen_any"]):
        return False
    if any(s in seen for s in o.get("unless_seen", ())):
        return False
    # the log's own words (the evidence line and what the rule captured), never the rule's message: a
    # message that lists the possible causes ("preemption, time limit or a kill") would match them all
    if o.get("evidence") and not _rx(o["evidence"]).search("\n".join([f.evidence, *f.captures.values()])):
        return False
    for name, pat in (o.get("captures") or {}).items():
        if not _rx(pat).search(f.captures.get(name, "")):
            return False
    return True


def _step_surge(spec: dict[str, Any], speed: Optional[dict[str, Any]]) -> bool:
    if not speed or int(speed.get("step_samples") or 0) < int(spec.get("min_samples", 3)):
        return False
    median, last = float(speed.get("median_step_s") or 0), float(speed.get("last_step_s") or 0)
    return median > 0 and last >= float(spec["ratio"]) * median and last >= float(spec.get("min_seconds", 0))


def action_for(f: Finding, seen: set[str], lang: Optional[str], rules_by_id: dict[str, Any],
               phase: Optional[str] = None, speed: Optional[dict[str, Any]] = None) -> tuple[str, str]:
    """(action, reason) of one finding: survived -> none; else override, rule action, category default."""
    spec = action_spec()
    if f.judgement is not None and f.severity != "error":
        return "none", tr(spec["survived"], lang, reason=f.judgement["reason"])
    if f.severity == "info":
        return "none", tr(spec["generic"]["none"], lang)
    for o in spec["overrides"]:
        if _override_applies(o, f, seen, phase, speed):
            return o["action"], tr(o["reason"], lang)
    rule_action = (rules_by_id.get(f.rule_id) or {}).get("action")
    cat = spec["categories"].get(f.category) or spec["categories"]["unknown"]
    if rule_action and rule_action != cat["action"]:
        return rule_action, tr(spec["generic"][rule_action], lang)
    return cat["action"], tr(cat, lang)


def next_line(action: str, reason: str, lang: Optional[str]) -> str:
    """The human `Next: <action> — <reason>` line."""
    labels = action_spec()["labels"]
    name = tr(labels["actions"].get(action, {"en": action}), lang)
    sep = "：" if lang == "zh" else ": "
    return f"{tr(labels['next'], lang)}{sep}{name} — {reason}"


def status_word(status: str, lang: Optional[str]) -> str:
    return tr(verdict_spec()["status"].get(status, {"en": status}), lang)


def rule_action(rule: dict[str, Any], lang: Optional[str]) -> tuple[str, str]:
    """The default (context-free) action of a rule: its own, else its category's."""
    spec = action_spec()
    cat = spec["categories"].get(rule["category"]) or spec["categories"]["unknown"]
    own = rule.get("action")
    if own and own != cat["action"]:
        return own, tr(spec["generic"][own], lang)
    return cat["action"], tr(cat, lang)
