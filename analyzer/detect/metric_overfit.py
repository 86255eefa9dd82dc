"""Evaluation loss climbing for many evaluations while the training loss keeps falling, over several epochs
(`metric-eval-loss-rising-overfit`).

`metric_memorise` reads memorisation from the training loss alone (under 0.01 after 20+ epochs). A run that
evaluates says it earlier and more plainly: after its best evaluation the held-out loss rises at every later
evaluation, to EVAL_RISE times its best or more, while the training loss falls to TRAIN_FALL of what it was at
that best evaluation or less. Every checkpoint after the best one generalises worse than it: the job finishes
"successfully" and saves the over-fitted model, unless it keeps the best checkpoint (load_best_model_at_end).

Conservative, since a fine-tune whose eval loss creeps up in its last epoch is common and healthy enough:
>= RISE_EVALS evaluations after the best one, each at least the one before it (within EVAL_NOISE), the last
>= EVAL_RISE x the best and above the first evaluation too; the training record before the last evaluation at
epoch >= MIN_EPOCHS; a language model's first loss (>= fall_from); not RL, not a sampled series, no
non-finite value, and no error already found.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metric_gap import eval_pairs
from llmtriage.detect.metrics import MetricTracker, finite

RISE_EVALS = 3      # evaluations after the best one, each no lower than the one before
EVAL_RISE = 1.5     # the last evaluation loss at least this x the best
EVAL_NOISE = 0.02   # a later evaluation may dip this share under the one before and still count as rising
TRAIN_FALL = 0.5    # the training loss at the last evaluation at most this x its value at the best one
MIN_EPOCHS = 3.0    # the run is past this many epochs at the last evaluation (several passes over the data)


def eval_rising(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    if (t.sampled or t.first_nonfinite is not None or len(t.evals) < RISE_EVALS + 1
            or any(a.severity == "error" for a in found)):
        return []
    recs = [r for r in t.records() if finite(r.loss)]
    if not recs or any(r.rl for r in recs) or recs[0].loss < t.th.fall_from:  # type: ignore[operator]
        return []
    # (training record before the evaluation, evaluation loss, line)
    pairs = [(rec, ev, line) for rec, ev, line in eval_pairs(t, recs) if rec is not None and finite(ev)]
    if len(pairs) < RISE_EVALS + 1:
        return []
    best = min(range(len(pairs)), key=lambda i: pairs[i][1])
    after = pairs[best:]
    if len(after) < RISE_EVALS + 1 or any(b[1] < a[1] * (1 - EVAL_NOISE) for a, b in zip(after, after[1:])):
        return []
    (rec0, ev0, line0), (rec1, ev1, line1) = after[0], after[-1]
    if ev1 < EVAL_RISE * ev0 or ev1 <= pairs[0][1] or rec1.epoch is None or rec1.epoch < MIN_EPOCHS:
        return []
    if rec1.loss > TRAIN_FALL * rec0.loss:  # type: ignore[operator]
        return []
    return [Anomaly("overfit_eval", "loss-suspicious", "error", line0, line1, rec1.step, len(after), {
        "best": fmt(ev0), "best_line": line0, "eval": fmt(ev1), "evals": len(after) - 1,
        "train_then": fmt(rec0.loss), "train_now": fmt(rec1.loss), "at": rec1.at, "epoch": fmt(rec1.epoch),
        "factor": round(ev1 / ev0, 1)})]
