"""metric-guard-skips-every-step: the trainer's own gradient guard throws away every optimizer step.

Many custom trainers (DiT / flow-matching code bases, RL and pre-training loops) guard the update: when
the gradient norm is NaN, inf or above a spike threshold they log it and skip `optimizer.step()`
("Step 1557: detected nan/inf/spiky gradient (norm=2.19); skipping optimizer step."). Now and then that is
the guard doing its job. When it fires on every step the run goes on printing losses and nothing trains,
and no exception is ever raised. The lines say which: a finite norm means the threshold sits below the
run's normal gradient level (too tight for this batch size or model: `no-grad`, nothing is trained); a
NaN/inf norm means the gradients themselves are broken on every step (`nan-loss`).

Evidence required (an occasional skip is the guard working, a healthy run): >= skip_min guard lines with
step numbers; >= COVER of the consecutive skip lines one step apart (the guard fires step after step, a
pasted excerpt may leave steps out); no logged training record between the first and the last skipped step
at a step that was not skipped (the guard let it through); and the skips reach the end of the log (no
logged training step after the last skipped one beyond one step). fp16 loss-scaler
overflows ("OVERFLOW! Skipping step", "Gradient overflow. Skipping step") are not this: they are read by
`metric_skips` and reported as fp16-overflow.
"""
from __future__ import annotations

import math
import re
from typing import Any

from llmtriage.detect.metric_anomaly import Anomaly, fmt

COVER = 0.9     # share of consecutive skip lines that are one step apart
MAX_KEPT = 100_000      # skipped step numbers kept (memory bound)

GATES = (b"ptimizer step", b"ptimiser step", b"ptimizer update", b"ptimiser update")
# the action, not a configuration echo ("skip optimizer step when grad norm > 2.0")
_GUARD = re.compile(rb"(?i)\bskipp(?:ing|ed)\s+(?:the\s+|this\s+)?optimi[sz]er\s+(?:step|update)\b")
_STEP = re.compile(rb"(?i)\b(?:step|iter(?:ation)?)\s*[:=#]?\s*(\d+)\b")
_NORM = re.compile(rb"(?i)(?:\b|_)norm\s*[=:]\s*([-+]?(?:nan|inf|[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?))")


def scan_guard(self: Any, lines: bytes, view: bytes, line_base: int) -> None:
    """Count the guard's skip lines of one block into the tracker (`guard`: a dict of running figures)."""
    g = self.guard
    counted = nl = 0
    for m in _GUARD.finditer(view):
        ls = view.rfind(b"\n", 0, m.start()) + 1
        le = view.find(b"\n", m.end())
        row = view[ls:le if le >= 0 else len(view)]
        nl += lines.count(b"\n", counted, ls)
        counted = ls
        s = _STEP.search(row, 0, m.start() - ls)
        n = _NORM.search(row)
        g["count"] += 1
        g["first_line"] = g["first_line"] or line_base + nl
        g["last_line"] = line_base + nl
        if s:
            step = int(s.group(1))
            if step in g["seen"]:
                continue        # the same step reported again (another rank, a repeated line)
            if len(g["seen"]) < MAX_KEPT:
                g["seen"].add(step)
            if g["prev"] is not None:
                g["pairs"] += 1
                g["next"] += step == g["prev"] + 1
            g["prev"] = step
            g["steps"] += 1
            g["lo"] = step if g["lo"] is None else min(g["lo"], step)
            g["hi"] = step if g["hi"] is None else max(g["hi"], step)
        if n:
            try:
                v = float(n.group(1))
            except ValueError:
                continue
            if math.isfinite(v):
                g["finite"] += 1
                g["norm_min"] = v if g["norm_min"] is None else min(g["norm_min"], v)
                g["norm_max"] = v if g["norm_max"] is None else max(g["norm_max"], v)
            else:
                g["nonfinite"] += 1


def new_guard() -> dict[str, Any]:
    return {"count": 0, "steps": 0, "lo": None, "hi": None, "first_line": 0, "last_line": 0,
            "seen": set(), "prev": None, "pairs": 0, "next": 0,
            "finite": 0, "nonfinite": 0, "norm_min": None, "norm_max": None}


def guard_skips(t: Any, found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly when the guard skipped (nearly) every step to the end of the log; nothing when another
    detector already names an error."""
    g = t.guard
    if g["count"] < t.th.skip_min or g["steps"] < t.th.skip_min or any(a.severity == "error" for a in found):
        return []
    lo, hi = g["lo"], g["hi"]
    span = hi - lo + 1
    if g["next"] < COVER * g["pairs"]:
        return []       # skips here and there: the guard doing its job
    seen = g["seen"]
    if len(seen) < MAX_KEPT and any(r.step is not None and lo <= r.step <= hi and r.step not in seen
                                    for r in t.records()):
        return []       # a logged step inside the span that the guard let through
    last = t.last_step
    if last is not None and last > hi + 1:
        return []       # training steps went on after the last skip: the guard let them through
    broken = g["nonfinite"] > g["finite"]
    return [Anomaly("guard_skip", "nan-loss" if broken else "no-grad", "error", g["first_line"], g["last_line"],
                    hi, g["count"], {
                        "skipped": g["steps"], "lo": lo, "hi": hi, "span": span,
                        "norm_min": fmt(g["norm_min"]) if g["norm_min"] is not None and not broken else None,
                        "norm_max": fmt(g["norm_max"]) if g["norm_max"] is not None and not broken else None,
                        "nonfinite": g["nonfinite"] if broken else None})]
