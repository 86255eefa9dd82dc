"""A language model's loss driven to ~0 by many epochs over the same small dataset (`metric-tiny-data-memorised`).

The issue's open question (the happy-llm seed's "loss 三分钟掉到 0.1 以下"): when is a loss that falls to ~0 on a
tiny dataset an error rather than a curiosity? Decision: when the loss of a language model (first loss >=
fall_from) ends below fall_strong (0.01 nats per token) and the record where it first got there is at epoch >=
memorise_epochs (20): every sample has then been seen at least twenty times and the model reproduces its
training answers token for token. That is the job going wrong, not a good curve:
- supervised fine-tuning takes 1-3 epochs; past ~10 on a small set the train loss measures recall, and the
  checkpoint that the run is saving is the over-fitted one (it parrots the training answers, forgets what it
  could do before, and generalises worse with every further epoch);
- nothing else in the log will ever say so: the run finishes "successfully".
So it is an error with action `fix` (fewer epochs, more data, a held-out split with early stopping).

Kept apart from the neighbours:
- inside the first epoch the same shape is leakage (`metric_leak`, `metric_detect._collapse`): unseen batches;
- a loss between 0.01 and 0.1 after many epochs stays unreported here (a small model on a narrow task);
- a loss of exactly 0 is the hidden-NaN / no-label-token reading (`metric_zero`); grad_norm exactly 0 on
  every tail record is no-grad's (`metric-flat-loss`);
- RL records, Megatron iteration lines (pretraining, no epochs) and sampled series are left alone;
- a first loss under fall_from (a classifier starting at ln 2) is not a language model's curve.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metric_parse import Record
from llmtriage.detect.metrics import MetricTracker, finite


def memorised(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    th = t.th
    if (t.first_nonfinite is not None or t.sampled or t.meg_iters or len(fin) < th.leak_records + 1
            or any(r.rl for r in fin) or fin[0].loss is None or fin[0].loss < th.fall_from):
        return []
    i = len(fin)
    while i > 0 and fin[i - 1].loss is not None and 0 < fin[i - 1].loss < th.fall_below:
        i -= 1
    tail = fin[i:]
    if i == 0 or len(tail) < th.leak_records or tail[-1].loss >= th.fall_strong:  # type: ignore[operator]
        return []
    at = next(r for r in tail if r.loss < th.fall_strong)  # type: ignore[operator]
    if at.epoch is None or at.epoch < th.memorise_epochs:
        return []
    grads = [r.grad_norm for r in tail if r.grad_norm is not None and finite(r.grad_norm)]
    if grads and all(g <= th.zero_grad for g in grads):  # type: ignore[operator]
        return []       # nothing moves: no-grad's reading
    last = tail[-1]
    return [Anomaly("overfit", "loss-suspicious", "error", at.line, last.line, at.step, len(tail), {
        "from_loss": fmt(fin[0].loss), "from": fin[0].at, "at": at.at, "epoch": fmt(at.epoch),
        "seen": int(at.epoch), "loss": fmt(last.loss), "records": len(tail),
        "last_epoch": fmt(last.epoch) if last.epoch is not None else None,
        "grad_norm": fmt(max(grads)) if grads else None})]
