"""An fp16 loss scale that fell to its minimum, after which DeepSpeed went on taking its steps: the scaler settled.

`loss-scale-at-minimum` reads DeepSpeed's "Attempted loss scale: 2.0, reducing to 1.0" as a run in which every
step overflows and is skipped. DeepSpeed also prints a cumulative counter every `steps_per_print` steps,
"step=N, skipped=K". When, after the rule's last line, that counter advanced by at least `min_steps` steps while
`skipped` grew by no more than `max_skip_share` of them, the optimizer was stepping again: the overflows were the
scaler searching for its level at the start (a scale below 1 is legal for DeepSpeed's dynamic scaler), and
the finding is a warning (rules/verdict.yaml `scaler_settled`). A counter whose skips keep pace with its steps,
or no counter after the line, leaves the error alone. Runs in the training observer before the verdict.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.spec import tr, verdict_spec
from llmtriage.findings import Finding


def scaler_settled(findings: list[Finding], trace: list[tuple[int, int, int]],
                   last: Optional[tuple[int, int, int]], lang: Optional[str]) -> None:
    spec = verdict_spec().get("scaler_settled") or {}
    if not spec or not trace:
        return
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "error" or f.judgement is not None:
            continue
        after = f.last_line or f.line
        first = next((c for c in trace if c[2] > after), None)
        end = last if last is not None and last[2] > after else None
        if first is None or end is None or end[2] <= first[2]:
            continue
        steps, skipped = end[0] - first[0], end[1] - first[1]
        if steps < int(spec["min_steps"]) or skipped < 0 or skipped > float(spec["max_skip_share"]) * steps:
            continue
        reason = tr(spec["reason"], lang, steps=steps, skipped=skipped, start=first[0], end=end[0],
                    line=first[2], to_line=end[2])
        f.judgement = {"context": "scaler-settled", "severity_was": f.severity, "reason": reason}
        f.severity = str(spec["severity"])
