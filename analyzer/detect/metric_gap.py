"""Training loss far below the evaluation loss inside the first epoch (`metric-train-loss-far-below-eval`).

Inside the first epoch every training batch is one the model has not trained on, so its training loss is a
held-out measurement too: on data from the same distribution it stays near the evaluation loss (a little
below it, from dropout off and the batch being scored after the update). When the training loss falls to a
third of the evaluation loss or less while the evaluation loss stays where it was, the number the trainer
prints is not the loss the evaluation computes: samples packed so they see each other (packing without
per-sample attention boundaries, a flash-attention varlen path handed the wrong cu_seqlens), duplicated
samples, or a loss averaged over other tokens than the evaluation's. `metric_leak` reads the extreme case
(below 0.01); this reads a gap that is large but not absurd.

Conservative: >= GAP_EVALS evaluations, each with a training record before it, every one of those records
at epoch < 1; at each, the training loss <= eval / GAP_FACTOR and >= spike_abs below it; the evaluation loss
does not fall by more than EVAL_FLAT over them while the training loss (from a first loss >= fall_from)
fell; not RL, no non-finite value, no error already found.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metric_parse import Record
from llmtriage.detect.metrics import MetricTracker, finite

GAP_EVALS = 3       # evaluations inside the first epoch with the gap
GAP_FACTOR = 3.0    # training loss at most eval / this
EVAL_FLAT = 0.9     # the last evaluation loss >= this x the first: the evaluation did not follow the fall


def eval_pairs(t: MetricTracker, recs: list[Record]) -> list[tuple[Optional[Record], float, int]]:
    """(the last training record before it (or on its line: a notebook table's row) or None, evaluation loss,
    line) for each evaluation loss of `t`; `recs` in log order (shared with metric_overfit)."""
    lines = [r.line for r in recs]
    out = []
    for line, value in t.evals:
        k = bisect_right(lines, line)
        out.append((recs[k - 1] if k else None, float(value), line))
    return out


def train_eval_gap(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    if t.sampled or t.first_nonfinite is not None or len(t.evals) < GAP_EVALS or any(a.severity == "error" for a in found):
        return []
    recs = [r for r in t.records() if finite(r.loss)]
    if not recs or any(r.rl for r in recs) or recs[0].loss < t.th.fall_from:  # type: ignore[operator]
        return []
    pairs = eval_pairs(t, recs)
    if any(rec is None for rec, _, _ in pairs):
        return []
    pairs = pairs[-GAP_EVALS:]
    for rec, ev, _ in pairs:
        if (rec.epoch is None or rec.epoch >= 1 or rec.loss > ev / GAP_FACTOR  # type: ignore[operator]
                or ev - rec.loss < t.th.spike_abs):  # type: ignore[operator]
            return []
    if any(r.epoch is None or r.epoch >= 1 for r in recs if r.line < pairs[-1][2]):
        return []
    first_ev, last_ev = pairs[0][1], pairs[-1][1]
    if last_ev < EVAL_FLAT * first_ev or pairs[-1][0].loss >= recs[0].loss:  # type: ignore[operator]
        return []
    rec, ev, line = pairs[-1]
    return [Anomaly("eval_gap", "loss-suspicious", "error", pairs[0][2], line, rec.step, len(pairs), {
        "loss": fmt(rec.loss), "at": rec.at, "epoch": fmt(rec.epoch), "eval": fmt(ev), "first_eval": fmt(first_ev),
        "from_loss": fmt(recs[0].loss), "factor": round(ev / rec.loss, 1) if rec.loss else None,  # type: ignore[operator]
        "evals": len(pairs)})]
