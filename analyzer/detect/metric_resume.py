"""metric-loss-dropped-at-resume: the loss right after a resume from a checkpoint is a fraction of what it was
right before it.

Resuming restores the weights the run had when it saved, so the first records after the resume read about
the loss the last records before it did (a little higher while the optimizer state warms up, never far lower).
When they read `DROP_FACTOR` x lower or more, and at least `DROP_ABS` lower, the weights did not learn that in
one step: the loss is computed differently since the restart (a library upgraded between the two sessions that
changed how the loss is averaged or masked, a different template or label mask, a changed data file) and the
curve no longer measures what it measured before.

Resume markers: transformers' `Continuing training from global step N`, `Resuming (training) from checkpoint`,
Lightning's `Restoring states from the checkpoint path at`, Megatron's `successfully loaded checkpoint from ...
at iteration N`, torchtitan's `Loading the checkpoint at step N`, openpi/orbax's `Restored checkpoint at step N`. The records compared are the last
`WINDOW` before the last marker that has records on both sides and the first `WINDOW` after it. Left alone: a
resume that jumps ahead (the steps or the epoch after it far past those before: the log lost the records
between), one that crosses an epoch boundary (a multi-epoch run's loss drops at each new pass over the same
data), RL records, and runs another detector already names.
"""
from __future__ import annotations

import re
from typing import Iterator, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.metrics import MetricTracker, finite
from llmtriage.engine.fastre import Gate

WINDOW = 5
DROP_FACTOR = 3.0
DROP_ABS = 0.3
KEEP = 64

_MARK = re.compile(rb"Continuing training from global step|Resum(?:ing|ed) (?:training )?from (?:the )?checkpoint"
                   rb"|Restoring states from the checkpoint|successfully loaded checkpoint from .{0,300} at iteration"
                   rb"|Loading the checkpoint (?:at|from) step|Restored checkpoint (?:at|from) step", re.I)

# what every `_MARK` match holds (RE2's case folding is a superset of `re.I` on bytes): a block without any is
# skipped without the case-insensitive stdlib scan
_PREGATE = Gate(rb"(?i)continuing training|resum|restor|successfully loaded checkpoint|loading the checkpoint")


class ResumeMarks:
    """Line numbers of resume markers, block by block."""

    def __init__(self) -> None:
        self.lines: list[int] = []

    def feed(self, lines: bytes, line_base: int) -> None:
        if len(self.lines) >= KEEP or not _PREGATE(lines) or _MARK.search(lines) is None:
            return
        for i, raw in enumerate(lines.split(b"\n")):
            if len(raw) < 4096 and _MARK.search(raw):
                if not self.lines or line_base + i - self.lines[-1] > 20:    # one resume prints several
                    self.lines.append(line_base + i)


def _jumps_ahead(before: list, after: list) -> bool:
    b, a = before[-1], after[0]
    if b.step is not None and a.step is not None:
        gaps = [y.step - x.step for x, y in zip(before, before[1:]) if x.step is not None and y.step is not None]
        gap = max(1, _median(gaps)) if gaps else 1
        return a.step - b.step > 10 * gap or a.step < b.step - 10 * gap
    if b.epoch is not None and a.epoch is not None:
        return abs(a.epoch - b.epoch) > 0.25 or int(a.epoch) != int(b.epoch)
    return False


def resume_drop(t: MetricTracker, marks: list[int], found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when the first WINDOW records after a resume marker have a median loss DROP_FACTOR x
    (and DROP_ABS) below the median of the last WINDOW before it."""
    hit: Optional[tuple] = None
    for m, before, after, lb, la in _resume_windows(t, marks, found):
        if la * DROP_FACTOR <= lb and lb - la >= DROP_ABS:
            hit = (m, before, after, lb, la)
    if hit is None:
        return []
    m, before, after, lb, la = hit
    return [Anomaly("resume_drop", "loss-suspicious", "error", m, after[-1].line, after[0].step, len(after), {
        "before": fmt(lb), "before_at": before[-1].at, "after": fmt(la), "at": after[0].at, "line": m,
        "factor": round(lb / la, 1) if la > 0 else None})]


def _resume_windows(t: MetricTracker, marks: list[int], found: list[Anomaly]) -> Iterator[tuple]:
    """(mark, WINDOW records before, WINDOW after, median loss before, median after) of each resume marker with three
    records on each side and no jump ahead; nothing on a sampled tracker, an RL log or after an error anomaly."""
    if t.sampled or not marks or any(a.severity == "error" for a in found):
        return
    recs = [r for r in t.records() if finite(r.loss)]
    if any(r.rl for r in recs):
        return
    for m in marks:
        before = [r for r in recs if r.line < m][-WINDOW:]
        after = [r for r in recs if r.line > m][:WINDOW]
        if len(before) >= 3 and len(after) >= 3 and not _jumps_ahead(before, after):
            yield m, before, after, _median([r.loss for r in before]), _median([r.loss for r in after])


JUMP_FACTOR = 2.0     # resume_reset: the first records after a resume this many times the last ones before ...
JUMP_ABS = 2.0        # ... and this much higher


def resume_reset(t: MetricTracker, marks: list[int], found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when the first WINDOW records after a resume marker have a median loss JUMP_FACTOR x (and JUMP_ABS)
    above the median of the last WINDOW before it: the loaded checkpoint reported success, but the weights the run
    trains on after it are not the ones it saved (a tied or rebuilt lm_head, an optimizer state loaded over the
    weights, a partial load): state-dict-keys. A resume that jumps ahead or crosses an epoch is left alone."""
    for m, before, after, lb, la in _resume_windows(t, marks, found):
        if la >= JUMP_FACTOR * lb and la - lb >= JUMP_ABS:
            return [Anomaly("resume_reset", "state-dict-keys", "error", m, after[-1].line, after[0].step, len(after), {
                "before": fmt(lb), "before_at": before[-1].at, "after": fmt(la), "at": after[0].at, "line": m,
                "factor": round(la / lb, 1) if lb > 0 else None})]
    return []


def resumed_low_start(marks: list[int], found: list[Anomaly]) -> None:
    """A loss near 0 from the first record is the labels giving the answer away only when that record is the
    start of training; when a resume marker precedes the first record, the run restored weights that already
    learnt the data (a long fine-tune resumed near its end), so metric-loss-near-zero-from-start is a warning
    and yields to what the resumed run died of."""
    for a in found:
        if a.kind == "low_start" and a.severity == "error" and any(m < a.line for m in marks):
            a.severity = "warning"
