"""A flat loss that is the very same number on many records is an error, not a warning.

`metric_detect._flat` reports a loss that stays within 1e-4 of its level as a warning unless a zero
grad_norm, a zero learning rate, the ln 2 chance level or an exact 0 says nothing trains. One more
piece of evidence is in the loss itself: different batches never give the same loss to five or more
significant digits, so a loss printed as exactly the same value (`video-loss: 10.3755` on every
record) over many records comes from weights that never change (frozen or unwrapped parameters, an
optimizer holding other tensors), whatever the logger prints besides it. A short run of equal values,
or values with few digits (`loss 2.1`), stays a warning.
"""
from __future__ import annotations

from llmtriage.detect.metric_detect import Anomaly
from llmtriage.detect.metrics import MetricTracker, finite

MIN_DIGITS = 5          # significant digits of the repeated value
RECORDS_FACTOR = 3      # ... repeated on at least this x flat_min_records records


def significant_digits(x: float) -> int:
    """Significant digits of a float as Python prints it shortest (10.3755 -> 6, 2.0 -> 1, 0.0012 -> 2)."""
    text = repr(abs(x)).split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return len(text)


def exact_flat(t: MetricTracker, anomalies: list[Anomaly]) -> None:
    """Upgrade a flat-loss warning to an error when every record of its run printed the same value
    with >= MIN_DIGITS significant digits, on >= RECORDS_FACTOR x flat_min_records records."""
    for a in anomalies:
        if a.kind != "flat" or a.severity != "warning":
            continue
        run = [r for r in t.records() if a.line <= r.line <= a.last_line and finite(r.loss)]
        values = {r.loss for r in run}
        if len(run) < RECORDS_FACTOR * t.th.flat_min_records or len(values) != 1:
            continue
        value = values.pop()
        if value is None or significant_digits(value) < MIN_DIGITS:
            continue
        a.severity = "error"
        a.numbers["exact"] = repr(value)
