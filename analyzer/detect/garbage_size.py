"""A garbage allocation size that nothing else in the log explains (rules/verdict.yaml `garbage_size_alone`).

"Tried to allocate more than 1EB" is a symptom: no batch asks for an exabyte, the size was computed from
values that were never written or were overwritten. When such a symptom is the only error the log holds
(a launcher's summary aside), its own category (cuda-oom) is the one answer that is surely wrong. Where the
size came from decides the category instead: an allocation made inside a collective (an all-gather of
optimizer state, a broadcast of a shape) received a size a peer never sent - the ranks fell out of step;
one made in the job's own compute path used device values that a kernel overwrote (labels of 4.6e17 after
a custom kernel ran) - a device memory fault of the kernel. The frames of the exception on the symptom's
line are matched against each source's `frames` regex in order; a source without `frames` is the default.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import ExceptionInfo, Finding
from llmtriage.detect.spec import compiled as _rx, tr


def _frames_text(exc: Optional[ExceptionInfo]) -> str:
    if exc is None:
        return ""
    return "\n".join(f"{fr.file} {fr.function} {fr.code}" for fr in exc.frames)


def garbage_size_alone(findings: list[Finding], exceptions: list[ExceptionInfo], spec: Optional[dict[str, Any]],
                       lang: Optional[str]) -> None:
    if not spec:
        return
    errors = [f for f in findings if f.severity == "error"]
    garbage = [f for f in errors if f.rule_id in spec["rules"]]
    # anything else that is an error and not a launcher's or peer's echo is the better explanation
    if not garbage or any(f.role == "cause" and f.rule_id not in spec["rules"] for f in errors):
        return
    for f in garbage:
        last = f.last_line or f.line
        exc = next((e for e in exceptions if f.line <= e.line <= last), None)
        text = _frames_text(exc)
        source = next((s for s in spec["sources"] if not s.get("frames") or _rx(s["frames"]).search(text)), None)
        if source is None or source["category"] == f.category:
            continue
        f.judgement = {"context": "garbage-size-alone", "severity_was": f.severity, "category_was": f.category,
                       "reason": tr(source["reason"], lang)}
        f.category = source["category"]
