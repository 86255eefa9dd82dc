"""Every evaluation of a two-way model at chance (`metric-eval-at-chance`, no-grad).

A reward / preference model (a pairwise loss: -log sigmoid(r_chosen - r_rejected)) or a binary classifier
that has learned nothing scores each pair as a coin flip: its evaluation accuracy is 0.5 and its loss
ln 2 = 0.693, whatever the data. A model that learns leaves that point within a few evaluations, even a
weak one (a reward model on a hard preference set reaches 0.6 - 0.7 accuracy, its loss falls below 0.68).
When EVERY one of many evaluations, with training steps between them, stays at both - the accuracy within
ACC_BAND of 0.5 and the loss within LOSS_BAND of ln 2 - the evaluated model ranks the pairs no better than
chance: it never learned the preference (a backbone without the supervised fine-tune the recipe expects, a
reward head that is not trained or not saved, chosen and rejected swapped or identical), even when the
training loss falls (it memorises the training pairs).

The category follows the training loss: flat too (within TRAIN_FALL of its first value), nothing is being
trained at all (no-grad); fallen, the parameters do train and what fails is that nothing carries to held-out
pairs - a wrong starting model or wrong pairs, which no category of the taxonomy names (unknown, as the
verdict's init-world-incomplete reading; the finding still says what was seen and what to check).

Reads the evaluation records the tracker keeps (`MetricTracker.evals`) and the task metrics printed on the same
rows (metric_task.task_series): the accuracy is the evaluation accuracy printed beside the loss (HF Trainer's
`eval_accuracy`, TRL's `eval_rewards/accuracies`, `val_acc`). Conservative: >= MIN_EVALS evaluations with both numbers, all
in their bands, >= MIN_RECORDS training records between the first and the last evaluation with more than one
step; not a series that printed the same evaluation twice only (`metric-eval-loss-frozen` reads identical
values), no error already found. A reward model that starts at 0.693 / 0.5 and improves leaves the bands.
"""
from __future__ import annotations

import math

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metrics import MetricTracker, finite
from llmtriage.detect.metric_task import task_series

MIN_EVALS = 6        # evaluations, all at chance
MIN_RECORDS = 5      # training records between the first and the last of them
ACC_BAND = 0.03      # |accuracy - 0.5| at most this
LOSS_BAND = 0.01     # |loss - ln 2| at most this
LN2 = math.log(2.0)
TRAIN_FALL = 0.1     # the training loss fell by more than this share of its first value: the model trains



def _accuracies(t: MetricTracker) -> dict[int, float]:
    """line -> the evaluation accuracy printed on that evaluation row (metric_task's task series: HF Trainer's
    `eval_accuracy`, TRL's `eval_rewards/accuracies`, `val_acc`); a percentage above 1 is divided by 100."""
    out: dict[int, float] = {}
    for name, series in task_series(t).items():
        if name.split("/")[-1].startswith("acc"):
            for line, v in series:
                out.setdefault(line, v / 100.0 if 1.0 < v <= 100.0 else v)
    return out


def eval_at_chance(t: MetricTracker, found: list[Anomaly]) -> list[Anomaly]:
    if t.sampled or any(a.severity == "error" for a in found) or len(t.evals) < MIN_EVALS:
        return []
    accs_at = _accuracies(t)
    pairs: list[tuple[int, float, float]] = []     # (line, loss, accuracy)
    for line, value in t.evals:
        acc = accs_at.get(line)
        try:
            loss = float(value)
        except ValueError:
            return []
        if acc is None or not finite(loss):
            return []
        pairs.append((line, loss, acc))
    if len({(loss, acc) for _, loss, acc in pairs}) < 2:
        return []       # the same evaluation printed again and again: eval-loss-frozen's reading
    if any(abs(loss - LN2) > LOSS_BAND or abs(acc - 0.5) > ACC_BAND for _, loss, acc in pairs):
        return []
    first, last = pairs[0][0], pairs[-1][0]
    between = [r for r in t.records() if first < r.line < last and finite(r.loss)]
    steps = {r.step for r in between if r.step is not None}
    epochs = {r.epoch for r in between if r.epoch is not None}
    if len(between) < MIN_RECORDS or (len(steps) < 2 and len(epochs) < 2):
        return []
    recs = [r for r in t.records() if finite(r.loss) and r.line < last]
    losses = [p[1] for p in pairs]
    accs = [p[2] for p in pairs]
    trains = bool(recs) and between[-1].loss < (1.0 - TRAIN_FALL) * recs[0].loss  # type: ignore[operator]
    return [Anomaly("eval_chance", "unknown" if trains else "no-grad", "error", first, last, between[-1].step, len(pairs), {
        "evals": len(pairs), "line": first, "to_line": last, "acc_lo": fmt(min(accs)), "acc_hi": fmt(max(accs)),
        "loss_lo": fmt(min(losses)), "loss_hi": fmt(max(losses)), "records": len(between),
        "from_loss": fmt(recs[0].loss) if recs else None, "to_loss": fmt(between[-1].loss)})]
