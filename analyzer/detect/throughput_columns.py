"""Free-form per-step timing columns for the throughput detector (throughput.py), and the judgement of a
slowdown that sets in within the first quarter of a run.

  columns       a training script's own per-step line of `name value` columns: `| step    112.1 ms |
                tokens/s   26332.8`, `tokens/s=118,301`, `tokens/s: 21008`, `tokens/s 1.91M`, `tokens/s/gpu
                19218`. The rate (tokens per second, after the name: not vLLM's `243.2 tokens/s, Running`) is
                kept as the `rate` source (step time ~ 1/rate); a line without one gives its step column in
                milliseconds (`step 12256.7 ms`; a bare `step 12` is the step counter) as the `loop` source.
                Read after every named source (Megatron, DeepSpeed, verl, Composer, torchtitan's `tps:`).

  early drop    the quarter comparison of throughput.py compares the first quarter of the samples with the last;
                a run that slows down after its first few steps and stays slow has a first quarter made mostly of
                slow steps, so the comparison sees nothing. `early_drop` finds that shape: >= 3 steady steps
                (the slowest <= 1.5x the fastest), then a step >= `rise_factor` x the slowest of them before a
                quarter of the samples, and >= 90% of all later steps as slow; the steady steps' median is then
                the early yardstick. A step timer's series only (a tqdm bar's rate is smoothed).
"""
from __future__ import annotations

import re
from typing import Optional

from llmtriage.detect.metric_anomaly import median as _median

COLS_SRC = rb"\btokens/s(?:/gpu)?(?: *[:=] *| +)[0-9]|\bstep +[0-9][0-9.]* ?ms\b"
_RATE = re.compile(rb"\btokens/s(?:/gpu)?(?: *[:=] *| +)([0-9][0-9,]*(?:\.[0-9]+)?)([kKM]?)(?![0-9A-Za-z/])")
_STEP = re.compile(rb"\bstep +([0-9][0-9.]*) ?ms\b")
_SUFFIX = {b"": 1.0, b"k": 1e3, b"K": 1e3, b"M": 1e6}
HEAD_MIN = 3


def column_sample(seg: bytes) -> Optional[tuple[str, float, None]]:
    """(source, seconds, None) from a per-step line's own timing columns, or None: `rate` with 1/tokens-per-second,
    else `loop` with its step column's milliseconds in seconds."""
    m = _RATE.search(seg)
    if m is not None:
        try:
            r = float(m.group(1).replace(b",", b"")) * _SUFFIX[m.group(2)]
        except ValueError:
            return None
        return ("rate", 1.0 / r, None) if r > 0 else None
    m = _STEP.search(seg)
    if m is not None:
        try:
            v = float(m.group(1)) * 1e-3
        except ValueError:
            return None
        return ("loop", v, None) if v > 0 else None
    return None


def early_drop(vals: list[tuple[int, float]], factor: float) -> Optional[float]:
    """The median step time of the steady steps before a slowdown that sets in within the first quarter of
    the samples and lasts (see the module docstring), or None."""
    xs = [v for _, v in vals]
    for i in range(HEAD_MIN, len(xs) // 4 + 1):
        head = xs[:i]
        if min(head) <= 0 or max(head) > 1.5 * min(head):
            return None             # the first steps are not steady: no yardstick
        if xs[i] < factor * max(head):
            continue
        later = xs[i:]
        slow = sum(1 for x in later if x >= factor * max(head))
        return _median(head) if slow >= 0.9 * len(later) else None
    return None
