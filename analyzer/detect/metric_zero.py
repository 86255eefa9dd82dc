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

A flat 0 from the first record is `nan_hidden`'s (below) or `_flat`'s, and RL losses (0 by design while
the policy equals the reference) are left alone.

`nan_hidden` reads a loss of exactly 0 that never moves again:

- after a normal level, with no gradual decline and no zero gradient: the NaN/inf filter (or an fp16
  overflow) turned the loss into 0: `nan-loss`; the level may be a single first record (>= fall_from)
  when >= 2 x zero_min_records zeros follow it and no grad_norm is logged beside them, or FP16_BEFORE
  records in a run configured fp16 with >= zero_min_records + 2 zeros after them;
- from the very first record: no language-model loss starts at 0. In a run whose configuration says
  fp16 (flags, a GradScaler, "16-bits training: True") the loss overflowed from the first forward pass:
  `nan-loss`. Otherwise the loss averages over no token (every label -100: a cutoff that removes the
  answer, a template never found), so nothing is trained: `no-grad` (`zero_unsup`). A NaN grad_norm
  beside those zeros stays `_nan`'s: a real NaN and a mean over zero tokens (0/0) print the same, and
  only a signature tells them apart (rules/no-grad/trl-record-every-label-masked.yaml).
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.metrics import MetricTracker, Record, finite

MIN_BEFORE = 2          # records with a real loss before the zeros (with a gradient beside the zeros)
FP16_BEFORE = 3         # records with a real loss before >= zero_min_records + 2 zeros in an fp16 run
MIN_BEFORE_MASKED = 4   # ... before zeros whose gradient is 0 too (the stronger claim needs a curve)
DROP_FROM = 0.1         # the last loss before zeros with zero gradient: a collapse would pass below this
BLOWN_GRAD = 10.0       # zeros with zero gradient right after the grad_norm rose this many times its level ...
BLOWN_RECENT = 3        # ... within this many records before them: the weights blew up (nan-loss)
ROUNDED_DROP = 0.01     # a loss printed as 0.000 right after one at least this: it fell below the print precision
PERFECT_EARLY = 3       # zeros with 100% training accuracy from at most this many records after the start ...
PERFECT_SHARE = 0.8     # ... on this share of the zero records: trivial or leaked targets (loss-suspicious)
COLLAPSE_RECORDS = 4    # fp16: at most this many records between the last loss at half its level and the zeros


def nan_hidden(t: MetricTracker, finite_recs: list[Record]) -> list[Anomaly]:
    """A normal loss, then exactly 0 on every later record (no gradual decline in between, no zero grad_norm),
    or exactly 0 from the first record on; not an RL run, no NaN seen (`_nan` reads those records)."""
    th = t.th
    if t.sampled or len(finite_recs) < th.zero_min_records + 4 or any(r.rl for r in finite_recs):
        return []
    i = len(finite_recs)
    while i > 0 and finite_recs[i - 1].loss == 0:
        i -= 1
    zeros, before = finite_recs[i:], finite_recs[:i]
    if any(r.grad_norm is not None and finite(r.grad_norm) and r.grad_norm <= th.zero_grad for r in zeros):
        return []       # loss 0 and grad 0 together: nothing supervised (no-grad), not a hidden NaN
    perfect = _perfect(zeros, before)
    if perfect:
        return perfect
    if not before and len(zeros) >= th.zero_min_records + 4:
        grads = {r.grad_norm for r in zeros if r.grad_norm is not None}
        return [Anomaly("zero_start" if t.fp16 else "zero_unsup", "nan-loss" if t.fp16 else "no-grad", "error",
                        zeros[0].line, zeros[-1].line, zeros[0].step, len(zeros), {
                            "at": zeros[0].at, "records": len(zeros),
                            "grad_norm": fmt(grads.pop()) if len(grads) == 1 else None})]
    many = len(zeros) >= 2 * th.zero_min_records     # exactly 0 this long is no curve a model follows
    # one real loss >= fall_from, then only zeros: no single update takes a model from there to exactly 0
    # (the labels were there on the first record), so the first record is the level
    # (only with no grad_norm beside the zeros: one printed there is the stronger evidence, read by exact_zero)
    single = (many and len(before) == 1 and before[0].loss >= th.fall_from  # type: ignore[operator]
              and all(r.grad_norm is None for r in zeros))
    # fp16 on: an overflow to inf is what the filter prints as 0, so a flat level of FP16_BEFORE records will do
    need = 2 if many else (FP16_BEFORE if t.fp16 and len(zeros) >= th.zero_min_records + 2 else 4)
    if len(zeros) < th.zero_min_records or (len(before) < need and not single):
        return []
    med, prev = _median([r.loss for r in before[:-1]] or [before[0].loss]), before[-1].loss  # type: ignore[misc]
    if med < 0.1 or prev < (0.25 if many else 0.5) * med:   # type: ignore[operator]
        return fp16_collapse(t, before, zeros)  # it was already falling towards 0: a collapse, unless fp16 says NaN
    spike = prev >= th.zero_spike_factor * med    # type: ignore[operator]
    return [Anomaly("nan_hidden", "nan-loss", "error", zeros[0].line, zeros[-1].line, zeros[0].step, len(zeros), {
        "at": zeros[0].at, "records": len(zeros), "last_loss": fmt(prev), "last_at": before[-1].at,
        "median": fmt(med), "spike": f"{prev / med:.1f}" if spike and med else None})]  # type: ignore[operator]


