"""A progress bar that had run about as long as the collective timeout when the collective timed out.

RL jobs generate between two collectives of the trainer ranks: the actor ranks wait in an all-reduce while
an inference engine is still working through its prompts ("Processed prompts:  94%| 30/32 [28:41<04:10"). When
a bar printed just above the timeout (within `window` lines) shows an elapsed time of at least `ratio` of the
timeout (Timeout(ms) captured by the timeout's rule as `timeout_ms`) and at most `ratio_max` of it, the collective
did not hang: the other component's phase legitimately outlasted the timeout, and a rerun reaches the same place.
A bar that ran far longer than the timeout (the trainer's own epoch bar, hours into it) saw collectives complete
while it ran, so it is not what the waiting ranks waited for; only bars of a phase other than the training steps
count (`label`: the text before the bar names generation, a rollout, an evaluation), since the trainer's own step
bar passes through any elapsed time on its way. The verdict marks
the log with `marker` (rules/verdict.yaml `bar_outlasts_timeout`), which an action override reads.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled
from llmtriage.findings import Finding

# a tqdm bar's elapsed time: "| 30/32 [28:41<04:10, ...]", "| 12/400 [1:02:41<5:08:12, ...]"
_ELAPSED = re.compile(r"\|\s*\d+/\d+ \[(?:(\d+):)?(\d{1,2}):(\d{2})<")


def _bar_near(scanner: Scanner, first: int, last: int, low: float, high: float, label: Any) -> bool:
    """A bar of a `label` phase between lines `first` and `last` whose elapsed seconds lie in [low, high]."""
    for n, raw in scanner.rows(first):
        if n >= last:
            break
        text = raw.decode("utf-8", "replace")
        for m in _ELAPSED.finditer(text):
            if (low <= int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) <= high
                    and label.search(text[:m.start()])):
                return True
    return False


def bar_outlasts_timeout(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]]) -> None:
    if not spec:
        return
    for f in findings:
        if f.severity != "error" or f.category not in spec.get("categories", ()) or not f.captures.get("timeout_ms"):
            continue
        try:
            limit = float(f.captures["timeout_ms"]) / 1000.0
        except ValueError:
            continue
        window = int(spec.get("window", 20))
        low, high = float(spec.get("ratio", 0.8)) * limit, float(spec.get("ratio_max", 1.25)) * limit
        label = compiled(spec.get("label") or r"(?!)")
        if limit > 0 and _bar_near(scanner, max(1, f.line - window), f.line, low, high, label):
            scanner.seen.add(spec["marker"])
            return
