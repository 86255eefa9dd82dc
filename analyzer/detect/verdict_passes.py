"""Verdict passes over the findings after the status is known (split from detect/verdict.py): demotion,
causes that make later errors consequences of a death, fp16 overflows that settled, a log that stalled,
and the invariant that a crashed report names its death with an error finding."""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import ExceptionInfo, Finding
from llmtriage.detect.pasted import pasted_after
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr, verdict_spec
from llmtriage.detect.unknown import death_unknown, unknown_finding


def demote(f: Finding, severity: str, reason: str, ctx: str) -> None:
    f.judgement = {"context": ctx, "severity_was": f.severity, "reason": reason}
    f.severity = severity


def after_death(findings: list[Finding], death: Optional[dict[str, Any]], lang: Optional[str],
                 scanner: Optional[Scanner] = None) -> None:
    if death is None:
        return
    spec = verdict_spec()["after_death"]
    cut = death["line"] + int(spec["margin"])
    if scanner is not None and death.get("name") == "exception":     # the exception's message goes on below it
        cut = max(cut, death["line"] + scanner.continuation_after(death["line"], int(spec["message_lines"])))
    # only a recognised cause makes later causes consequences: a peer's timeout or a launcher
    # summary printed first (other ranks' output comes earlier in the file) does not
    recognised = [f for f in findings if f.severity == "error" and f.rule_id != "unknown" and f.role == "cause"
                  and f.line <= cut]
    if not recognised:
        return
    # (a command that prints earlier output may follow the death line at once, inside the margin)
    pasted = pasted_after(scanner, death["line"]) if spec.get("exempt_pasted") else None
    for f in findings:
        if (f.severity == "error" and f.rule_id != "unknown" and f.line > cut and f.role == "cause"
                and f.category not in spec.get("exempt_categories", ()) and (pasted is None or f.line < pasted)):
            f.role, f.priority = "symptom", 0
            f.judgement = {"context": "after-death", "severity_was": "error",
                           "reason": tr(spec["reason"], lang, line=death["line"])}


def timeouts_after_death(findings: list[Finding], lang: Optional[str]) -> None:
    spec = verdict_spec().get("death_before_timeouts")
    if not spec:
        return
    deaths = [f for f in findings if f.rule_id in spec["deaths"] and f.severity == "error" and f.judgement is None]
    if not deaths:
        return
    first = min(deaths, key=lambda f: f.line)
    for f in findings:
        if f.category in spec["categories"] and f.severity == "error" and f.judgement is None and f.line > first.line:
            f.role, f.priority = "symptom", 0
            f.judgement = {"context": "after-peer-death", "severity_was": "error",
                           "reason": tr(spec["reason"], lang, line=first.line)}


def settled(findings: list[Finding], scanner: Scanner, lang: Optional[str]) -> None:
    """fp16 overflows that stopped while the run went on (the dynamic loss scale settling from 2^32):
    the step counter advanced by `min_steps`, and by at least as many steps as overflows, after the
    last one, and the scale never reached its floor."""
    spec = verdict_spec().get("settled")
    if not spec:
        return
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "error":
            continue
        try:
            low = float(f.captures.get("min_scale") or "inf")
        except ValueError:
            low = float("inf")
        last = f.last_line or f.line
        steps = scanner.steps_after(last, epochs=False)
        if low > float(spec["floor_scale"]) and steps >= max(int(spec["min_steps"]), f.count):
            demote(f, spec["severity"], tr(spec["reason"], lang, steps=steps, line=last), "settled")


def stalled(findings: list[Finding], scanner: Scanner, status: str, lang: Optional[str]) -> None:
    """A log that neither died nor finished and ends on a hang precursor repeated `min_count` times
    with no progress since its first line (vLLM's "no shared memory broadcast block found in 60
    seconds", once a minute for a quarter of an hour): the job is hung, and that warning is the error.
    It outranks a throughput error: generation at 0 tokens/s is what the hang looks like."""
    spec = verdict_spec().get("stalled")
    if not spec or status != "running" or any(f.severity == "error" and f.category not in spec.get("explains", ())
                                               for f in findings):
        return      # a hang explains a throughput that fell to nothing; any other error is its own story
    cands = [f for f in findings if f.severity == "warning" and f.role == "cause" and f.judgement is None
             and f.category in spec["categories"] and f.count >= int(spec["min_count"])
             and scanner.last_progress < f.line]
    if cands:
        best = max(cands, key=lambda f: (f.priority, f.count))
        best.judgement = {"context": "stalled", "severity_was": "warning",
                          "reason": tr(spec["reason"], lang, count=best.count, line=best.line)}
        best.severity = "error"


def crash_has_error(findings: list[Finding], status: str, death: Optional[dict[str, Any]],
                    exceptions: list[ExceptionInfo], lang: Optional[str]) -> None:
    """A crashed report always has an error finding. When every error was judged away after the death
    check (the signature of an earlier run before the command was typed again, an error the process
    survived) while the death itself is still unexplained, the death is named: the exception raised on
    the death's line (an `unknown` finding with its headline), else the death evidence."""
    if status != "crashed" or death is None or any(f.severity == "error" for f in findings):
        return
    if any(f.line == death["line"] and f.rule_id == "unknown" for f in findings):
        return      # the death's own unknown finding was judged (a thread's, a survived one): not repeated
    exc = next((e for e in exceptions if e.line == death["line"]), None) if death.get("name") == "exception" else None
    findings.append(unknown_finding(exc, lang) if exc is not None else death_unknown(death, lang))
