"""Which nvidia-smi / npu-smi snapshots taken during training show every GPU underused, and which long steps
come at a fixed interval (throughput.py).

A snapshot is underused when every GPU in it is at or below `low_util` (30%). Two readings count:
  * four or more snapshots during training, at least `low_share` of them underused (the GPUs starve
    step after step), or none above `low_ceiling` (40%) (a run slow from its first step hovers around
    30-40%: 24%, 31%, 24%, 31% or 34%, 31%, 38%, 29%, 36%; a training step keeps a GPU busy well over half of
    the sample period, so four readings in a row none above 40% are a starved GPU, not noise);
  * one to three snapshots during training, every GPU in them at or below `low_ceiling` (40%), with at least
    `low_min_steps` training records (progress bars, timers) before the first: the user looked at the GPUs
    while the job was training steadily and every GPU sat at or below 40% (31%, 38%). A training step keeps a GPU busy well over
    half of the sample period, so one such reading of a running job is already the evidence a user
    pastes (CPU-bound augmentation, a single data worker, eager MoE expert loops, I/O). A snapshot
    taken before the first step is warm-up (model loading, tokenisation) and never counts, and a
    snapshot in which any GPU is busy (> low_ceiling) is no evidence: some ranks are working.
Idle snapshots (<= idle_util on most GPUs) are judged by throughput.py before this.
"""
from __future__ import annotations

from bisect import bisect_left
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import median as _median
from llmtriage.detect.metrics import Thresholds

Snap = list[tuple[int, Optional[int], Optional[int], int]]    # [(util, used, total, line)]
LOW_MIN_STEPS = 3      # training records before a lone snapshot for it to count


def underused(snaps: list[Snap], th: Thresholds, steps_before: int = 0) -> list[Snap]:
    """The underused snapshots that make the finding, or [] when they do not."""
    low = [s for s in snaps if all(r[0] <= th.low_util for r in s)]
    if len(snaps) >= 4:
        if len(low) >= th.low_share * len(snaps):
            return low
        # a run slow from its first step (inefficient kernels, 8-bit or 4-bit matmuls): readings hover around
        # low_util, some above it, but none is busy
        peaks = [max(r[0] for r in s) for s in snaps]
        return snaps if max(peaks) <= th.low_ceiling else []
    # a lone reading or a few: every GPU at or below low_ceiling (a steady training step keeps a GPU busy well over
    # half of the sample period; 31% or 38% on the only snapshot a user pasted is the same starved GPU as 30%), the
    # last one taken after `steps_before` training records (past the warm-up)
    if snaps and all(r[0] <= th.low_ceiling for s in snaps for r in s) and steps_before >= LOW_MIN_STEPS:
        return snaps
    return []


def util_bound(low: list[Snap], th: Thresholds) -> float:
    """The utilisation every GPU of the underused snapshots stays at or below: low_util, else low_ceiling."""
    return th.low_util if all(r[0] <= th.low_util for s in low for r in s) else th.low_ceiling


def search_unprefixed(pattern: Any, seg: bytes) -> Any:
    """pattern.search on a line, then on the line without a launcher's or logger's prefix ([rank3]:, a host, a time)."""
    from llmtriage.engine.logparse import split_prefix   # deferred: only for rows the plain search missed
    return pattern.search(seg) or pattern.search(split_prefix(seg.decode("utf-8", "replace")).text.encode("utf-8"))


def new_snapshot(m: Any, csv_src: bytes, mon_src: bytes, prev_stamp: Optional[bytes]) -> bool:
    """Whether a utilisation row starts a new snapshot: GPU 0 again (`--query-gpu=index,...`, a monitor line),
    or a `--query-gpu=timestamp,...` row whose time (to the second) differs from the row before it (one GPU
    sampled with `-l N` prints one row per sample)."""
    if m.re.pattern == csv_src:
        stamp = m.group(1)
        return m.group(2) == b"0" or (stamp is not None and prev_stamp is not None and stamp[:19] != prev_stamp[:19])
    return m.re.pattern == mon_src and m.group(1) == b"0"


def periodic(vals: list[tuple[int, float]], saves_seen: list[int], th: Thresholds) -> Optional[tuple[int, float, float]]:
    """(period, long step, median) when steps > periodic_factor x the median come at a fixed interval;
    a step logged within a few lines after a checkpoint save is slow by design and does not count."""
    xs = [v for _, v in vals]
    if len(xs) < 4 * th.periodic_min:
        return None
    med = _median(xs)
    saves = sorted(saves_seen)

    def after_save(ln: int) -> bool:       # a save at most 4 lines before `ln`
        i = bisect_left(saves, ln - 4)
        return i < len(saves) and saves[i] <= ln

    long = [i for i, (ln, x) in enumerate(vals) if x > th.periodic_factor * med and not after_save(ln)]
    lead = next((k for k, i in enumerate(long) if i != k), len(long))     # warm-up / compile steps first
    if lead >= 2:
        long, xs = [i - lead for i in long[lead:]], xs[lead:]
    if len(long) < th.periodic_min or len(long) * 3 > len(xs):
        return None
    gaps = [b - a for a, b in zip(long, long[1:])]
    if max(gaps) - min(gaps) > 1 or min(gaps) < 2:
        return None
    return round(sum(gaps) / len(gaps)), _median([xs[i] for i in long]), med
