"""A loss that reaches ~0 while still inside the first epoch, with a gradient (`metric-loss-near-zero-first-epoch`).

Inside the first epoch every batch is data the model has never seen. A language model whose loss on unseen
batches falls from a normal level (>= fall_from) to below collapse_loss (0.01 nats per token: it predicts
almost every next token with certainty) has not learned the text, it reads the answer from its input: samples
packed so they attend to each other or duplicated across the set, labels not shifted against the inputs, the
target inside the prompt. `metric_detect._collapse` reads the same shape when the gradient vanishes too and
`_fall` when it happens within fall_within steps with a flat gradient; this reads the slower falls (a few
hundred steps) whose gradient is still measurable, which those leave at a warning or say nothing about.

Conservative by construction (a tiny dataset can be memorised, a narrow label space can legitimately be
predicted exactly):
- every record of the tail (the trailing run below collapse_loss, >= leak_records of them) carries an epoch
  <= 1 and the first of them < 1 - the "every batch unseen" evidence; no epoch, no finding;
- the tail is sustained: >= flat_min_records records or >= fall_within steps (three records a few steps after
  a fast fall can be an easy start: `metric-fast-fall` keeps its warning);
- every tail loss is > 0 and every tail record logs a finite grad_norm > zero_grad: a loss of exactly 0 is
  the hidden-NaN / no-label-token reading (`metric_zero`), and without a gradient the finding is
  `metric-loss-collapse`. A log whose records never print a gradient (the PyTorch examples' AverageMeter,
  an old Trainer) is read on the losses alone when the tail has >= flat_min_records records (a span of steps
  is not enough without the gradient) that keep moving (>= 3 distinct printed values): a model that stopped changing would print one value, and varying losses under 0.01 on
  unseen batches are the model reading the answer, whatever its gradient;
- not RL (a policy loss near 0 is by design), no non-finite value in the log.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metric_parse import Record
from llmtriage.detect.metrics import MetricTracker, finite


def first_epoch_low(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    th = t.th
    if t.first_nonfinite is not None or len(fin) < th.leak_records + 1 or any(r.rl for r in fin):
        return []
    if fin[0].loss is None or fin[0].loss < th.fall_from:
        return []
    i = len(fin)
    while i > 0 and fin[i - 1].loss is not None and 0 < fin[i - 1].loss < th.collapse_loss:
        i -= 1
    tail = fin[i:]
    if len(tail) < th.leak_records or i == 0:
        return []
    # sustained, not a few lucky batches right after a fast fall (an easy start stays metric-fast-fall's
    # warning): >= flat_min_records records, or a tail spanning >= fall_within optimizer steps
    span = tail[-1].step - tail[0].step if tail[-1].step is not None and tail[0].step is not None else 0
    if len(tail) < th.flat_min_records and span < th.fall_within:
        return []
    # the first record below collapse_loss inside the first epoch; a record at epoch 1.00 is its last batch
    if tail[0].epoch is None or tail[0].epoch >= 1.0 or any(r.epoch is None or r.epoch > 1.0 for r in tail):
        return []
    grads = [r.grad_norm for r in tail]
    if t.grad_seen == 0 and len(tail) >= th.flat_min_records and len({r.loss for r in tail}) >= 3:
        grads = []      # no gradient logged anywhere: the moving losses alone
    elif any(g is None or not finite(g) or g <= th.zero_grad for g in grads):
        return []
    at, last = tail[0], tail[-1]
    return [Anomaly("first_epoch_low", "loss-suspicious", "error", at.line, last.line, at.step, len(tail), {
        "from_loss": fmt(fin[0].loss), "from": fin[0].at, "at": at.at, "epoch": fmt(at.epoch),
        "last_epoch": fmt(last.epoch), "loss": fmt(last.loss), "records": len(tail),
        "grad_norm": fmt(grads[-1]) if grads else None})]
