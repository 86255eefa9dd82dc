"""metric-loss-creeping-up: after its minimum the loss climbs back slowly and steadily, window after window.

A run that diverges slowly (bf16 rounding in a long pre-training run, a learning rate a little too high after
warm-up, a broken kernel) never prints NaN and never jumps: it reaches its lowest loss, then every stretch of
records is worse than the one before, until the loss is back at twice its minimum or more. The step-by-step
divergence detector (`metric_detect._diverge`) wants the loss to double within its last few records, the jump
detector one spike, and `metric_drift.grad_climb` a gradient norm that climbs with it; a log that prints no
gradient norm (nanoGPT, many hand-written loops) and climbs over thousands of steps meets none of them.

The records after the minimum are cut into `WINDOWS` equal windows; the median of each must be above the one
before it (a step up at an epoch boundary, a new data mixture or a curriculum stage rises once and stays: it is
not a climb in every window), and the last window's median at least `LOSS_FACTOR` x the minimum and `spike_abs`
above it. Left alone: logs that print a gradient norm (a loss rising without it is a data change; with it,
`grad_climb` answers), RL records (their loss moves by design), sampled records, and runs another detector
already names.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.metrics import MetricTracker, finite

WINDOWS = 5
LOSS_FACTOR = 2.0


def loss_creep(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when the loss climbs back from its minimum in every one of WINDOWS windows of the records
    after it (at least 3 x diverge_records of them) to >= LOSS_FACTOR x the minimum; nothing otherwise."""
    if t.sampled or any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if finite(r.loss)]
    if any(r.rl or r.grad_norm is not None for r in recs):
        return []
    if len(recs) < 4 * th.diverge_records:
        return []
    rise = _rising_after_low(recs, th.diverge_records, 3 * th.diverge_records, WINDOWS)
    if rise is None:
        return []
    low, after, meds = rise
    level = meds[-1]
    if level < LOSS_FACTOR * low.loss or level - low.loss < th.spike_abs:  # type: ignore[operator]
        return []
    last = after[-1]
    return [Anomaly("creep", "nan-loss", "error", low.line, last.line, low.step, len(after), {
        "low": fmt(low.loss), "low_at": low.at, "loss": fmt(level), "at": last.at, "records": len(after),
        "windows": WINDOWS, "factor": round(level / low.loss, 1)})]  # type: ignore[operator]


GRADED_WINDOWS = 6      # a run that logs a gradient norm: more windows, every one higher than the one before ...
GRADED_FACTOR = 1.25    # ... to this x the minimum, inside the first epoch


def graded_creep(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """A fine-tune's loss that climbs back from its minimum (reached after warm-up) in every one of GRADED_WINDOWS
    windows to >= GRADED_FACTOR x the minimum, while a gradient norm is logged and every record after the minimum
    is inside the first epoch. Inside the first epoch each batch is new, so the training loss measures the model on
    unseen data: climbing window after window, the updates are making it worse (a precision or kernel path that
    corrupts the forward, weights loaded in a dtype the optimizer cannot update well, a learning rate too high)."""
    if t.sampled or any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if finite(r.loss)]
    if len(recs) < 4 * th.diverge_records or any(r.rl for r in recs):
        return []
    if sum(r.grad_norm is not None for r in recs) < 0.9 * len(recs):
        return []
    i = min(range(len(recs)), key=lambda j: recs[j].loss)  # type: ignore[arg-type,return-value]
    low, after = recs[i], recs[i:]
    if len(after) < 3 * th.diverge_records or low.loss <= 0 or i < th.diverge_records:  # type: ignore[operator]
        return []
    if any(r.epoch is None or r.epoch >= 1.0 for r in after):
        return []
    size = len(after) // GRADED_WINDOWS
    meds = [_median([r.loss for r in after[k * size:(k + 1) * size]]) for k in range(GRADED_WINDOWS)]  # type: ignore[misc]
    meds[-1] = _median([r.loss for r in after[(GRADED_WINDOWS - 1) * size:]])  # type: ignore[misc]
    if any(b <= a for a, b in zip(meds, meds[1:])):
        return []
    level = meds[-1]
    if level < GRADED_FACTOR * low.loss:  # type: ignore[operator]
        return []
    last = after[-1]
    return [Anomaly("creep_graded", "nan-loss", "error", low.line, last.line, low.step, len(after), {
        "low": fmt(low.loss), "low_at": low.at, "loss": fmt(level), "at": last.at, "records": len(after),
        "windows": GRADED_WINDOWS, "factor": round(level / low.loss, 2)})]  # type: ignore[operator]


