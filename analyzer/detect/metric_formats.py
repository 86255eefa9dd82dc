"""Training-loss lines that `metric_parse.parse_line` does not anchor on, read into a `metrics.MetricTracker`
(`self`) one line at a time:

  Marian NMT     [2020-08-31 10:11:35] Ep. 1 : Up. 500 : Sen. 232,118 : Cost 9.12345678 * 7,150,112 after ... : L.r. 1.8750e-05
                 (`Cost` is the training cross-entropy; Marian keeps printing `Cost nan` when it went NaN)
  bare fields    epoch 0 step 20 loss 3.4123 lr 1.9e-04   (a custom loop's print: space-separated keys, no `=`/`:`)

A line that the tracker's anchor already finds is left to `parse_line`, so no record is counted twice; a bare line
the anchor misses is read by `parse_line` itself (its key=value reader takes space-separated keys too).
"""
from __future__ import annotations

import re
from typing import Any

from llmtriage.detect.metric_parse import num, parse_line, regexes

_NUM = rb"([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|nan|-?inf))"
# Marian: the update counter and the cost on one display line (the learning rate when --lr-report is on)
_MARIAN = re.compile(rb"\bEp\. ([0-9]+) : Up\. ([0-9]+) :[^\n]*? : Cost " + _NUM + rb"\b(?:[^\n]*? : L\.r\. " + _NUM + rb")?",
                     re.I)
# a bare `step N loss X` (optionally `lr Y`) line, the step before the loss; not `step N, loss` nor `step N - loss`
# (parse_line reads those)
_BARE = re.compile(rb"(?m)^[^\n]*?\bstep ([0-9]+) loss " + _NUM + rb"(?=\s|$)(?:[^\n]*?\blr " + _NUM + rb"(?=\s|$))?")
# a cheap gate on the whole block before any per-line work
GATES = (b" : Cost ", b" loss ")


def scan_formats(self: Any, lines: bytes, view: bytes, line_base: int) -> None:
    """Add a record for each Marian display line and each bare `step N loss X` line in the block."""
    if b" : Cost " in view and b"Up. " in view:
        for m in _MARIAN.finditer(view):
            ls = view.rfind(b"\n", 0, m.start()) + 1
            self.add(line_base + lines.count(b"\n", 0, ls), (int(m.group(2)), num(m.group(3)), None, num(m.group(4)), None))
    if b" loss " in view and b"step " in view:
        anchor = regexes().ANCHOR
        for m in _BARE.finditer(view):
            le = view.find(b"\n", m.start())
            line = view[m.start():le if le >= 0 else len(view)]
            if anchor.search(line):
                continue
            parsed = parse_line(line) or (int(m.group(1)), num(m.group(2)), None, num(m.group(3)), None)
            self.add(line_base + lines.count(b"\n", 0, m.start()), parsed)
