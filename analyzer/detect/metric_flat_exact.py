"""A flat loss that is the very same number on many records is an error, not a warning.

`metric_detect._flat` reports a loss that stays within 1e-4 of its level as a warning unless a zero
grad_norm, a zero learning rate, the ln 2 chance level or an exact 0 says nothing trains. One more
piece of evidence is in the loss itself: different batches never give the same loss to five or more
significant digits, so a loss printed as exactly the same value (`video-loss: 10.3755` on every
record) over many records comes from weights that never change (frozen or unwrapped parameters, an
optimizer holding other tensors), whatever the logger prints besides it. A short run of equal values,
or values with few digits (`loss 2.1`), stays a warning, with two exceptions that carry their own proof:

- per-epoch records (Keras' `Epoch 3/10` then `... - loss: 1.9105`, one record per whole epoch): each is
  the average over the same whole dataset, so the same value to >= EPOCH_DIGITS significant digits on
  >= EPOCH_RECORDS epochs in a row means an epoch of updates changed nothing;
- per-step losses that moved from record to record before the run (median change between neighbours
  >= NOISE_QUANTA x the printed resolution of the repeated value) and then print one value on
  >= RECORDS_FACTOR x flat_min_records records: the batches still differ, the printed loss no longer
  does, so the model's output stopped depending on its input (`global step 448: loss = 0.5660` on every
  step after a spike). A running average would drift, not jump to one value and hold it.

Digits are counted as the log printed them when the parser kept that (`metric_parse.Printed`): a
progress bar's `train_loss=4.600` shows four significant digits, although the float's shortest form
`4.6` has two. A value printed with >= PRINTED_DIGITS digits that stays the same on >= LONG_FACTOR x
flat_min_records records in a row (Lightning's bar, one record per step, hundreds of steps) is no
plateau either: a plateaued model's per-step loss still moves by many printed resolutions from batch
to batch. Shorter runs, and values printed with fewer digits, stay warnings.
"""
from __future__ import annotations

from llmtriage.detect.metric_detect import Anomaly
from llmtriage.detect.metrics import MetricTracker, finite

MIN_DIGITS = 5          # significant digits of the repeated value
RECORDS_FACTOR = 3      # ... repeated on at least this x flat_min_records records
EPOCH_DIGITS = 4        # per-epoch averages: significant digits of the repeated value
EPOCH_RECORDS = 5       # ... on at least this many whole epochs in a row
NOISE_QUANTA = 10       # per-step losses: their earlier record-to-record change, in printed resolutions
PRINTED_DIGITS = 4      # significant digits as printed (trailing zeros count) ...
LONG_FACTOR = 6         # ... repeated on at least this x flat_min_records records


def significant_digits(x: float) -> int:
    """Significant digits of a float as Python prints it shortest (10.3755 -> 6, 2.0 -> 1, 0.0012 -> 2)."""
    text = repr(abs(x)).split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return len(text)


def resolution(x: float) -> float:
    """The place value of the last significant digit of `x` as printed shortest (0.566 -> 0.001)."""
    text = repr(abs(x))
    if "e" in text or "." not in text:
        return 1.0
    decimals = len(text.split(".")[1].rstrip("0"))
    return 10.0 ** -decimals


def _per_epoch(run: list) -> bool:
    """One record per whole epoch: every record carries an epoch, each a whole epoch after the last (a last
    record inside the next epoch, the bar of an interrupted epoch, may follow), >= EPOCH_RECORDS of them."""
    eps = [r.epoch for r in run]
    if any(e is None for e in eps):
        return False
    if len(eps) > 1 and 0 < eps[-1] - eps[-2] < 0.99:
        eps = eps[:-1]
    return len(eps) >= EPOCH_RECORDS and all(0.99 <= b - a <= 1.01 for a, b in zip(eps, eps[1:]))


def _moved_before(t: MetricTracker, run: list, value: float) -> bool:
    """The per-step losses before the run changed by >= NOISE_QUANTA printed resolutions between neighbours."""
    before = [r.loss for r in t.records() if r.line < run[0].line and finite(r.loss)]
    if len(before) < t.th.flat_min_records:
        return False
    steps = sorted(abs(b - a) for a, b in zip(before, before[1:]))
    return steps[len(steps) // 2] >= NOISE_QUANTA * resolution(value)


def exact_flat(t: MetricTracker, anomalies: list[Anomaly]) -> None:
    """Upgrade a flat-loss warning to an error when every record of its run printed the same value
    with >= MIN_DIGITS significant digits, on >= RECORDS_FACTOR x flat_min_records records (or the
    per-epoch and moved-before cases above)."""
    for a in anomalies:
        if a.kind != "flat" or a.severity != "warning":
            continue
        run = [r for r in t.records() if a.line <= r.line <= a.last_line and finite(r.loss)]
        values = {r.loss for r in run}
        if len(values) != 1 or any(r.rl for r in run):
            continue
        value = values.pop()
        if value is None or value <= 0:
            continue
        if len(run) >= EPOCH_RECORDS and significant_digits(value) >= EPOCH_DIGITS and _per_epoch(run):
            a.severity = "error"
            a.numbers["epoch_exact"] = repr(value)
            continue
        if len(run) < RECORDS_FACTOR * t.th.flat_min_records:
            continue
        shown = max((getattr(r.loss, "digits", 0) for r in run), default=0)
        if (significant_digits(value) >= MIN_DIGITS or _moved_before(t, run, value)
                or (shown >= PRINTED_DIGITS and len(run) >= LONG_FACTOR * t.th.flat_min_records)):
            a.severity = "error"
            a.numbers["exact"] = f"{value:#.{shown}g}" if shown > significant_digits(value) else repr(value)
