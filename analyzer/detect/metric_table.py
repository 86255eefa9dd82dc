"""Metric records from layouts spread over more than one line: the Trainer's notebook loss tables (a header
naming the columns, then rows) and Keras bars under an `Epoch N/M` line of their own. `metrics.MetricTracker`
calls these; single-line records are `metric_parse.parse_line`'s.
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from llmtriage.detect.metric_parse import num
from llmtriage.engine.logparse import split_prefix

# notebook loss tables: the header's column names -> record fields (None: a column we skip)
_TABLE_FIELD = {"step": 0, "training loss": 1, "train loss": 1, "loss": 1, "grad norm": 2, "grad_norm": 2,
                "learning rate": 3, "learning_rate": 3, "lr": 3, "epoch": 4,
                "validation loss": 5, "eval loss": 5, "val loss": 5}
# the Trainer's / Unsloth's run plan ("  Num Epochs = 1", "Total optimization steps = 1,125" / "Total steps = 1,125"):
# a table without an Epoch column gets each row's epoch from its step
PLAN_EPOCHS = re.compile(rb"\bNum Epochs = ([0-9][0-9,]*)")
PLAN_STEPS = re.compile(rb"\bTotal (?:optimization )?steps = ([0-9][0-9,]*)")


def _unprefixed(line: bytes) -> bytes:
    """A table line without the launcher's or collector's prefix ([rank3]:, a Ray actor, a host...)."""
    return split_prefix(line.decode("utf-8", "replace")).text.encode("utf-8")


def table_columns(header: bytes) -> Optional[tuple[bytes, list[Optional[int]], bool]]:
    """(separator, field of each column, RL table?) when `header` is a loss table's header line
    (`Step<TAB>Training Loss...` or `Step | Training Loss | ...`), else None."""
    text = _unprefixed(header).strip().lower()
    sep = b"\t" if b"\t" in text else b"|"
    cells = [c.strip().decode("ascii", "replace") for c in text.strip(b"|").split(sep)]
    if len(cells) < 2 or cells[0] not in ("step", "epoch") or not any(c in ("training loss", "train loss") for c in cells):
        return None
    cols = [_TABLE_FIELD.get(c) for c in cells]
    rl = any(w in c for c in cells for w in ("reward", "kl", "completion", "advantage"))
    return sep, cols, rl


def table_row(text: bytes, sep: bytes, cols: list[Optional[int]]) -> Optional[tuple]:
    """(step, loss, grad_norm, lr, epoch, validation loss as printed or None) of one row of a loss table,
    or None when the line is not a row of it (the table has ended)."""
    cells = _unprefixed(text).strip().strip(b"|").split(sep)
    if len(cells) != len(cols) or not cells[0].strip().isdigit():
        return None
    out: list[Any] = [None, None, None, None, None, None]
    for cell, k in zip(cells, cols):
        cell = cell.strip()
        v = num(cell)
        if v is None and cell.lower() not in (b"no log", b""):
            return None
        if k == 5:
            out[5] = cell.decode("ascii") if v is not None and math.isfinite(v) else None
        elif k is not None:
            out[k] = v
    if out[0] is not None:
        out[0] = int(out[0])
    if out[1] is None:
        return None
    return tuple(out)


# Keras prints the epoch on its own line ("Epoch 3/10") above the bar that carries the loss
# ("938/938 [==============================] - 5s 5ms/step - loss: 0.2954 - accuracy: 0.9149")
# `Epoch N/M` on a line of its own, also under a launcher's or collector's prefix ([rank3]:, a host, a Ray actor, a time stamp)
_KERAS_EPOCH = re.compile(rb"(?m)(?:^|[ :\]\)])Epoch ([0-9]+)/([0-9]+)\s*\r?$")
_KERAS_BAR = re.compile(rb"\s*([0-9]+)/([0-9]+) \[[=>.]*\]")


def keras_epoch(view: bytes, ls: int, le: int) -> Optional[float]:
    """Epochs completed at a Keras bar line view[ls:le] from the last `Epoch N/M` line in the 4 KiB
    above it: N - 1 plus the bar's fraction (N at a finished bar), or None."""
    bar = _KERAS_BAR.match(view, ls, le)
    if bar is None:
        text = _unprefixed(view[ls:le])
        bar = _KERAS_BAR.match(text) if text != view[ls:le] else None
        if bar is None:
            return None
    found = None
    for found in _KERAS_EPOCH.finditer(view, max(0, ls - 4096), ls):
        pass
    if found is None or not 1 <= int(found.group(1)) <= int(found.group(2)) or not int(bar.group(2)):
        return None
    return int(found.group(1)) - 1 + min(int(bar.group(1)) / int(bar.group(2)), 1.0)
