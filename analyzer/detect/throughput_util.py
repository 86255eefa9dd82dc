"""Which nvidia-smi / npu-smi snapshots taken during training show every GPU underused (throughput.py).

A snapshot is underused when every GPU in it is at or below `low_util` (30%). Two readings count:
  * four or more snapshots during training, at least `low_share` of them underused (the GPUs starve
    step after step);
  * one to three snapshots during training, each underused, with at least `low_min_steps` training
    records (progress bars, timers) before the first: the user looked at the GPUs while the job was
    training steadily and every GPU sat at or below 30%. A training step keeps a GPU busy well over
    half of the sample period, so one such reading of a running job is already the evidence a user
    pastes (CPU-bound augmentation, a single data worker, eager MoE expert loops, I/O). A snapshot
    taken before the first step is warm-up (model loading, tokenisation) and never counts, and a
    snapshot in which any GPU is busy (> low_util) is no evidence: some ranks are working.
Idle snapshots (<= idle_util on most GPUs) are judged by throughput.py before this.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.metrics import Thresholds

Snap = list[tuple[int, Optional[int], Optional[int], int]]    # [(util, used, total, line)]
LOW_MIN_STEPS = 3      # training records before a lone snapshot for it to count


def underused(snaps: list[Snap], th: Thresholds, steps_before: int = 0) -> list[Snap]:
    """The underused snapshots that make the finding, or [] when they do not."""
    low = [s for s in snaps if all(r[0] <= th.low_util for r in s)]
    if len(snaps) >= 4:
        return low if len(low) >= th.low_share * len(snaps) else []
    if snaps and len(low) == len(snaps) and steps_before >= LOW_MIN_STEPS:
        return low
    return []


def search_unprefixed(pattern: Any, seg: bytes) -> Any:
    """pattern.search on a line, then on the line without a launcher's or logger's prefix ([rank3]:, a host, a time)."""
    from llmtriage.engine.logparse import split_prefix   # deferred: only for rows the plain search missed
    return pattern.search(seg) or pattern.search(split_prefix(seg.decode("utf-8", "replace")).text.encode("utf-8"))