def fp16_collapse(t: MetricTracker, before: list[Record], zeros: list[Record]) -> list[Anomaly]:
    """In an fp16 run, a loss that plunges from its level to exactly 0 within COLLAPSE_RECORDS records and then prints
    exactly 0 on >= 2 x zero_min_records records, inside the first epoch, with no zero grad_norm beside the zeros: the
    half-precision forward overflowed (4-bit + fp16 LoRA, a model trained in bf16 run in fp16) and the loss is NaN
    written as 0, or a degenerate output whose loss underflows to 0. A model that learns its way down on unseen data
    (first epoch) never reaches an exact 0; a fall that takes many records, or zeros after the first epoch (a small
    dataset memorised), stay with the fall and memorisation checks."""
    th = t.th
    if (not t.fp16 or len(zeros) < 2 * th.zero_min_records or len(before) < FP16_BEFORE or any(r.rounded for r in zeros)
            or (zeros[0].epoch is not None and zeros[0].epoch >= 1.0)):
        return []
    level = _median([r.loss for r in before[:FP16_BEFORE]])  # type: ignore[misc]
    if level < th.fall_from:
        return []
    k = len(before)
    while k > 0 and before[k - 1].loss < 0.5 * level:  # type: ignore[operator]
        k -= 1
    if k == 0 or len(before) - k > COLLAPSE_RECORDS:
        return []       # the fall to 0 took many records: a curve, not a break
    high = before[k - 1]
    return [Anomaly("zero_fp16", "nan-loss", "error", zeros[0].line, zeros[-1].line, zeros[0].step, len(zeros), {
        "at": zeros[0].at, "records": len(zeros), "last_loss": fmt(high.loss), "last_at": high.at,
        "level": fmt(level), "between": len(before) - k})]


def rounded_zero(t: MetricTracker, fin: list[Record], i: int) -> list[Anomaly]:
    """The loss prints as 0 with fixed decimals (`train_loss_step=0.000`: below the display's precision, not an
    exact 0) on every record from `fin[i]` on, right after a real loss >= ROUNDED_DROP (20x what `0.000` can
    hide), with no grad_norm logged: it fell by orders of magnitude in one logging interval and stays below what
    the log prints. No model learns its way down that fast; the targets became trivial or leak (loss-suspicious).
    An exact 0 stays `_flat`'s (no label token counted)."""
    run = fin[i:]
    if (i == 0 or len(run) < t.th.zero_min_records or not all(r.rounded for r in run)
            or any(r.grad_norm is not None or r.rl for r in fin) or fin[i - 1].loss < ROUNDED_DROP):  # type: ignore[operator]
        return []
    prev = fin[i - 1]
    return [Anomaly("zero_rounded", "loss-suspicious", "error", run[0].line, run[-1].line, run[0].step, len(run), {
        "at": run[0].at, "records": len(run), "last_loss": fmt(prev.loss), "last_at": prev.at})]


def _perfect(zeros: list[Record], before: list[Record]) -> list[Anomaly]:
    """Exactly 0 on >= zero_min_records records that print a training accuracy of 100% beside it, from the
    first records on (within PERFECT_EARLY records of the start): the model gets every target right at once. A
    NaN (printed as 0) predicts garbage and a mean over no label token scores nothing, so neither reads 100%:
    the targets are trivial or given away (one class for every sample, the label among the inputs)."""
    if len(zeros) < 3 or len(before) > PERFECT_EARLY or sum(r.perfect for r in zeros) < PERFECT_SHARE * len(zeros):
        return []
    prev = before[-1] if before else None
    return [Anomaly("zero_perfect", "loss-suspicious", "error", zeros[0].line, zeros[-1].line, zeros[0].step, len(zeros), {
        "at": zeros[0].at, "records": len(zeros), "last_loss": fmt(prev.loss) if prev else None,
        "last_at": prev.at if prev else None})]


def _blown(before: list[Record]) -> bool:
    """The grad_norm of the last BLOWN_RECENT records before the zeros rose >= BLOWN_GRAD x its median level
    before them: the update that came next made the weights non-finite."""
    grads = [r.grad_norm for r in before if finite(r.grad_norm)]
    if len(grads) < BLOWN_RECENT + 3:
        return False
    base = _median(grads[:-BLOWN_RECENT])  # type: ignore[arg-type]
    return base > 0 and max(grads[-BLOWN_RECENT:]) >= BLOWN_GRAD * base  # type: ignore[type-var,operator]


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
              and len(before) >= MIN_BEFORE_MASKED and _blown(before)):
            # the gradient exploded just before: the weights are NaN/inf and the filter prints 0 for both
            base["grad_peak"] = fmt(max(r.grad_norm for r in before[-BLOWN_RECENT:] if finite(r.grad_norm)))  # type: ignore[type-var]
            anomalies[idx] = Anomaly("zero_blown", "nan-loss", "error", a.line, a.last_line, run[0].step, len(run), base)
        elif (grads and all(finite(g) and abs(g) <= t.th.zero_grad for g in grads)  # type: ignore[arg-type]
              and len(before) >= MIN_BEFORE_MASKED and prev.loss >= DROP_FROM  # type: ignore[operator]
              and not (lrs and all(lr == 0 for lr in lrs))):
            anomalies[idx] = Anomaly("zero_masked", "loss-suspicious", "error", a.line, a.last_line, run[0].step,
                                     len(run), base)
