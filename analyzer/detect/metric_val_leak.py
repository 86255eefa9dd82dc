"""metric-validation-perfect-early: the validation set is solved from the first epochs, far better than the
training set - it is not unseen data.

Keras (and loggers that print the same way) put the training and the validation figures of an epoch on one
line: `- loss: 0.2187 - acc: 0.9147 - val_loss: 0.0114 - val_acc: 1.0000`. A model that scores every
validation sample right from the first epochs, with a validation loss an order of magnitude below the
loss on the data it trains on, has seen the validation samples: the split put the same or near-identical
samples on both sides (frames of one video, augmented copies, duplicated rows, a group split by row), or a
feature carries the label. The reported score says nothing about unseen data, and no error is ever raised.

Healthy look-alikes this leaves alone: a validation loss a little below the training loss (dropout and
augmentation are off at evaluation, the training loss is averaged over an epoch in which the model
improved: a factor of 1.1-3, not RATIO), a high but imperfect validation accuracy (an easy task), a
training accuracy that is perfect too (the whole task is easy or memorised: nothing singles out the
validation set), perfect validation only late in training, and losses that are not positive (nnU-Net's
Dice + CE is negative).

Evidence required: >= RUN evaluation rows in a row, the first of them among the first EARLY rows, lasting
to the last row, each with val accuracy >= PERFECT, training accuracy < PERFECT, and a validation loss
<= training loss / RATIO.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt

RUN = 5
EARLY = 3
PERFECT = 0.9999
RATIO = 10.0

_NUM = rb"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_TRAIN_LOSS = re.compile(rb"(?<![\w/])loss\s*[:=]\s*" + _NUM)
_VAL_LOSS = re.compile(rb"(?<![\w/])val(?:idation)?_loss\s*[:=]\s*" + _NUM)
_TRAIN_ACC = re.compile(rb"(?<![\w/])(?:acc|accuracy|categorical_accuracy|binary_accuracy)\s*[:=]\s*" + _NUM)
_VAL_ACC = re.compile(rb"(?<![\w/])val(?:idation)?_(?:acc|accuracy|categorical_accuracy|binary_accuracy)\s*[:=]\s*" + _NUM)


def _row(text: bytes) -> Optional[tuple[float, float, float, float]]:
    """(train loss, train acc, val loss, val acc) of a line that prints all four, else None."""
    got = []
    for rx in (_TRAIN_LOSS, _TRAIN_ACC, _VAL_LOSS, _VAL_ACC):
        m = rx.search(text)
        if not m:
            return None
        try:
            got.append(float(m.group(1)))
        except ValueError:
            return None
    return got[0], got[1], got[2], got[3]


def _leaky(r: tuple[float, float, float, float]) -> bool:
    loss, acc, vloss, vacc = r
    return loss > 0 and vloss > 0 and vacc >= PERFECT and acc < PERFECT and vloss * RATIO <= loss


def validation_perfect(t: Any, found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when the trailing run of leaky rows is >= RUN long and starts among the first EARLY rows;
    nothing when another detector already names an error or the records are RL."""
    if any(a.severity == "error" for a in found) or t.rl_records:
        return []
    rows = [(line, r) for line, text in t.eval_rows if (r := _row(text)) is not None]
    if len(rows) < RUN:
        return []
    i = len(rows)
    while i > 0 and _leaky(rows[i - 1][1]):
        i -= 1
    run = rows[i:]
    if len(run) < RUN or i >= EARLY:
        return []
    (line, first), (last_line, last) = run[0], run[-1]
    return [Anomaly("val_perfect", "loss-suspicious", "error", line, last_line, None, len(run), {
        "first": i + 1, "evals": len(run), "total": len(rows), "val_acc": f"{last[3]:.4f}",
        "acc": f"{last[1]:.4f}", "val_loss": fmt(last[2]), "loss": fmt(last[0]),
        "factor": round(last[0] / last[2]) if last[2] else None})]
