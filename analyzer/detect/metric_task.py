"""A loss that falls while the task gets worse: the loss no longer measures the task.

`metric_detect._fast_fall` reports a loss falling implausibly fast as a warning unless a flat
gradient norm says the model took a shortcut: a small or easy dataset can fall fast too. The
evaluation lines often carry the evidence that decides it: the task metric printed beside the
evaluation loss (`eval_accuracy`, `eval_f1`, `eval_bleu`, or `eval_cer` / `eval_wer` where lower is
better). When the loss falls and that metric gets clearly worse over the same evaluations, the
model is optimising something other than the task (labels shifted the wrong way for the model's
loss type, labels leaking into inputs, the wrong loss function): the fall is an error, and the
message says which metric moved.
"""
from __future__ import annotations

import re
from typing import Optional

from llmtriage.detect.metric_detect import Anomaly
from llmtriage.detect.metrics import MetricTracker

# name, value: `'eval_accuracy': 0.91`, `"eval_cer": "0.41"`, `val_acc=0.5`, TRL's `eval_rewards/accuracies`
_TASK = re.compile(rb"""['"]?\b(?:eval|val|valid|validation|test)[_/]((?:rewards/)?acc(?:uracy|uracies)?|f1|exact_match|bleu"""
                   rb"""|rouge[\w]{0,6}|cer|wer)['"]?\s*[:=]\s*['"]?([0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)""")
_LOWER_IS_BETTER = {"cer", "wer"}
WORSE = 0.25            # the metric moved the wrong way by at least this share of its first value
MIN_EVALS = 3           # ... over at least this many evaluations


def task_series(t: MetricTracker) -> dict[str, list[tuple[int, float]]]:
    """(line, value) of each task metric printed on the evaluation-loss lines, by name."""
    out: dict[str, list[tuple[int, float]]] = {}
    for line, row in t.eval_rows:
        for m in _TASK.finditer(row):
            try:
                out.setdefault(m.group(1).decode("ascii"), []).append((line, float(m.group(2))))
            except ValueError:
                continue
    return out


def _worse(name: str, xs: list[float]) -> bool:
    first, last = xs[0], xs[-1]
    if name in _LOWER_IS_BETTER:
        return last >= first + max(WORSE * first, 0.05)
    return first > 0 and last <= first * (1 - WORSE)


def task_worsens(t: MetricTracker, anomalies: list[Anomaly]) -> None:
    """Upgrade a fast-fall warning to an error when an evaluation task metric got clearly worse over
    >= MIN_EVALS evaluations while the evaluation loss fell."""
    fall: Optional[Anomaly] = next((a for a in anomalies if a.kind == "fall" and a.severity == "warning"), None)
    if fall is None or len(t.evals) < MIN_EVALS:
        return
    losses = [float(v) for _, v in t.evals]
    if losses[-1] >= losses[0]:
        return
    for name, series in sorted(task_series(t).items()):
        xs = [v for _, v in series]
        if len(xs) >= MIN_EVALS and _worse(name, xs):
            fall.severity = "error"
            fall.numbers.update(task=f"eval_{name}", task_from=f"{xs[0]:g}", task_to=f"{xs[-1]:g}")
            fall.last_line = max(fall.last_line, series[-1][0])
            return
