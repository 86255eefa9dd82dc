"""Skipped optimizer steps and fp16 overflows, read into a `metrics.MetricTracker` (`self` below) block by block:
DeepSpeed's cumulative `step=N, skipped=K` counter, Megatron's per-interval `number of skipped
iterations` (with its loss scale, its `number of nan iterations` and whether the interval printed a
loss at all) and the frameworks' OVERFLOW / "Skipping step" lines with the scale they fell to.
"""
from __future__ import annotations

import math
from typing import Any

from llmtriage.engine.fastre import spans
from llmtriage.detect.metric_parse import has_loss, meg_nan_iterations, num, parse_skips, regexes

def line_bounds(view: bytes, pos: int) -> tuple[int, int]:
    ls = view.rfind(b"\n", 0, pos) + 1
    le = view.find(b"\n", pos)
    return ls, (len(view) if le < 0 else le)


DS_TRACE = 512      # DeepSpeed counters kept in order from the start (detect/scaler_settled.py reads them)


def scan_skips(self: Any, lines: bytes, view: bytes, line_base: int) -> None:
    """DeepSpeed `step=N, skipped=K` and Megatron `number of skipped iterations: K` lines."""
    if len(self.ds_trace) < DS_TRACE and b", skipped=" in view:
        pos = view.find(b", skipped=")
        while pos >= 0 and len(self.ds_trace) < DS_TRACE:
            ls, le = line_bounds(view, pos)
            got = parse_skips(view[ls:le])
            if got is not None and got[0] == "ds":
                self.ds_trace.append((got[1], got[2], line_base + lines.count(b"\n", 0, ls)))
            pos = view.find(b", skipped=", le)
    # DeepSpeed's counters are cumulative: only the block's last `skipped=` line matters
    pos = view.rfind(b", skipped=")
    while pos >= 0:
        ls, le = line_bounds(view, pos)
        got = parse_skips(view[ls:le])
        if got is not None and got[0] == "ds":
            self.ds_skips = (got[1], got[2], line_base + lines.count(b"\n", 0, ls))
            break
        pos = view.rfind(b", skipped=", 0, ls)
    pos = view.find(b"skipped iterations")    # Megatron: every interval counts
    last_ls = -1
    counted = nl = 0        # newlines before `counted`, counted incrementally (hits come in order)
    while pos >= 0:
        ls, le = line_bounds(view, pos)
        if ls != last_ls:
            last_ls = ls
            got = parse_skips(view[ls:le])
            if got is not None:
                nl += lines.count(b"\n", counted, ls)
                counted = ls
                line = line_base + nl
                kind, step, skipped, scale = got
                if kind == "ds":
                    self.ds_skips = (step, skipped, line)
                else:
                    prev = self.meg_last[0] if self.meg_last is not None else None
                    interval = step - prev if prev is not None and step > prev else max(skipped, 1)
                    if not self.meg_first_line:
                        self.meg_first_line = line
                    self.meg_iters += interval
                    self.meg_skipped += min(skipped, interval)
                    self.meg_tail_skipped = self.meg_tail_skipped + interval if skipped >= interval else 0
                    self.meg_last = (step, line)
                    text = view[ls:le]
                    if skipped < interval and not has_loss(text):
                        self.meg_noloss += 1
                        t = self.meg_noloss_tail
                        self.meg_noloss_tail = (t[0] + 1, t[1], t[2] + interval) if t else (1, line, interval)
                    else:
                        self.meg_noloss_tail = None
                    nan_iters = meg_nan_iterations(text)
                    if nan_iters:
                        self.meg_nan_iters += nan_iters
                        self.meg_nan_line = self.meg_nan_line or line
                if scale is not None:
                    self.last_scale = scale
                    self.min_scale = scale if self.min_scale is None else min(self.min_scale, scale)
        pos = view.find(b"skipped iterations", le)

def scan_overflows(self: Any, lines: bytes, view: bytes, line_base: int) -> None:
    counted = 0
    nl = 0
    last_ls = -1
    R = regexes()
    for start, _ in spans(R.OVERFLOW, R.overflow_raw, view):
        ls, le = line_bounds(view, start)
        if ls == last_ls:
            continue
        last_ls = ls
        nl += lines.count(b"\n", counted, ls)
        counted = ls
        line = line_base + nl
        self.overflows += 1
        if not self.overflow_first_line:
            self.overflow_first_line = line
        self.overflow_last_line = line
        s = R.SCALE_TO.search(view, ls, le)
        if s:
            v = num(s.group(1))
            if v is not None:
                self.last_scale = v
                self.min_scale = v if self.min_scale is None else min(self.min_scale, v)


RECOVERED_AFTER = 8     # finite records after the last non-finite one: the fp16 scaler's overflows passed


def scaler_recovered(t: Any, recs: list[Any]) -> bool:
    """Non-finite records that were the fp16 loss scaler's overflowing steps, survived: the log prints the
    scaler's overflow lines, and the last non-finite record is followed by >= RECOVERED_AFTER records, every
    one with a finite loss, up to the end (fairseq's `train_inner` average over an interval that held a skipped
    step reads inf; the epochs after it train normally). A run that stays NaN, or goes on NaN now and then to
    the end, is not this."""
    if not t.overflows:
        return False
    bad = [i for i, r in enumerate(recs) if (r.loss is not None and not math.isfinite(r.loss))
           or (r.grad_norm is not None and not math.isfinite(r.grad_norm))]
    after = recs[bad[-1] + 1:] if bad else []
    return len(after) >= RECOVERED_AFTER and all(r.loss is not None and math.isfinite(r.loss) for r in after)
