"""metric-xla-recompiling: PyTorch/XLA compiles a new graph at (almost) every step.

torch_xla traces each step into a graph and compiles it once per distinct graph; a graph that changes
every step (input shapes that vary batch to batch, a Python scalar or `.item()` baked into the graph,
ops without an XLA lowering) is compiled again every step, and each compile takes seconds to minutes,
so the job runs orders of magnitude slower than it should without any error. The evidence is the
library's own metrics report (`torch_xla.debug.metrics.metrics_report()`), printed by the user's loop
or by `PT_XLA_DEBUG`:

    Metric: CompileTime            Counter: UncachedCompile        Counter: MarkStep
      TotalSamples: 14               Value: 14                       Value: 12

The compile count (UncachedCompile, else CompileTime's TotalSamples) is read from every report with
the step count (the MarkStep counter, else the number of reports). After the first report (warm-up
compiles the first graphs), the compiles must grow at least `PER_STEP` per step over at least
`MIN_STEPS` steps: a healthy run compiles a handful of graphs at the start (and one for evaluation)
and then only hits the cache (CachedCompile grows, UncachedCompile stays), which this leaves alone.
"""
from __future__ import annotations

import re
from typing import Optional

from llmtriage.detect.metric_detect import Anomaly

# compiles per step after the first report that mean "a new graph every step"
PER_STEP = 0.5
# ... sustained over at least this many steps, with at least this many reports after the first
MIN_STEPS = 5
MIN_REPORTS = 4
KEEP = 4096      # reports kept (head is enough to judge; bounds memory on huge logs)

_PAIR = re.compile(rb"(?:Counter: (UncachedCompile|MarkStep)|Metric: (CompileTime))[ \t]*\r?\n"
                   rb"[^\n]{0,80}?(?:Value|TotalSamples): ([0-9]{1,12})")


class XlaCompileTracker:
    """Reads torch_xla metrics reports block by block; `detect()` gives the anomaly."""

    def __init__(self) -> None:
        # one entry per report: [line, uncached compiles or None, CompileTime samples or None, MarkStep or None]
        self.reports: list[list[Optional[int]]] = []
        self._carry = b""

    def feed(self, lines: bytes, line_base: int) -> None:
        carry = self._carry
        if b"Compile" not in lines and b"MarkStep" not in lines and not carry:
            return
        # a name on the last line of a block has its value on the next block's first line: that line is
        # read again in front of the next block (alone it matches nothing, so nothing is counted twice)
        cut = lines.rfind(b"\n", 0, max(len(lines) - 1, 0)) + 1
        tail = lines[cut:]
        self._carry = tail if b"Counter: " in tail or b"Metric: " in tail else b""
        data = carry + lines
        base = line_base - (1 if carry else 0)
        for m in _PAIR.finditer(data):
            self._note(base + data.count(b"\n", 0, m.start()), m.group(1) or m.group(2), int(m.group(3)))

    def _note(self, line: int, name: bytes, value: int) -> None:
        slot = {b"UncachedCompile": 1, b"CompileTime": 2, b"MarkStep": 3}[name]
        cur = self.reports[-1] if self.reports else None
        # a report starts anew when this slot is already filled (reports list the same names each time)
        if cur is None or cur[slot] is not None:
            if len(self.reports) >= KEEP:
                return
            cur = [line, None, None, None]
            self.reports.append(cur)
        cur[slot] = value

    def detect(self) -> list[Anomaly]:
        """The anomaly when compiles keep growing with the steps after the first report."""
        reps = [r for r in self.reports if r[1] is not None or r[2] is not None]
        if len(reps) < MIN_REPORTS + 1:
            return []
        use_uncached = all(r[1] is not None for r in reps)
        comp = [r[1] if use_uncached else r[2] for r in reps]
        if any(c is None for c in comp):
            return []
        with_steps = all(r[3] is not None for r in reps)
        steps = [r[3] for r in reps] if with_steps else list(range(len(reps)))
        first, last = 1, len(reps) - 1
        d_comp = comp[last] - comp[first]           # type: ignore[operator]
        d_step = steps[last] - steps[first]         # type: ignore[operator]
        grew = sum(1 for i in range(first + 1, last + 1) if comp[i] > comp[i - 1])     # type: ignore[operator]
        if d_step < MIN_STEPS or last - first < MIN_REPORTS - 1 or d_comp < PER_STEP * d_step:
            return []
        if grew < 0.8 * (last - first):
            return []   # compiles came in bursts (a new phase), not one per step
        return [Anomaly("xla_recompile", "throughput-low", "error", reps[first][0] or 0, reps[last][0] or 0,  # type: ignore[arg-type]
                        steps[last] if with_steps else None, len(reps), {
                            "compiles": comp[last], "compiles_new": d_comp, "steps": d_step,
                            "counter": "UncachedCompile" if use_uncached else "CompileTime TotalSamples",
                            "reports": len(reps)})]
