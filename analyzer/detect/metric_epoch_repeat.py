"""The whole per-epoch metric sequence printed again, digit for digit, epoch after epoch: nothing is trained.

`metric_detect._repeat` finds a per-step loss sequence that repeats with a period of >= 3 records and >= 4 distinct
values. A plain loop that prints a few records per epoch (`Epoch 3  Train, psnr 24.44699055  loss = 0.04801134`, then
`Epoch 3  Valid, ... loss = 0.05095885`) has a period of one or two records, too short for that test to tell a replayed
epoch from a trend. Its own proof is the epoch: each record is an average over the same whole split, so when every
record of an epoch equals, to every printed digit (>= DIGITS significant digits each), the record at the same place in
the epoch before, on >= EPOCHS epochs in a row (SINGLE_EPOCHS when an epoch has one record), an epoch of updates changed nothing (frozen or detached parameters, an
optimizer holding other tensors, a step that is never called). A record may carry no learning rate or grad_norm: those
fields have their own detectors, and a varying one would show the updates still happen.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metric_flat_exact import significant_digits
from llmtriage.detect.metrics import MetricTracker, finite

DIGITS = 4          # significant digits of every repeated value
EPOCHS = 3          # ... the same sequence on at least this many epochs in a row
SINGLE_EPOCHS = 5   # one record per epoch: on this many (as metric_flat_exact.EPOCH_RECORDS)
MAX_PER_EPOCH = 8   # records per epoch (a train and a validation record, a few splits): more is a per-step log


def _digits(x: float) -> int:
    return max(getattr(x, "digits", 0), significant_digits(x))


def epoch_repeat(t: MetricTracker, anomalies: list[Anomaly]) -> list[Anomaly]:
    """A `repeat` anomaly (no-grad, error) for the longest run of >= EPOCHS whole epochs whose records repeat the epoch
    before value for value; none when another no-grad error already names the run."""
    if t.sampled or any(a.category == "no-grad" and a.severity == "error" for a in anomalies):
        return []
    recs = [r for r in t.records() if finite(r.loss)]
    if not recs or any(r.rl or r.epoch is None or r.grad_norm is not None or r.lr is not None for r in recs):
        return []
    groups: list[list] = []         # consecutive records of one epoch
    for r in recs:
        if groups and groups[-1][0].epoch == r.epoch:
            groups[-1].append(r)
        else:
            groups.append([r])
    best = (0, 0)                   # (first group, number of groups) of the longest run
    start = 0
    for i in range(1, len(groups) + 1):
        same = (i < len(groups) and groups[i][0].epoch - groups[i - 1][0].epoch == 1
                and [r.loss for r in groups[i]] == [r.loss for r in groups[i - 1]])
        if same:
            continue
        if i - start > best[1]:
            best = (start, i - start)
        start = i
    first, n = best
    seq = [r.loss for r in groups[first]]
    if n < (EPOCHS if len(seq) > 1 else SINGLE_EPOCHS):
        return []
    if len(seq) > MAX_PER_EPOCH or any(x is None or x <= 0 or _digits(x) < DIGITS for x in seq):
        return []
    run = [r for g in groups[first:first + n] for r in g]
    again = groups[first + 1][0]
    return [Anomaly("repeat", "no-grad", "error", run[0].line, run[-1].line, again.step, len(run) - len(seq), {
        "period": len(seq), "repeated": len(run) - len(seq), "from": run[0].at, "again": again.at,
        "values": ", ".join(fmt(x) for x in seq[:4]), "epochs": n})]
