"""metric-grad-norm-climbing: the gradient norm climbs far above its level and the loss climbs with it.

A gradient explosion does not always reach NaN inside the log. In bf16 (no loss scaler to overflow) and with
gradient clipping the run goes on: the logged grad_norm grows record after record, tens or hundreds of
times its level when the loss was lowest, and the loss leaves its minimum and ends at twice it or more.
The step-by-step divergence detector (`metric_detect._diverge`) wants the loss to double within its last
few records and the jump detector wants one spike; a slow climb over hundreds of steps meets neither.

Healthy look-alikes this leaves alone: a grad_norm that grows while the loss keeps falling (the norm of a
well-trained model rises late in pre-training), a loss that rises without the gradient norm (a new data
mixture, an epoch boundary, curriculum), RL records (their loss moves by design), and runs whose records
were sampled.
"""
from __future__ import annotations

from typing import Optional

from llmtriage.detect.metric_detect import Anomaly, fmt
from llmtriage.detect.metrics import MetricTracker, finite

# the loss over the last quarter of the records after its minimum: at least this x the minimum ...
LOSS_FACTOR = 2.0
# ... and the gradient norm over the same records at least this x its level around the minimum
GRAD_FACTOR = 10.0


def _median(xs: list[float]) -> Optional[float]:
    s = sorted(xs)
    n = len(s)
    if not n:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def grad_climb(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when, after the loss reached its minimum, at least `diverge_records` records followed
    whose last quarter has a median loss >= LOSS_FACTOR x (and >= spike_abs above) the minimum and a median
    grad_norm >= GRAD_FACTOR x the grad_norm around the minimum; nothing when another detector already
    names an error."""
    if t.sampled or any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if finite(r.loss)]
    if len(recs) < 2 * th.diverge_records or any(r.rl for r in recs):
        return []
    i = min(range(len(recs)), key=lambda j: recs[j].loss)  # type: ignore[arg-type,return-value]
    low, after = recs[i], recs[i:]
    if len(after) < th.diverge_records or low.loss <= 0:  # type: ignore[operator]
        return []
    k = max(3, len(after) // 4)
    tail = after[-k:]
    level = _median([r.loss for r in tail])  # type: ignore[misc]
    if level is None or level < LOSS_FACTOR * low.loss or level - low.loss < th.spike_abs:  # type: ignore[operator]
        return []
    around = recs[max(0, i - k):i + k]
    g0 = _median([r.grad_norm for r in around if r.grad_norm is not None and finite(r.grad_norm)])
    g1 = _median([r.grad_norm for r in tail if r.grad_norm is not None and finite(r.grad_norm)])
    if g0 is None or g1 is None or g0 <= 0 or g1 < GRAD_FACTOR * g0:
        return []
    last = after[-1]
    return [Anomaly("grad_climb", "nan-loss", "error", low.line, last.line, low.step, len(after), {
        "low": fmt(low.loss), "low_at": low.at, "loss": fmt(level), "at": last.at, "records": len(after),
        "grad_from": fmt(g0), "grad_to": fmt(g1), "grad_factor": round(g1 / g0), "factor": round(level / low.loss, 1)})]  # type: ignore[operator]



# metric-grad-norm-runaway: the gradient norm grows by orders of magnitude and is still growing at the end,
# whatever the loss does. RL losses (pg_loss) move by design and hide nothing, and under clipping a supervised
# loss can stay put for a while, so `grad_climb` (which wants the loss to climb too) stays silent; a norm a
# thousand times its early level that still rose tenfold over the last quarter is no healthy run's. A norm
# that spiked and settled (the last quarter's median is low again), or one that is large from the start and
# stays large (no growth against the first quarter), is left alone.
RUNAWAY_MIN_RECORDS = 12
# the last quarter's median norm: at least this x the first quarter's ...
RUNAWAY_FACTOR = 1000.0
# ... at least this x the quarter before it (still climbing, not a level it settled at) ...
RUNAWAY_STILL = 10.0
# ... and at least this large in absolute terms (a tiny early norm growing to an ordinary one is not it)
RUNAWAY_MIN = 1000.0


def grad_runaway(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when, over >= RUNAWAY_MIN_RECORDS records with a finite grad_norm, the median norm of the
    last quarter is >= RUNAWAY_FACTOR x that of the first quarter, >= RUNAWAY_STILL x that of the quarter
    before it and >= RUNAWAY_MIN, and the last norm is not below that median; for RL records too; nothing
    when another detector already names an error or the records were sampled."""
    if t.sampled or any(a.severity == "error" for a in found):
        return []
    recs = [r for r in t.records() if r.grad_norm is not None and finite(r.grad_norm)]
    n = len(recs)
    if n < RUNAWAY_MIN_RECORDS:
        return []
    k = max(3, n // 4)
    g0 = _median([abs(r.grad_norm) for r in recs[:k]])  # type: ignore[arg-type]
    g_prev = _median([abs(r.grad_norm) for r in recs[-2 * k:-k]])  # type: ignore[arg-type]
    g1 = _median([abs(r.grad_norm) for r in recs[-k:]])  # type: ignore[arg-type]
    if g0 is None or g_prev is None or g1 is None or g0 <= 0 or g_prev <= 0:
        return []
    last = recs[-1]
    if g1 < RUNAWAY_MIN or g1 < RUNAWAY_FACTOR * g0 or g1 < RUNAWAY_STILL * g_prev or abs(last.grad_norm) < g1:  # type: ignore[arg-type]
        return []
    first = recs[0]
    return [Anomaly("grad_runaway", "nan-loss", "error", first.line, last.line, first.step, n, {
        "grad_from": fmt(g0), "first_at": first.at, "grad_prev": fmt(g_prev), "grad_to": fmt(g1),
        "grad_last": fmt(last.grad_norm), "at": last.at, "records": n, "quarter": k,
        "grad_factor": fmt(g1 / g0)})]

# metric-loss-jumped-after-first-update: the first records hold the loss the loaded weights give; the
# jump must come within this many records after the first one ...
FIRST_JUMP_WITHIN = 3
# ... and every later record stays at least this x the first loss (it never came back near it)
FIRST_STAY = 2.0


def _first_step_averaged(recs: list) -> bool:
    """The first record is the loss of step 1 divided by the logging interval (transformers < 3.5 with
    `--logging_first_step` averaged it over `logging_steps`): the second record lies >= 50 steps on (by step,
    or by epoch when the first is one step in) and the first loss times that many steps is the second's level
    or up to 3x above it (the loss at step 1 is the run's highest)."""
    a, b = recs[0], recs[1]
    if a.step is not None and b.step is not None and a.step <= 1:
        n = float(b.step)
    elif a.epoch and b.epoch and a.step is None:
        n = b.epoch / a.epoch
    else:
        return False
    return n >= 50 and 0.7 * b.loss <= a.loss * n <= 3.0 * b.loss


def first_update_jump(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    """The loss a loaded model starts at, then wrecked by the first optimizer steps: within
    FIRST_JUMP_WITHIN records of the first one the loss rises >= spike_factor x (and >= spike_abs above)
    the first loss, and none of the >= flat_min_records records from there comes back below FIRST_STAY x
    it. The rolling-median spike and jump detectors need a history of records before the jump, so a run
    that breaks on its first update has none. A pretrained model's loss does not triple after one update
    at a sane learning rate; a from-scratch run starts at its highest loss. Nothing when another detector
    already names an error, for RL records (their loss moves by design) or sampled records."""
    if t.sampled or any(a.severity == "error" for a in found):
        return []
    th = t.th
    recs = [r for r in t.records() if finite(r.loss)]
    if len(recs) < th.flat_min_records + 1 or any(r.rl for r in recs):
        return []
    base = recs[0].loss
    if base is None or base <= 0 or _first_step_averaged(recs):
        return []
    j = next((i for i in range(1, FIRST_JUMP_WITHIN + 1)
              if recs[i].loss >= th.spike_factor * base and recs[i].loss - base >= th.spike_abs), None)  # type: ignore[operator]
    if j is None or any(r.loss > 1.5 * base for r in recs[1:j]):  # type: ignore[operator]
        return []
    after = recs[j:]
    low = min(r.loss for r in after)  # type: ignore[type-var]
    if len(after) < th.flat_min_records or low < FIRST_STAY * base or low - base < th.spike_abs:  # type: ignore[operator]
        return []
    tail = sorted(r.loss for r in after[len(after) // 2:])  # type: ignore[type-var]
    level = tail[len(tail) // 2]
    r0, last = recs[j], after[-1]
    return [Anomaly("first_jump", "nan-loss", "error", r0.line, last.line, r0.step, len(after), {
        "first": fmt(base), "first_at": recs[0].at, "loss": fmt(r0.loss), "at": r0.at, "level": fmt(level),
        "low": fmt(low), "factor": round(level / base, 1), "records": len(after), "to": last.at})]  # type: ignore[operator]
