"""A language model whose loss stays at ln(vocab size) while it trains: it learns nothing beyond a uniform guess.

A model that predicts every token of its vocabulary with the same probability scores a cross-entropy of
ln(vocab size): 10.4 for 32k tokens, 11.8 for 128k, 11.9 for 152k. Training from scratch leaves that level within
the first hundred or so updates, even at a warm-up learning rate: the unigram statistics alone take the loss down
by several nats. A run whose every record sits in a narrow band around ln(V) (`low` .. `high` x ln(V), none below
it) for >= `min_records` records over >= `min_span` steps, and whose later records are no lower than its first
(`drop`), updates its weights (the grad norm is not 0: `metric-zero-grad` reads that case) without the updates
reaching what the loss measures: optimizer state that is not the model's parameters (a precision-aware optimizer's
main weights never copied back), gradients reduced into buffers the optimizer does not read, outputs cut off from
the parameters. Category no-grad: nothing is trained.

Only when no error finding explains the run (a `metric-loss-stuck-from-start` over a longer span, weights that were
never loaded, ...), and only with the vocabulary size printed (detect/head_cues.py `vocab`). Thresholds: rules/verdict.yaml
`loss_at_uniform`; texts: rules/detectors.yaml `loss_at_uniform`.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from llmtriage.detect.head_cues import HeadCues
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2]


def loss_at_uniform(cues: HeadCues, records: list[Any], findings: list[Finding], lang: Optional[str]) -> Optional[Finding]:
    spec = verdict_spec().get("loss_at_uniform") or {}
    vocab = cues.number("vocab")
    if not spec or vocab < 2 or any(f.severity == "error" for f in findings):
        return None
    recs = [r for r in records if r.loss is not None and math.isfinite(r.loss)]
    if len(recs) < int(spec["min_records"]) or any(getattr(r, "rl", False) for r in recs):
        return None
    uniform = math.log(vocab)
    lo, hi = float(spec["low"]) * uniform, float(spec["high"]) * uniform
    if not all(lo <= r.loss <= hi for r in recs):
        return None
    first, last = recs[0], recs[-1]
    if first.step is not None and last.step is not None:
        if last.step - first.step < int(spec["min_span"]):
            return None
    elif len(recs) < 2 * int(spec["min_records"]):
        return None
    k = max(2, len(recs) // 4)
    early, late = _median([r.loss for r in recs[:k]]), _median([r.loss for r in recs[-k:]])
    if late < float(spec["drop"]) * early:
        return None         # the loss is leaving the uniform level: training has begun
    grads = [r.grad_norm for r in recs if r.grad_norm is not None and math.isfinite(r.grad_norm)]
    if grads and max(grads) <= 0:
        return None         # nothing moves at all: the zero-gradient detectors name it
    entry = detector_texts()["loss_at_uniform"]
    values = {"lo": f"{min(r.loss for r in recs):g}", "hi": f"{max(r.loss for r in recs):g}", "n": len(recs),
              "from": first.at, "to": last.at, "line": first.line, "last_line": last.line, "vocab": vocab,
              "uniform": f"{uniform:.2f}", "grad_norm": f"{grads[-1]:g}" if grads else "-"}
    return detector_finding(entry, detector_text(entry, lang), values, line=first.line, last_line=last.line,
                            count=len(recs), default_priority=44)
