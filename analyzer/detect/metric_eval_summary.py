"""Evaluation summaries of the BEiT / DeiT / MAE / timm `MetricLogger` scripts, and two judgements on them.

Those scripts print, after each evaluation, a summary line and an accuracy line:

    * Acc@1 78.612 Acc@5 98.194 loss 0.702            (DeiT, MAE, BEiT, MAGE: `* loss 0.031` when no top-k)
    Accuracy of the network on the 9138 val EEG: 99.98%       (and "... on the 50000 test images: 81.8%")

and announce their schedule with `Start training for 50 epochs`. The training lines
(`Epoch: [3]  [ 10/121]  ... loss: 0.0148 (0.0148)  class_acc: 1.0000 (1.0000)`) are the tracker's records.

metric-eval-perfect-early (loss-suspicious): the evaluation accuracy is perfect (>= PERFECT %) on a large
held-out set (>= MIN_SAMPLES samples, printed on the line) from an evaluation within the first EARLY_SHARE of
the scheduled epochs, and stays perfect at every later evaluation (at least RUN of them), while the training
loss fell by FALL_FACTOR x or more from its first record. Thousands of real held-out samples all right after an
epoch or two means the held-out samples (or their labels) reach training. Healthy look-alikes left alone: a
high but imperfect accuracy (ViT fine-tuned on CIFAR-10 reaches ~99%, MNIST ~99.5%), a perfect score on a
small set, perfect only late in the schedule, a model that starts good (no fall: resumed or already trained).

metric-eval-summary-frozen (no-grad): RUN or more evaluation summaries print the same accuracies and loss,
character for character, across at least MIN_EPOCHS epochs, while the training records between them have a
flat loss (spread <= FLAT_SPREAD of its median) and a learning rate above 0: the weights being evaluated
never change. An evaluation that plateaus while the training loss still falls, or identical summaries at the
end of a schedule whose learning rate reached 0, are left alone.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median
from llmtriage.engine.fastre import Gate

PERFECT = 99.95
MIN_SAMPLES = 1000
EARLY_SHARE = 0.2
RUN = 2
FALL_FACTOR = 10.0
MIN_EPOCHS = 3
FLAT_SPREAD = 0.01
KEEP = 256

_ACC_LINE = re.compile(rb"Accuracy of the network on (?:the )?([0-9]+) ([^\n:]{0,60}?): *([0-9]+(?:\.[0-9]+)?)%")
_SUMMARY = re.compile(rb"(?m)(?:^|\s)\* ((?:Acc@1 [0-9.]+ )?(?:Acc@5 [0-9.]+ )?loss [0-9.]+(?:[eE][-+]?[0-9]+)?)\s*$")
_SCHEDULE = re.compile(rb"Start training for ([0-9]+) epochs")
_GATES = (b"Accuracy of the network", b"* Acc@1", b"* loss", b"Start training for", b"al_acc", b"al_Acc", b"est_acc")
# an evaluation accuracy printed on an epoch's line ("Epoch:153, Training_loss:0.6822, Eval_acc:0.5298", Keras
# "- val_accuracy: 0.5298", "test_acc=0.5298")
_INLINE = re.compile(rb"(?i)\b((?:eval|val|valid|validation|test)_acc(?:uracy)?['\"]?\s*[:=]\s*([0-9]*\.[0-9]{3,}))(?![0-9])")
INLINE_RUN = 10
# what every `_INLINE` match holds (`val_acc` is in eval_acc; RE2's case folding is a superset of `re.I` on bytes)
_INLINE_GATE = Gate(rb"(?i)(?:val|valid|validation|test)_acc")


class EvalSummaries:
    """Evaluation accuracy lines and `* Acc@1 ... loss ...` summaries, block by block."""

    def __init__(self) -> None:
        self.accs: list[tuple[int, int, float]] = []      # (line, samples, accuracy %)
        self.summaries: list[tuple[int, bytes]] = []       # (line, the summary as printed)
        self.epochs: Optional[int] = None
        self.inline: list[tuple[int, bytes]] = []          # (line, `Eval_acc:0.5298` as printed)

    def feed(self, lines: bytes, line_base: int) -> None:
        if not any(g in lines for g in _GATES) or len(self.accs) + len(self.summaries) + len(self.inline) >= KEEP:
            return
        if self.epochs is None:
            m = _SCHEDULE.search(lines) if b"Start training for" in lines else None
            if m:
                self.epochs = int(m.group(1))
        for m in _ACC_LINE.finditer(lines) if b"Accuracy of the network" in lines else ():
            self.accs.append((line_base + lines.count(b"\n", 0, m.start()), int(m.group(1)), float(m.group(3))))
        for m in _SUMMARY.finditer(lines) if b"* Acc@1 " in lines or b"* Acc@5 " in lines or b"* loss" in lines else ():
            self.summaries.append((line_base + lines.count(b"\n", 0, m.start(1)), m.group(1)))
        for m in _INLINE.finditer(lines) if _INLINE_GATE(lines) else ():
            v = float(m.group(2))
            if 0 < v < 1 or 1 < v < 100:        # a saturated 0 / 1 / 100% repeats in a healthy run too
                self.inline.append((line_base + lines.count(b"\n", 0, m.start()), m.group(1)))


def _epoch_before(recs: list[Any], line: int) -> Optional[float]:
    """The epoch of the last training record above `line` (None when no record there prints one)."""
    ep = None
    for r in recs:
        if r.line > line:
            break
        if r.epoch is not None:
            ep = r.epoch
    return ep


def eval_perfect_early(ev: EvalSummaries, recs: list[Any], found: list[Anomaly]) -> list[Anomaly]:
    """The loss-suspicious anomaly described in the module docstring, or nothing."""
    if any(a.severity == "error" for a in found) or not ev.epochs or len(ev.accs) < RUN:
        return []
    fin = [r for r in recs if r.loss is not None and r.loss == r.loss and not r.rl]
    if len(fin) < 3:
        return []
    i = len(ev.accs)
    while i > 0 and ev.accs[i - 1][2] >= PERFECT and ev.accs[i - 1][1] >= MIN_SAMPLES:
        i -= 1
    run = ev.accs[i:]
    if len(run) < RUN:
        return []
    epoch = _epoch_before(fin, run[0][0])
    if epoch is None or epoch > EARLY_SHARE * ev.epochs:
        return []
    first_loss, low = fin[0].loss, min(r.loss for r in fin)
    if low <= 0 or first_loss < FALL_FACTOR * low:
        return []
    return [Anomaly("eval_perfect", "loss-suspicious", "error", run[0][0], run[-1][0], None, len(run), {
        "acc": f"{run[0][2]:g}", "samples": run[0][1], "epoch": int(epoch), "epochs": ev.epochs, "evals": len(run),
        "first_loss": fmt(first_loss), "low_loss": fmt(low)})]


def eval_summary_frozen(ev: EvalSummaries, recs: list[Any], found: list[Anomaly]) -> list[Anomaly]:
    """The no-grad anomaly described in the module docstring, or nothing."""
    if any(a.severity == "error" and a.category == "no-grad" for a in found):
        return []
    return _frozen(ev.summaries, recs, RUN + 1, 6) or _frozen(ev.inline, recs, INLINE_RUN, 3)


def _frozen(series: list[tuple[int, bytes]], recs: list[Any], min_run: int, min_digits: int) -> list[Anomaly]:
    """The anomaly when the trailing run of identical printed evaluations is >= min_run long, with >= min_digits
    digits, over MIN_EPOCHS epochs of flat training loss and a learning rate not 0."""
    if len(series) < min_run:
        return []
    last = series[-1][1]
    i = len(series)
    while i > 0 and series[i - 1][1] == last:
        i -= 1
    run = series[i:]
    if len(run) < min_run or sum(c in b"0123456789" for c in last) < min_digits:
        return []
    hi = run[-1][0]
    fin = [r for r in recs if r.loss is not None and r.loss == r.loss and not r.rl and r.line < hi]
    for j in range(len(run) - min_run + 1):     # the first evaluations may come while the loss still settles
        lo = run[j][0]
        between = [r for r in fin if r.line >= lo]
        epochs = {int(r.epoch) for r in between if r.epoch is not None}
        if len(between) < RUN or len(epochs) < MIN_EPOCHS:
            return []
        losses = [r.loss for r in between]
        mid = median(losses)
        if mid > 0 and (max(losses) - min(losses)) <= FLAT_SPREAD * mid:
            break
    else:
        return []
    if any(r.lr is not None and r.lr == 0 for r in between):
        return []
    return [Anomaly("eval_summary_frozen", "no-grad", "error", lo, hi, None, len(run) - j, {
        "summary": last.decode("ascii", "replace"), "evals": len(run) - j, "from_epoch": min(epochs),
        "to_epoch": max(epochs), "loss_lo": fmt(min(losses)), "loss_hi": fmt(max(losses))})]
