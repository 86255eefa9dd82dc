"""A wrapper's quoted error that another rule recognises (verdict step).

Servers re-raise the error of a start-up stage inside their own message: SGLang's "Capture cuda graph
failed: <error>", torch.compile's "backend='inductor' raised: <error>". The wrapper rules capture
the quoted error as `inner` and decide only when nothing more specific does. When another finding of
the same process, printed on or above the wrapper's line, carries that very text as its evidence (the
original traceback's last line, or the same line read by the inner error's own rule), that finding
names what failed: the wrapper ranks as its symptom. The inner finding keeps its own role and
priority, so a peer's recognised death above both still leads (a "Connection closed by peer" rule is a
symptom of whatever made the peer exit). Data: `wrapper_inner` in rules/verdict.yaml (the capture
name, how much of it must match, categories that never count as the inner error).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.spec import tr

_WS = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().lower()


def wrapper_yields_to_inner(findings: list[Finding], spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    """Demote each error cause whose `spec["capture"]` capture (at least `spec["min_chars"]` long)
    begins with text that another error finding's evidence contains, that finding on or above the
    wrapper's line in the same process and of no `spec["not_categories"]` category."""
    if not spec:
        return
    cap, need = str(spec["capture"]), int(spec["min_chars"])
    skip = set(spec.get("not_categories", ()))
    for w in [f for f in findings if f.severity == "error" and f.role == "cause" and f.judgement is None
              and f.rule_id != "unknown"]:
        inner = _norm(w.captures.get(cap) or "")
        if len(inner) < need:
            continue
        key = inner[:int(spec["compare_chars"])]
        inners = [g for g in findings if g is not w and g.rule_id not in (w.rule_id, "unknown")
                  and g.severity == "error" and g.judgement is None and g.category not in skip
                  and g.category != w.category and g.line <= w.line and w.same_process(g)
                  and key in _norm(g.evidence or "")]
        if not inners:
            continue
        named = max(inners, key=lambda g: (g.line, g.priority))
        w.role, w.priority = "symptom", 0
        w.judgement = {"context": "wraps-recognised-error", "severity_was": "error",
                       "reason": tr(spec["reason"], lang, line=named.line)}
