"""Detectors of where training starts (split from metric_detect.py): a loss near 0 from the first record
(`low_start`, loss-suspicious: the labels give the answer away) and a loss that never left its starting level
(`stuck`, no-grad: a plateau at the untrained level while steps run). Thresholds: `metrics.Thresholds`.
"""
from __future__ import annotations

import math
from typing import Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metric_parse import Record
from llmtriage.detect.metrics import MetricTracker, finite

WHOLE_EPOCHS = 10   # whole epochs after the first epoch's end record that a per-epoch log must span for `stuck`
PASSES = 1.9        # epochs from the start after which `stuck` no longer asks the plateau to be quiet ...
MEDIAN_SE = 1.25    # ... (a median's standard error in standard deviations over the square root of the count)
RANGE_95 = 3.63     # ... when its quarters' medians lie within the 95% range of 4 draws of one level (in standard errors)
NOISE_RATIO = 2.0   # ... and the quarters are equally noisy (no steep fall, spike or climb inside one)


def _sd(xs: list) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def noisy_level(fin: list[Record], k: int) -> Optional[tuple[float, float]]:
    """(epochs, allowed spread of the quarter medians) when a noisy loss is still a plateau: the run went over its data
    again and again (from the start over >= PASSES epochs: a model that learns lowers its loss on batches it has seen,
    whatever their kinds), its four quarters of k records are equally noisy and their medians differ by no more than
    the noise explains (RANGE_95 standard errors of a median). None otherwise."""
    epochs = [r.epoch for r in fin if r.epoch is not None]
    first = fin[0]
    if first.epoch is None or first.epoch > 0.05 or max(epochs) - first.epoch < PASSES or k < 5:
        return None
    quarters = [[r.loss for r in fin[i * k:(i + 1) * k]] for i in range(4)]
    sds = [_sd(q) for q in quarters]  # type: ignore[arg-type]
    if min(sds) <= 0 or max(sds) > NOISE_RATIO * min(sds):
        return None
    meds = [sorted(q)[k // 2] for q in quarters]  # type: ignore[type-var]
    slack = RANGE_95 * MEDIAN_SE * sorted(sds)[2] / math.sqrt(k)
    if max(meds) - min(meds) > slack:  # type: ignore[type-var,operator]
        return None
    return max(epochs) - first.epoch, slack  # type: ignore[operator]


def low_start(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """Every logged loss under collapse_loss from the very first record on (>= flat_min_records of them,
    not all exactly 0, with a gradient): a language model does not start training near 0 on real text,
    so the labels give the answer away (unshifted, visible in the input) or almost everything is masked.
    An error when the first record is within the first epoch (or the epoch is unknown), a warning later (a
    resumed run, a memorised tiny dataset). Not Megatron: its throughput benchmarks train on easy mock data.
    A table printing fixed decimals shows such a loss as 0.000000, -0.000000 and now and then 0.000100 (or
    -0.000100: a cross-entropy is never negative): those records count as near 0 too, as long as most print 0."""
    th = t.th
    if (t.sampled or t.meg_iters or t.first_nonfinite is not None or len(fin) < th.flat_min_records or any(r.rl for r in fin)
            or not all(abs(r.loss) < th.collapse_loss for r in fin) or not any(r.loss > 0 for r in fin)):  # type: ignore[operator,arg-type]
        return []       # (an exact 0 on every record is the zero detectors': a mean over no label token)
    if any(r.loss < 0 for r in fin) and 2 * sum(r.loss == 0 for r in fin) < len(fin):  # type: ignore[operator]
        return []       # a loss that swings around 0 with either sign is a policy / contrastive objective, not a cross-entropy
    grads = [r.grad_norm for r in fin if r.grad_norm is not None and finite(r.grad_norm)]
    if grads and all(g <= th.zero_grad for g in grads):  # type: ignore[operator]
        return []       # nothing moves at all: no-grad tells it
    if sum(r.poor for r in fin) * 2 > len(fin):
        return []       # the lines print a poor training accuracy: a small-scale loss (heatmap MSE), no answer given away
    first, last, late = fin[0], fin[-1], fin[0].epoch is not None and fin[0].epoch >= 1.0
    return [Anomaly("low_start", "loss-suspicious", "warning" if late else "error", first.line, last.line, first.step,
                    len(fin), {"loss": fmt(first.loss), "from": first.at, "max_loss": fmt(max(r.loss for r in fin)),  # type: ignore[type-var]
                               "records": len(fin), "epoch": fmt(first.epoch) if first.epoch is not None else None, "grad_norm": fmt(grads[-1]) if grads else None})]


def stuck(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """The loss never fell from where training started: the first record is at the start (step <=
    stuck_first_step, or no step and an epoch <= 0.05, or the end of epoch 1 of a log with a record per whole epoch
    spanning >= WHOLE_EPOCHS more), >= stuck_records records over >= stuck_span steps
    (>= stuck_epochs epochs when only epochs are known, twice stuck_records records when neither is), and the median of the last quarter is not below
    stuck_drop x the median of the first quarter, every record within stuck_noise of that level, and the
    learning rate not still warming up: a plateau at the untrained level (ln(vocab) for a model from
    scratch) while steps run. Moving weights lower it by a few percent at least."""
    th = t.th
    if t.first_nonfinite is not None or len(fin) < th.stuck_records or any(r.rl for r in fin):
        return []
    first, last = fin[0], fin[-1]
    epochs = [r.epoch for r in fin if r.epoch is not None]
    # one record per finished epoch (`Epoch 1/100` at 100%, counted from 1): the first is the end of the first epoch,
    # the start of training when many whole epochs follow it without the loss moving
    per_epoch = (first.epoch is not None and first.epoch <= 1.0 and all(float(e).is_integer() for e in epochs)
                 and max(epochs) - first.epoch >= WHOLE_EPOCHS)
    if first.epoch is not None and first.epoch > 0.05 and not per_epoch:
        return []       # the log starts in a later epoch (a resumed run, a per-epoch bar restarting at 0)
    steps = [r.step for r in fin if r.step is not None]
    if per_epoch and not all(b > a for a, b in zip(steps, steps[1:])):
        pass            # the bar's counter repeats or restarts every epoch: the epochs measure the span
    elif first.step is not None and last.step is not None:   # (a step only early, from a bar above: by epochs)
        if first.step > th.stuck_first_step or last.step - first.step < th.stuck_span:
            return []
    elif first.epoch is not None:
        if max(r.epoch for r in fin if r.epoch is not None) - first.epoch < th.stuck_epochs:
            return []
    elif len(fin) < 2 * th.stuck_records:
        return []
    lrs = [r.lr for r in fin if r.lr is not None]
    if lrs and lrs[-1] > 1.5 * lrs[len(lrs) // 2]:
        return []       # still warming up in the second half: the loss need not fall yet
    k = len(fin) // 4
    early = sorted(r.loss for r in fin[:k])  # type: ignore[type-var]
    late = sorted(r.loss for r in fin[-k:])  # type: ignore[type-var]
    e, lt = early[k // 2], late[k // 2]
    if e <= 0 or lt < th.stuck_drop * e:  # type: ignore[operator]
        return []
    # a plateau: every record within stuck_noise of the level (batches that differ by kind, image vs
    # video, zig-zag far more: their mean may stay while the model learns)
    # ... unless a noisy level held over several passes over the data (`noisy_level`)
    passes = None
    if max(r.loss for r in fin) - min(r.loss for r in fin) > th.stuck_noise * e:  # type: ignore[type-var,operator]
        passes = noisy_level(fin, k)
        if passes is None:
            return []
    grads = [r.grad_norm for r in fin if r.grad_norm is not None and finite(r.grad_norm)]
    return [Anomaly("stuck", "no-grad", "error", first.line, last.line, first.step, len(fin), {
        "loss": fmt(first.loss), "from": first.at, "to": last.at, "last": fmt(last.loss), "early": fmt(e),
        "late": fmt(lt), "records": len(fin), "grad_norm": fmt(grads[-1]) if grads else None,
        "epochs": fmt(passes[0]) if passes else None, "slack": fmt(passes[1]) if passes else None})]
