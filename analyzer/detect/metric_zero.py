"""A loss of exactly 0 that began mid-run: what the gradient says about it.

`metric_detect._flat` reads a loss of exactly 0 on every record as "no label token counted" (no-grad).
When the 0 begins in the middle of a run that had a real loss before it, the gradient norm logged beside
it separates two other stories:

- the gradient stays non-zero: a loss of exactly 0 has no gradient, so the printed 0 is not the loss
  the optimizer saw. The loss is NaN/inf and a logging filter writes it as 0 (the Trainer's
  `logging_nan_inf_filter`, a framework that zeroes a non-finite loss); the run diverged: `nan-loss`.
- the gradient falls to exactly 0 with it, from a loss well above 0 in one logging interval: the model
  did not learn its way to 0 (a collapse goes through small values first); from that step on no label
  token is counted (a loss mask or label pipeline that empties, a cached mask reused, an answer cut
  off by a changed template). The loss is implausible, not the parameters frozen: `loss-suspicious`.

A flat 0 from the first record stays with `_flat` / `_nan_hidden`, and RL losses (0 by design while
the policy equals the reference) are left alone.
"""
from __future__ import annotations

from llmtriage.detect.metric_detect import Anomaly, fmt
from llmtriage.detect.metrics import MetricTracker, finite

MIN_BEFORE = 2          # records with a real loss before the zeros (with a gradient beside the zeros)
MIN_BEFORE_MASKED = 4   # ... before zeros whose gradient is 0 too (the stronger claim needs a curve)
DROP_FROM = 0.1         # the last loss before zeros with zero gradient: a collapse would pass below this


def exact_zero(t: MetricTracker, anomalies: list[Anomaly]) -> None:
    """Replace a flat-loss (or late zero-gradient) anomaly whose records have a loss of exactly 0 and
    began mid-run by `zero_graded` (nan-loss) or `zero_masked` (loss-suspicious), by the gradient norm
    logged beside the zeros."""
    fin = None
    for idx, a in enumerate(anomalies):
        if a.kind not in ("flat", "zero_grad_late") or a.category != "no-grad":
            continue
        fin = fin if fin is not None else [r for r in t.records() if finite(r.loss)]   # once, only when needed
        run = [r for r in fin if a.line <= r.line <= a.last_line]
        before = [r for r in fin if r.line < a.line]
        if not run or any(r.loss != 0 for r in run) or any(r.rl for r in fin) or len(before) < MIN_BEFORE:
            continue
        prev = before[-1]
        grads = [r.grad_norm for r in run if r.grad_norm is not None]
        lrs = [r.lr for r in run if r.lr is not None]
        base = {"at": run[0].at, "records": len(run), "last_loss": fmt(prev.loss), "last_at": prev.at,
                "grad_norm": fmt(grads[-1]) if grads else None}
        if len(grads) == len(run) and all(finite(g) and abs(g) > t.th.zero_grad for g in grads):  # type: ignore[arg-type]
            anomalies[idx] = Anomaly("zero_graded", "nan-loss", "error", a.line, a.last_line, run[0].step, len(run), base)
        elif (grads and all(finite(g) and abs(g) <= t.th.zero_grad for g in grads)  # type: ignore[arg-type]
              and len(before) >= MIN_BEFORE_MASKED and prev.loss >= DROP_FROM  # type: ignore[operator]
              and not (lrs and all(lr == 0 for lr in lrs))):
            anomalies[idx] = Anomaly("zero_masked", "loss-suspicious", "error", a.line, a.last_line, run[0].step,
                                     len(run), base)
