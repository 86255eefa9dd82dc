"""A fine-tune whose first logged loss is an untrained model's: the pretrained weights were never loaded.

A model that predicts uniformly over its vocabulary has cross-entropy ln(vocab size): 10.4 for 32k tokens,
11.8 for 128k, 11.9 for 152k. A pretrained language model starts far below that on text (1-4). When the log
says the run starts from pretrained weights (`loads` in rules/verdict.yaml `untrained_start`: an initial load
path, checkpoint shards being loaded, a LoRA/SFT fine-tune) and prints the vocabulary size, and the first
logged loss is still at least `ratio` x ln(vocab) (and `min_loss`), the weights the run trains are freshly
initialised: a load that was skipped (an existing but empty checkpoint folder that made a trainer take the
resume branch), weights loaded into another module, or a config that built a new model. The run looks
healthy: the loss falls, from the wrong place.

Only when no error finding explains the run. Texts: rules/detectors.yaml `untrained_start`.
"""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

HEAD_BYTES = 4 << 20    # the load and vocabulary lines come before training (as metrics.Thresholds.context_bytes)


class UntrainedStart:
    """Collects the cues (a pretrained load, the vocabulary size) from the blocks until both are seen."""

    def __init__(self) -> None:
        self.spec: Optional[dict[str, Any]] = None     # read on the first block: the scan's data is in place then
        self._loads: Any = None
        self._vocab: Any = None
        self.load_line: Optional[int] = None
        self.vocab: Optional[int] = None
        self._seen = 0      # bytes looked at: the cues are start-up lines, read only in the log's head

    def feed(self, view: bytes, line_base: int) -> None:
        if self.spec is None:
            self.spec = verdict_spec().get("untrained_start") or {}
            if self.spec:
                self._loads, self._vocab = re.compile(self.spec["loads"].encode()), re.compile(self.spec["vocab"].encode())
        if self._loads is None or (self.load_line is not None and self.vocab is not None) or self._seen > HEAD_BYTES:
            return
        self._seen += len(view)
        if self.load_line is None:
            m = self._loads.search(view)
            if m:
                self.load_line = line_base + view.count(b"\n", 0, m.start())
        if self.vocab is None:
            m = self._vocab.search(view)
            if m:
                self.vocab = int(next(g for g in m.groups() if g))

    def finding(self, records: list[Any], findings: list[Finding], lang: Optional[str]) -> Optional[Finding]:
        if (not self.spec or self.load_line is None or not self.vocab or self.vocab < 2
                or any(f.severity == "error" for f in findings)):
            return None
        first = next((r for r in records if r.loss is not None and math.isfinite(r.loss)), None)
        if first is None or getattr(first, "rl", False):
            return None
        uniform = math.log(self.vocab)
        if first.loss < max(float(self.spec["ratio"]) * uniform, float(self.spec["min_loss"])):
            return None
        from llmtriage.detect.loss_above_uniform import above_uniform   # deferred: as the observers
        if above_uniform(first.loss, self.vocab):       # far above a uniform guess: a scaled loss, not fresh weights
            return None
        entry = detector_texts()["untrained_start"]
        values = {"loss": f"{first.loss:g}", "at": first.at, "line": first.line, "vocab": self.vocab,
                  "uniform": f"{uniform:.2f}", "load_line": self.load_line}
        return detector_finding(entry, detector_text(entry, lang), values, line=first.line, default_priority=50,
                                captures={k: str(v) for k, v in values.items()})
