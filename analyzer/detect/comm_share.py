"""metric-allreduce-dominates-step: DeepSpeed's wall-clock breakdown shows the gradient all-reduce taking most of each step.

With `wall_clock_breakdown: true` DeepSpeed prints, per micro-step and per optimizer step, the time of each part of
the engine's step in milliseconds (deepspeed/utils/timer.py names; older releases spell them out):

    time (ms) | fwd_microstep: 2213.33 | bwd_microstep: 4467.93 | bwd_inner_microstep: 2457.36 |
                bwd_allreduce_microstep: 24665.05 | step_microstep: 651.91
    rank=0 time (ms) | forward: 435.67 | backward: 744.11 | backward_inner: 513.92 | backward_allreduce: 230.11 | step: 0.98

`bwd` (`backward`) times the whole backward pass: `bwd_inner` (the autograd pass) plus `bwd_allreduce` (the
engine's gradient reduction across data-parallel ranks). The step is forward + backward + optimizer step; the
backward is taken as the larger of `bwd` and `bwd_inner + bwd_allreduce` (a breakdown whose timers do not nest
still counts its reduction once). When the reduction is `COMM_SHARE` or more of the step on the median of at
least `MIN_BREAKDOWNS` breakdowns (the first, warm-up, is left out) and at least `COMM_MIN_MS`, the GPUs spend
most of every step waiting for the network: a data-parallel or ZeRO job spread over nodes whose interconnect
is too slow for it (no RDMA, a single NIC, TCP fallback), or too many small reduction buckets. The job does not
fail; it runs at a fraction of the speed its GPUs allow.

Only the engine's timers are read, in their own unit (the `time (ms)` header). Reads nothing else.
"""
from __future__ import annotations

import re
from typing import Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median

COMM_SHARE = 0.5
COMM_MIN_MS = 200.0
MIN_BREAKDOWNS = 3
KEEP = 2048     # breakdowns kept per kind (the head is enough to judge; bounds memory on huge logs)

_GATE = re.compile(rb"time \(ms\) \|[^\n]*allreduce")
_FIELD = re.compile(rb"\|\s*([a-z_]+):\s*([0-9]{1,12}(?:\.[0-9]+)?)")
# timer names: (forward, backward, backward inner, backward all-reduce, step), per micro-step and per optimizer step
_NAMES = {
    "micro": (("fwd_microstep", "forward_microstep"), ("bwd_microstep", "backward_microstep"),
              ("bwd_inner_microstep", "backward_inner_microstep"),
              ("bwd_allreduce_microstep", "backward_allreduce_microstep"), ("step_microstep",)),
    "global": (("fwd", "forward"), ("bwd", "backward"), ("bwd_inner", "backward_inner"),
               ("bwd_allreduce", "backward_allreduce"), ("step",)),
}


def _get(fields: dict[str, float], names: tuple[str, ...]) -> Optional[float]:
    return next((fields[n] for n in names if n in fields), None)


class CommShareTracker:
    """Reads DeepSpeed wall-clock breakdowns block by block; `detect()` gives the anomaly."""

    def __init__(self) -> None:
        # per kind: (line, step ms, all-reduce ms)
        self.seen: dict[str, list[tuple[int, float, float]]] = {"micro": [], "global": []}

    def feed(self, lines: bytes, line_base: int) -> None:
        if b"time (ms)" not in lines or _GATE.search(lines) is None:
            return
        for i, raw in enumerate(lines.split(b"\n")):
            if len(raw) > 4096 or _GATE.search(raw) is None:
                continue
            fields = {k.decode(): float(v) for k, v in _FIELD.findall(raw)}
            for kind, (fw_n, bw_n, inner_n, ar_n, st_n) in _NAMES.items():
                fw, bw, ar = _get(fields, fw_n), _get(fields, bw_n), _get(fields, ar_n)
                if fw is None or bw is None or ar is None:
                    continue
                inner, st = _get(fields, inner_n) or 0.0, _get(fields, st_n) or 0.0
                step = fw + max(bw, inner + ar) + st
                if step > 0 and len(self.seen[kind]) < KEEP:
                    self.seen[kind].append((line_base + i, step, ar))
                break

    def detect(self) -> list[Anomaly]:
        """The anomaly when the all-reduce takes COMM_SHARE or more of the median step."""
        recs = max((v[1:] for v in self.seen.values()), key=len)
        if len(recs) < MIN_BREAKDOWNS:
            return []
        shares = [ar / step for _, step, ar in recs]
        share, comm, step = median(shares), median([r[2] for r in recs]), median([r[1] for r in recs])
        if share < COMM_SHARE or comm < COMM_MIN_MS:
            return []
        return [Anomaly("comm_bound", "throughput-low", "error", recs[0][0], recs[-1][0], None, len(recs), {
            "comm_pct": f"{100 * share:.0f}", "comm_s": fmt(comm / 1000), "step_s": fmt(step / 1000),
            "compute_s": fmt(max(0.0, step - comm) / 1000), "breakdowns": len(recs),
            "low": f"{100 * min(shares):.0f}", "high": f"{100 * max(shares):.0f}"})]
