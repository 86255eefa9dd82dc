"""throughput-low from nvidia-smi snapshots in which a multi-GPU job's GPUs are mostly waiting.

`throughput_util.underused` calls a snapshot underused when every GPU is at or below `low_util` (30%), and
throughput.py calls it idle when most GPUs are at 0-15%. A job whose GPUs split between some at 0% and the rest a
little above 30% fits neither, yet its GPUs wait most of the time: an RL job whose rollout engines get no requests
while the others decode slowly (slime / verl colocated rollouts with one straggling sample), a pipeline whose
stages wait on each other, an input pipeline feeding some ranks late. Such a snapshot is "starved" here:

  * two or more GPUs, the mean utilisation at or below MEAN_UTIL (20%), no GPU above MAX_UTIL (50%), and at least
    one GPU at or below `idle_util` (15%);
  * taken while the job trains: at least MIN_RECORDS training records (loss lines) before it, and before the run
    reported it finished (a snapshot during model loading, compilation or after the end is not evidence);
  * one to three such snapshots, all starved, or four or more with at least `low_share` of them starved.

A training step keeps the GPUs busy well over half of the sample period, and a decoding engine with requests keeps
its GPU busy too, so a job that averages 20% or less has most of its GPU time waiting. A snapshot in which any GPU is
busy (above MAX_UTIL) is left alone: some ranks are working at full speed and the sample may have caught a gap.
The finding joins the run's throughput anomaly (made an error) or is a new one.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly

MEAN_UTIL = 20.0
MAX_UTIL = 50.0
MIN_RECORDS = 3

Snap = list[tuple[int, Optional[int], Optional[int], int]]    # [(util, used, total, line)]


def _starved(s: Snap, idle_util: float) -> bool:
    utils = [r[0] for r in s]
    return (len(utils) >= 2 and max(utils) <= MAX_UTIL and sum(utils) <= MEAN_UTIL * len(utils)
            and min(utils) <= idle_util)


def starved_gpus(tracker: Any, recs: list[Any], found: list[Anomaly]) -> list[Anomaly]:
    """The throughput-low anomaly (new, or the run's warning made an error) when the snapshots taken during
    training show the GPUs starved (module docstring); [] otherwise (the change to `found` is in place)."""
    if any(a.category == "throughput-low" and a.severity == "error" for a in found):
        return []
    th, finished = tracker.th, tracker.finished_line
    lines = sorted(r.line for r in recs)
    during = [s for s in tracker.snaps if s and not (finished and s[0][3] > finished)
              and sum(1 for ln in lines if ln < s[0][3]) >= MIN_RECORDS]
    low = [s for s in during if _starved(s, th.idle_util)]
    if not low or (len(during) >= 4 and len(low) < th.low_share * len(during)) or (len(during) < 4 and len(low) < len(during)):
        return []
    worst = min(low, key=lambda s: sum(r[0] for r in s))
    nums = {"starved": len(low), "snaps": len(during), "mean_util": f"{sum(r[0] for r in worst) / len(worst):.0f}",
            "max_util": f"{MAX_UTIL:g}", "zero_gpus": f"{sum(1 for r in worst if r[0] <= th.idle_util)}/{len(worst)}"}
    if tracker.gen or any(r.rl for r in recs):
        nums["rollout"] = True      # an RL job: the waiting GPUs wait for rollout generation
    line, last = low[0][0][3], low[-1][-1][3]
    for a in found:
        if a.kind == "throughput":
            a.numbers.update(nums)
            a.severity, a.line, a.last_line = "error", min(a.line, line), max(a.last_line, last)
            return []
    return [Anomaly("throughput", "throughput-low", "error", line, last, None, 1, nums)]
