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


def _same_process(f: Finding, g: Finding) -> bool:
    return f.rank is None or g.rank is None or f.rank == g.rank or g.rank in f.ranks or f.rank in g.ranks


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
                  and 0 <= f.line - (g.last_line or g.line) <= window and _same_process(f, g)]
        if before:
            cause = max(before, key=lambda g: g.line)
            f.role, f.priority = "symptom", 0
            f.judgement = {"context": "crash-after-cause", "severity_was": "error",
                           "reason": tr(spec["reason"], lang, line=cause.line)}
