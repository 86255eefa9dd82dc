"""The Hugging Face Trainer's notebook progress line (NotebookProgressCallback), as pasted from Jupyter,
Colab or Kaggle (Unsloth notebooks print it): `[  23/2080 10:12 < 16:40:10, 0.03 it/s, Epoch 0.00/1]`.

It is the training loop's bar, drawn as HTML, so it carries no tqdm label nor `|` bar: the step, the
total, the elapsed time, the time left, the rate, then the training tracker's comment `Epoch e/E`. An
evaluation bar of the same callback has no `Epoch` comment and is not read. Read by metric_parse (a
record's step), phase (the training step) and throughput (a step-time sample).
"""
from __future__ import annotations

import re
from typing import Optional

NOTEBOOK_SRC = (rb"\[ *([0-9]+)/([0-9]+) ([0-9]+(?::[0-9]{2}){1,2}) < ([0-9]+(?::[0-9]{2}){1,2}), "
                rb"([0-9.]+) (it/s|s/it), Epoch [0-9.]+/[0-9]+\]")
_NOTEBOOK = re.compile(NOTEBOOK_SRC)


def notebook_bar(seg: bytes) -> Optional[tuple[int, int, Optional[float]]]:
    """(step, total, seconds per step) of a notebook progress line, else None (a rate of 0: no time)."""
    m = _NOTEBOOK.search(seg)
    if m is None:
        return None
    rate = float(m.group(5))
    sec = rate if m.group(6) == b"s/it" else (1.0 / rate if rate else None)
    return int(m.group(1)), int(m.group(2)), sec


def notebook_sample(seg: bytes, last_bar: dict) -> Optional[tuple[str, float]]:
    """(series, seconds per step) for throughput.py, as its tqdm training bars: from the second step on
    (the first includes start-up), once per step (`last_bar` remembers the step drawn last per total)."""
    nb = notebook_bar(seg)
    if nb is None or nb[2] is None or nb[0] < 2 or last_bar.get((nb[1], 1)) == (nb[0], ""):
        return None
    last_bar[(nb[1], 1)] = (nb[0], "")
    return f"bar/{nb[1]}", nb[2]
