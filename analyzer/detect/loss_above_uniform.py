"""A fine-tune whose logged loss starts well above ln(vocab size): the loss is scaled, not measured per token.

Cross-entropy per token cannot exceed ln(vocab size) for long unless the model is confidently wrong, which a
pretrained language model on text is not: a uniform guess scores ln(V) (10.4 for 32k tokens, 11.9 for 152k,
12.5 for 256k). When a run that loads pretrained weights (`loads` of rules/verdict.yaml `untrained_start`) logs
its first `min_records` losses above `ratio` x ln(V) (or above `bound` when the log prints no vocabulary size),
the number is a sum, not a mean: the loss was normalised by the wrong count, typically the gradient-accumulation
change of transformers 4.46 (num_items_in_batch) meeting a framework that computes its own loss. The gradients
are inflated the same way, so the optimiser takes larger steps than configured. With such a transformers release
named in the log (`versions`) the finding is a dependency-mismatch, otherwise loss-suspicious.

Only when no error finding explains the run. Texts: rules/detectors.yaml `loss_above_uniform`.
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

HEAD_BYTES = 4 << 20    # version lines come before training (as detect/untrained.py)


class LossAboveUniform:
    """Looks for a library version that scales the loss in the log's head; judges the first records at the end."""

    def __init__(self) -> None:
        self.spec: Optional[dict[str, Any]] = None
        self._versions: Any = None
        self.version: Optional[str] = None
        self._seen = 0

    def feed(self, view: bytes, line_base: int) -> None:
        if self.spec is None:
            self.spec = verdict_spec().get("loss_above_uniform") or {}
            if self.spec:
                self._versions = re.compile(self.spec["versions"].encode())
        if self._versions is None or self.version is not None or self._seen > HEAD_BYTES:
            return
        self._seen += len(view)
        m = self._versions.search(view)
        if m:
            self.version = m.group(0).decode("utf-8", "replace").strip()

    def finding(self, records: list[Any], findings: list[Finding], lang: Optional[str],
                load_line: Optional[int], vocab: Optional[int]) -> Optional[Finding]:
        if not self.spec or load_line is None or any(f.severity == "error" for f in findings):
            return None
        n = int(self.spec["min_records"])
        head = [r for r in records if r.loss is not None and math.isfinite(r.loss)][:n]
        if len(head) < n or any(getattr(r, "rl", False) for r in head):
            return None
        bound = float(self.spec["ratio"]) * math.log(vocab) if vocab and vocab > 1 else float(self.spec["bound"])
        if min(r.loss for r in head) <= bound:
            return None
        entry = detector_texts()["loss_above_uniform"]
        text = dict(detector_text(entry, lang))
        if self.version is not None:
            text.update(detector_text(entry["version"], lang))
            entry = {**entry, "category": entry["version"]["category"]}
        values = {"loss": f"{head[0].loss:g}", "at": head[0].at, "line": head[0].line, "n": n,
                  "bound": f"{bound:.1f}", "vocab": vocab or "", "version": self.version or "", "load_line": load_line}
        return detector_finding(entry, text, values, line=head[0].line, last_line=head[-1].line, default_priority=50)


def above_uniform(loss: float, vocab: int) -> bool:
    """The loss is far enough above ln(vocab) that it is no untrained model's (detect/untrained.py leaves it here)."""
    spec = verdict_spec().get("loss_above_uniform") or {}
    return bool(spec) and vocab > 1 and loss > float(spec["ratio"]) * math.log(vocab)