PASS_WINDOWS = 5        # a run that logs a gradient norm but no epoch (an iteration-counted pre-training loop): windows ...
PASS_FACTOR = 1.2       # ... to at least this x the minimum, and either twice it or ...
PASS_GIVEBACK = 0.5     # ... this share of the fall from the start level back


def pass_creep(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """An iteration-counted run (a gradient norm on >= 90% of the records, no epoch on any: Megatron, nanoGPT-style
    pre-training loops, which read each sample once) whose loss, after falling to its minimum past the first
    diverge_records records, rises in every one of PASS_WINDOWS windows of the >= 2 x diverge_records records after it,
    to a last-window median >= PASS_FACTOR x the minimum and either >= LOSS_FACTOR x it or back by >= PASS_GIVEBACK of
    the fall from the start level (the median of the first records). On data the model has not seen, a loss that rises
    window after window is a model getting worse: a slow divergence (a fused loss kernel's wrong gradient, a learning
    rate too high once warm-up ends). `graded_creep` reads the runs that print their epoch."""
    if t.sampled or any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if finite(r.loss)]
    if len(recs) < 3 * th.diverge_records or any(r.rl or r.epoch is not None for r in recs):
        return []
    if sum(r.grad_norm is not None for r in recs) < 0.9 * len(recs):
        return []
    rise = _rising_after_low(recs, th.diverge_records, 2 * th.diverge_records, PASS_WINDOWS)
    if rise is None:
        return []
    low, after, meds = rise
    level, start = meds[-1], _median([r.loss for r in recs[:th.diverge_records // 2]])  # type: ignore[misc]
    if level < PASS_FACTOR * low.loss:  # type: ignore[operator]
        return []
    if level < LOSS_FACTOR * low.loss and (start <= low.loss or level - low.loss < PASS_GIVEBACK * (start - low.loss)):  # type: ignore[operator]
        return []
    last = after[-1]
    share = round(100 * (level - low.loss) / (start - low.loss)) if start > low.loss else None  # type: ignore[operator]
    return [Anomaly("creep_pass", "nan-loss", "error", low.line, last.line, low.step, len(after), {
        "low": fmt(low.loss), "low_at": low.at, "loss": fmt(level), "at": last.at, "records": len(after),
        "windows": PASS_WINDOWS, "factor": round(level / low.loss, 2), "start": fmt(start),  # type: ignore[operator]
        "share": share if share is not None and share <= 1000 else None})]


def _rising_after_low(recs: list, before: int, after_min: int, windows: int) -> tuple | None:
    """(lowest record, the records from it on, the medians of `windows` equal slices of those) when the lowest loss
    comes after `before` records, at least `after_min` records follow it, and every slice's median is above the last;
    else None."""
    i = min(range(len(recs)), key=lambda j: recs[j].loss)
    low, after = recs[i], recs[i:]
    if len(after) < after_min or low.loss <= 0 or i < before:
        return None
    size = len(after) // windows
    meds = [_median([r.loss for r in after[k * size:(k + 1) * size]]) for k in range(windows)]
    meds[-1] = _median([r.loss for r in after[(windows - 1) * size:]])
    if any(b <= a for a, b in zip(meds, meds[1:])):
        return None
    return low, after, meds
