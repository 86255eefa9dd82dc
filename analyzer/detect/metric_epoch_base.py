"""Ordinal epoch labels: a loop that prints `Epoch: 1 [0/391]` or `epoch 1, step 128, loss ...` counts its
epochs from 1, so the records of its first epoch carry epoch 1. The detectors read a record's epoch as
epochs completed (the Trainer's `'epoch': 0.5`), and would place that whole first epoch after it: a loss
that collapses or never moves in the first epoch would read as a later one. When every record's epoch is a
whole number and the lowest is 1 (no record in an epoch 0), the labels are ordinals and are shifted down
by one, in place, before any detector reads them. Fractional epochs (the Trainer, mmcv's `[e][i/n]`, a
Keras bar's fraction) and 0-based counters are left as they are.
"""
from __future__ import annotations

from llmtriage.detect.metric_parse import Record


def ordinal_epochs(recs: list[Record]) -> bool:
    """Shift 1-based whole-number epoch labels to epochs completed; True when they were shifted."""
    eps = [r.epoch for r in recs if r.epoch is not None]
    if len(eps) < 2 or min(eps) != 1 or any(e != int(e) for e in eps):
        return False
    for r in recs:
        if r.epoch is not None:
            r.epoch -= 1
    return True
