"""metric-eval-loss-frozen: every evaluation printed the same loss while training steps went on
(the evaluation losses are collected by `MetricTracker._scan_evals`)."""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.metrics import MetricTracker, Record


def eval_frozen(t: MetricTracker, fin: list[Record]) -> Optional[dict[str, Any]]:
    """Every evaluation printed the same loss, to 4+ significant digits, with training steps logged between
    the first and the last: the evaluated weights never changed (no optimizer update reaches them: frozen
    or unwrapped parameters, FSDP without use_orig_params, an optimizer built before the model was wrapped).
    Real evaluations of a model that trains differ in the last digits; trailing zeros are no digits (0.79000
    is two). Returns the anomaly's fields
    (metric_detect builds it), or None."""
    ev = t.evals
    if len(ev) < 2 or len({v for _, v in ev}) != 1:
        return None
    value = ev[0][1]
    # significant digits: trailing zeros after the point carry none (a value rounded to two digits, then
    # printed with a fixed width as 0.79000, repeats by rounding, not because the weights never changed)
    digits = value.split("e")[0].split("E")[0]
    if "." in digits:
        digits = digits.rstrip("0")
    if len(digits.replace(".", "").replace("-", "").lstrip("0")) < 4:
        return None
    between = [r for r in fin if ev[0][0] < r.line < ev[-1][0]]
    steps = {r.step for r in between if r.step is not None}
    # a step that never moves while the epoch does is a stale counter (the "0/N" of a progress bar drawn
    # before the first record), not one step logged many times: the epochs tell the progress then
    epochs = {r.epoch for r in between if r.epoch is not None}
    if len(between) < t.th.eval_frozen_records or (steps and len(steps) < 2 and len(epochs) < 2):
        return None
    first, last = between[0], between[-1]
    return {"line": ev[0][0], "last_line": ev[-1][0], "step": first.step, "count": len(ev), "numbers": {
        "evals": len(ev), "value": value, "line": ev[0][0], "to_line": ev[-1][0], "from": first.at, "to": last.at,
        "records": len(between)}}
