"""A learning rate too small to train anything, though never exactly 0 (`metric_lr.lr_dead` reads exact 0).

Two shapes, both `no-grad` (the optimizer steps, the weights barely move, the loss stays where it was):

- `lr_floor`: the schedule decayed to a tiny floor long before the run ended. A cosine/linear decay built
  for fewer steps than the run takes, with a minimum (mlx-lm `cosine_decay [init, decay_steps, end]`,
  `min_lr`, `eta_min`), stops at the floor instead of 0: after a peak, the last >= `zero_tail_records`
  records (and a third of those that log a learning rate) all print the same value, <= FLOOR_SHARE of the
  peak and <= FLOOR_ABS, and the loss over that tail does not improve.
- `lr_tiny`: the configured learning rate itself is far too small: the whole schedule, warm-up and the
  decay after its peak, stays below TINY_ABS (an `e-8` where `e-5` was meant). The peak must lie >=
  AFTER_PEAK records before the end (the decay has begun, so the peak is the configured value and not a
  long warm-up seen early), and the loss must not improve.

Healthy look-alikes left alone: a schedule that reaches its floor on the last records (the planned end), a
floor that is a real learning rate (>= FLOOR_SHARE of the peak, as min_lr = 0.1 x lr), a long warm-up still
rising, and a loss that keeps falling at a small learning rate.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.metric_parse import Bound
from llmtriage.detect.metrics import MetricTracker, Record, finite

FLOOR_SHARE = 0.02   # a floor at most this share of the peak ...
FLOOR_ABS = 1e-6     # ... and at most this absolute value trains nothing measurable
TAIL_SHARE = 1 / 3   # the floor covers at least this share of the records that log a learning rate
TINY_ABS = 1e-7      # a whole schedule below this never trains
AFTER_PEAK = 4       # records after the peak of a tiny schedule (its decay has begun)
NO_GAIN = 0.97       # the loss's last third median stays above this x its first third's
FLOOR_GAIN = 0.9     # ... over a floor tail (the tiny lr is the evidence there; a few % of drift is noise)


def _no_gain(recs: list[Record], minimum: int, gain: float = NO_GAIN) -> tuple[bool, float]:
    losses = [r.loss for r in recs if finite(r.loss)]
    if len(losses) < minimum:
        return False, 0.0
    k = max(2, len(losses) // 3)
    first, last = _median(losses[:k]), _median(losses[-k:])     # type: ignore[arg-type]
    return last >= gain * first, _median(losses)             # type: ignore[arg-type]


def lr_tiny(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """`lr_floor` or `lr_tiny` (module doc); nothing when another detector already names an error."""
    if any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if r.lr is not None and finite(r.lr) and not r.rl]
    if len(recs) < 2 * th.zero_tail_records or any(r.lr <= 0 for r in recs):   # type: ignore[operator]
        return []       # lr 0 somewhere: metric_lr / lr_zero read it
    lrs = [r.lr for r in recs]
    peak_i = max(range(len(lrs)), key=lambda i: lrs[i])          # type: ignore[arg-type]
    peak = lrs[peak_i]
    floor = lrs[-1]
    run = 0
    while run < len(recs) and lrs[-1 - run] == floor:
        run += 1
    if (floor <= min(FLOOR_SHARE * peak, FLOOR_ABS) and run >= th.zero_tail_records   # type: ignore[operator]
            and run >= TAIL_SHARE * len(recs) and run < len(recs)):
        tail = recs[-run:]
        flat, loss = _no_gain(tail, th.zero_tail_records, FLOOR_GAIN)
        if not flat:
            return []
        z, p = tail[0], recs[peak_i]
        return [Anomaly("lr_floor", "no-grad", "error", z.line, tail[-1].line, z.step, run, {
            "records": run, "total": len(recs), "from": z.at, "to": tail[-1].at,
            "lr": f"< {fmt(floor)}" if isinstance(floor, Bound) else fmt(floor),
            "before": fmt(peak), "before_at": p.at, "loss": fmt(loss)})]
    if peak < TINY_ABS and len(recs) - 1 - peak_i >= AFTER_PEAK:   # type: ignore[operator]
        flat, loss = _no_gain(recs, th.zero_tail_records)
        if not flat:
            return []
        p = recs[peak_i]
        return [Anomaly("lr_tiny", "no-grad", "error", recs[0].line, recs[-1].line, recs[0].step, len(recs), {
            "records": len(recs), "from": recs[0].at, "to": recs[-1].at, "lr": fmt(peak), "before_at": p.at,
            "loss": fmt(loss)})]
    return []
