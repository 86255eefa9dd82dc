"""A fine-tune whose logged loss starts well above ln(vocab size): the loss is scaled, not measured per token.

Cross-entropy per token cannot exceed ln(vocab size) for long unless the model is confidently wrong, which a
pretrained language model on text is not: a uniform guess scores ln(V) (10.4 for 32k tokens, 11.9 for 152k,
12.5 for 256k). When a run that loads pretrained weights (`loads` of rules/verdict.yaml `untrained_start`) logs
its first `min_records` losses above `ratio` x ln(V) (or above `bound` when the log prints no vocabulary size),
the number is a sum, not a mean: the loss was normalised by the wrong count, typically the gradient-accumulation
change of transformers 4.46 (num_items_in_batch) meeting a framework that computes its own loss. The gradients
are inflated the same way, so the optimiser takes larger steps than configured. With such a transformers release
named in the log (`versions`) the finding is a dependency-mismatch, otherwise loss-suspicious.

Only when no error finding explains the run. The cues come from detect/head_cues.py; texts: rules/detectors.yaml
`loss_above_uniform`.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from llmtriage.detect.head_cues import HeadCues
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding


def loss_above_uniform(cues: HeadCues, records: list[Any], findings: list[Finding], lang: Optional[str]) -> Optional[Finding]:
    spec = verdict_spec().get("loss_above_uniform") or {}
    load_line, vocab, version = cues.line("loads"), cues.number("vocab"), cues.text("version")
    if not spec or load_line is None or any(f.severity == "error" for f in findings):
        return None
    n = int(spec["min_records"])
    head = [r for r in records if r.loss is not None and math.isfinite(r.loss)][:n]
    if len(head) < n or any(getattr(r, "rl", False) for r in head):
        return None
    bound = float(spec["ratio"]) * math.log(vocab) if vocab > 1 else float(spec["bound"])
    if min(r.loss for r in head) <= bound:
        return None
    entry = detector_texts()["loss_above_uniform"]
    text = dict(detector_text(entry, lang))
    if version is not None:
        text.update(detector_text(entry["version"], lang))
        entry = {**entry, "category": entry["version"]["category"]}
    values = {"loss": f"{head[0].loss:g}", "at": head[0].at, "line": head[0].line, "n": n,
              "bound": f"{bound:.1f}", "vocab": vocab or "", "version": version or "", "load_line": load_line}
    return detector_finding(entry, text, values, line=head[0].line, last_line=head[-1].line, default_priority=50)


def above_uniform(loss: float, vocab: int) -> bool:
    """The loss is far enough above ln(vocab) that it is no untrained model's (detect/untrained.py leaves it here)."""
    spec = verdict_spec().get("loss_above_uniform") or {}
    return bool(spec) and vocab > 1 and loss > float(spec["ratio"]) * math.log(vocab)
