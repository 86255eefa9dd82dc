"""A native crash that a recognised error of the same process explains (verdict step).

C++ code that only prints a failed call goes on until it touches what it never got: vLLM's sleep-mode
allocator prints "CUDA Error: out of memory" and the next copy segfaults; ggml prints "no kernel image"
and the Go runtime reports SIGSEGV. The crash is real, but it is the consequence of the error printed
just before it by the same process, so it ranks as a symptom of that cause. Data: `crash_after_cause`
in rules/verdict.yaml (which crash categories yield, to which cause categories, within how many lines).
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.spec import tr


def crash_after_cause(findings: list[Finding], spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    """Demote each crash finding (`spec["crashes"]` categories, a recognised rule, still an error cause)
    to a symptom when an error cause of a `spec["causes"]` category ends at most `spec["window"]`
    lines before it in the same process."""
    if not spec:
        return
    crashes, causes, window = set(spec["crashes"]), set(spec["causes"]), int(spec["window"])
    live = [f for f in findings if f.severity == "error" and f.role == "cause" and f.judgement is None
            and f.rule_id != "unknown"]
    for f in [c for c in live if c.category in crashes]:
        before = [g for g in live if g is not f and g.category in causes and g.line < f.line
                  and 0 <= f.line - (g.last_line or g.line) <= window and f.same_process(g)]
        if before:
            cause = max(before, key=lambda g: g.line)
            f.role, f.priority = "symptom", 0
            f.judgement = {"context": "crash-after-cause", "severity_was": "error",
                           "reason": tr(spec["reason"], lang, line=cause.line)}


def death_after_warning_cause(findings: list[Finding], spec: Optional[dict[str, Any]], explains: set[str],
                              reason: Any, lang: Optional[str]) -> None:
    """A bare native death that names no reason (`spec["wrappers"]`: "Aborted", a segfault line) printed
    at most `spec["window"]` lines after a warning-level cause whose category explains deaths, with no
    error cause of its own before it: the library printed why and gave up (cuDNN's "Could not load
    library ... Error: libcuda.so: cannot open shared object file", then abort()). The warning is the
    root cause, promoted to error; the wrapper ranks as its symptom. A wrapper in `spec["message_after"]`
    prints its reason below it instead (terminate's "what():" line): the warning-level cause there."""
    if not spec:
        return
    wrappers, window = set(spec["wrappers"]), int(spec["window"])
    # a wrapper whose message follows it (terminate's "what():" line): the warning-level cause printed there
    after = {str(k): int(v) for k, v in (spec.get("message_after") or {}).items()}
    wrappers |= set(after)
    for w in [f for f in findings if f.rule_id in wrappers and f.severity == "error" and f.judgement is None]:
        if any(g is not w and g.severity == "error" and g.role == "cause" and g.judgement is None
               and g.rule_id not in wrappers and g.line <= w.line and w.same_process(g) for g in findings):
            continue        # an error of its own explains the death (crash_after_cause, the ranking)
        before = [g for g in findings if g.severity == "warning" and g.role == "cause" and g.judgement is None
                  and g.category in explains
                  and (0 < w.line - (g.last_line or g.line) <= window if w.rule_id not in after
                       else 0 < g.line - w.line <= after[w.rule_id]) and w.same_process(g)]
        if not before:
            continue
        cause = max(before, key=lambda g: (g.last_line or g.line, g.priority))
        cause.judgement = {"context": "explains-death", "severity_was": "warning",
                           "reason": tr(spec["cause_reason_after"] if w.rule_id in after else reason, lang, line=w.line)}
        cause.severity = "error"
        if w.role == "cause":
            w.judgement = {"context": "crash-after-cause", "severity_was": "error",
                           "reason": tr(spec["reason_after" if w.rule_id in after else "reason"], lang, line=cause.line)}
        w.role, w.priority = "symptom", 0
