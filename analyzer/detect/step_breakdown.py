"""metric-step-time-untimed: a step-timing breakdown whose timed phases leave much of every step unaccounted.

Some trainers print, after every step, the step's wall time and the time of each phase they time, each
with its share of the step (NeMo-RL's SFT / DPO / GRPO / distillation loops, `nemo_rl/algorithms/*.py`):

    ⏱️  Timing:
      • Total step time: 33.86s
      • policy_training: 21.36s (63.1%)
      • data_processing: 0.19s (0.3%)

When the breakdown times the training phase itself (a phase named `*train*`), the shares of the
top-level phases (names without `/`, or ending in `/total`) should add up to nearly the whole step. A
step whose phases cover only half or two thirds of it spent the rest outside every timed phase: the
GPUs wait between the phases (an exposed data-parallel reduction, `torch.cuda.empty_cache()` or
other synchronisation in the loop, controller / Ray overhead). The run does not fail; it is slow.

The first step (start-up, compilation) is left out; at least `MIN_STEPS` later steps must have a
breakdown. A finding when the median untimed share is `UNTIMED_SHARE` or more: a warning, an error
from `UNTIMED_ERROR` (a third of every step lost). Breakdowns that time no training phase (older SFT
loops timed only `data_processing`) are not read: their untimed share says nothing.
"""
from __future__ import annotations

import re

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median

UNTIMED_SHARE = 0.25
UNTIMED_ERROR = 1 / 3
MIN_STEPS = 4
KEEP = 1024     # breakdowns kept (the head is enough to judge; bounds memory on huge logs)

_TOTAL = re.compile(rb"Total step time: ([0-9]{1,9}(?:\.[0-9]+)?)s")
_PART = re.compile(rb"[^\n]{0,40}?(?:\xe2\x80\xa2|[-*])\s*([A-Za-z_][\w./-]{0,80}): ([0-9]{1,9}(?:\.[0-9]+)?)s \(([0-9]{1,3}(?:\.[0-9]+)?)%\)\s*$")


class StepBreakdownTracker:
    """Reads step-timing breakdowns block by block; `detect()` gives the anomaly."""

    def __init__(self) -> None:
        # one entry per breakdown: [line, total seconds, {phase: share %}]
        self.steps: list[tuple[int, float, dict[str, float]]] = []
        self._open = False      # a breakdown whose phase lines may go on in the next block

    def feed(self, lines: bytes, line_base: int) -> None:
        if b"Total step time: " not in lines and not self._open:
            return
        pos = 0
        if self._open:          # phase lines of the last block's breakdown at the start of this one
            pos = self._parts(lines, 0)
        for m in _TOTAL.finditer(lines, pos):
            if len(self.steps) >= KEEP:
                self._open = False
                return
            self.steps.append((line_base + lines.count(b"\n", 0, m.start()), float(m.group(1)), {}))
            self._parts(lines, lines.find(b"\n", m.end()) + 1 if lines.find(b"\n", m.end()) >= 0 else len(lines))

    def _parts(self, lines: bytes, pos: int) -> int:
        """Reads the phase lines from `pos` into the last breakdown; returns where they end."""
        parts = self.steps[-1][2] if self.steps else {}
        self._open = True
        while pos < len(lines):
            end = lines.find(b"\n", pos)
            if end < 0:         # the block ends inside a line: the breakdown may go on
                return len(lines)
            m = _PART.match(lines, pos, end)
            if m is None:
                self._open = False
                return pos
            if len(parts) < 64:
                parts[m.group(1).decode("ascii", "replace")] = float(m.group(3))
            pos = end + 1
        return pos

    def detect(self) -> list[Anomaly]:
        """The anomaly when the timed phases leave a large share of the steps untimed."""
        steps = [s for s in self.steps[1:] if s[1] > 0 and any("train" in k for k in s[2])]
        if len(steps) < MIN_STEPS:
            return []
        untimed = []
        for _, _, parts in steps:
            top = sum(v for k, v in parts.items() if "/" not in k or k.endswith("/total"))
            untimed.append(max(0.0, 1.0 - top / 100.0))
        share = median(untimed)
        if share < UNTIMED_SHARE:
            return []
        train = max((k for k in steps[-1][2] if "train" in k), key=lambda k: steps[-1][2][k])
        train_pct = median([s[2].get(train, 0.0) for s in steps])
        total = median([s[1] for s in steps])
        sev = "error" if share >= UNTIMED_ERROR else "warning"
        return [Anomaly("step_untimed", "throughput-low", sev, steps[0][0], steps[-1][0], None, len(steps), {
            "untimed_pct": f"{100 * share:.0f}", "untimed_s": fmt(share * total), "step": fmt(total),
            "train": train, "train_pct": f"{train_pct:.0f}", "steps": len(steps),
            "low": f"{100 * min(untimed):.0f}", "high": f"{100 * max(untimed):.0f}"})]

