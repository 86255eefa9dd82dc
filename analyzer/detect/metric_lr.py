"""metric-lr-zero-early: the learning-rate schedule reached 0 long before the run stopped.

A scheduler built for fewer steps than the run takes (``num_training_steps`` from a wrong formula, a
per-epoch step count used for several epochs, a ``max_steps`` the schedule never saw) decays the
learning rate to 0 and then keeps it there: every later step spends compute and changes nothing. The
logs show it only in numbers: the learning rate, after being positive, is exactly 0 on a long run of
the last records while the loss stops improving.

Healthy look-alikes this leaves alone: a schedule that ends at 0 on its last record or two (linear or
cosine decay reaching the end of training), a learning rate printed with too few decimals ("0.000000"
for 1e-7 is read as below the display's precision, not 0, by `metric_parse`), a warm-up that starts
at 0, and a loss still falling while the learning rate reads 0.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.metrics import MetricTracker, finite

# the zero-learning-rate tail must cover at least this share of the records that log a learning rate
TAIL_SHARE = 1 / 3
# ... and the loss over it must not improve: the median of its last third stays above this x its first third's
NO_GAIN = 0.97



def lr_dead(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when the learning rate decayed to exactly 0 and stayed there for a long tail of the
    logged records (at least `zero_tail_records`, and a third of them) with the loss no longer improving;
    nothing when another detector already names an error (NaN, zero gradients, lr 0 throughout)."""
    if any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if r.lr is not None and not r.rl]
    if len(recs) < 2 * th.zero_tail_records:
        return []
    run = 0
    while run < len(recs) and recs[-1 - run].lr == 0:
        run += 1
    if run < th.zero_tail_records or run == len(recs) or run < TAIL_SHARE * len(recs):
        return []
    before = recs[:-run]
    if not any(r.lr and r.lr > 0 for r in before):
        return []
    tail = recs[-run:]
    losses = [r.loss for r in tail if finite(r.loss)]
    if len(losses) < th.zero_tail_records:
        return []
    k = max(2, len(losses) // 3)
    first, last = _median(losses[:k]), _median(losses[-k:])     # type: ignore[arg-type]
    if last < NO_GAIN * first:
        return []       # still improving: not a dead schedule (or the lr is only printed rounded)
    z, peak = tail[0], max(before, key=lambda r: r.lr or 0.0)
    return [Anomaly("lr_dead", "no-grad", "error", z.line, tail[-1].line, z.step, run, {
        "records": run, "total": len(recs), "from": z.at, "to": tail[-1].at, "before": fmt(peak.lr),
        "before_at": peak.at, "loss": fmt(_median(losses))})]

