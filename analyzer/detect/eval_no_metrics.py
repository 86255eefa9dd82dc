"""Evaluations that measured nothing: the HF Trainer's eval records carry only their timing (silent failure).

`Trainer.evaluate` logs one record per evaluation: `{'eval_loss': ..., 'eval_accuracy': ..., 'eval_runtime': ...,
'eval_samples_per_second': ..., 'eval_steps_per_second': ..., 'epoch': ...}`. The loss is there only when the
Trainer found labels in the evaluation batches: it looks for the names in `label_names`, by default the label
arguments of the model's `forward`. A model whose `forward` takes `*args, **kwargs` (a PeftModel built without
`task_type`, a custom wrapper) has none, so the Trainer never reads a loss or labels in `prediction_step`,
`compute_metrics` is never called, and every evaluation prints its runtime alone. Training still computes its
loss from the batch, so the run trains and finishes without an error, and model selection, early stopping and
the reported scores silently have nothing to go on.

Records: lines carrying `eval_runtime` (quoted key). A record with no other `eval_*` key than the timing ones is
empty. Thresholds: rules/verdict.yaml `eval_no_metrics`; texts: rules/detectors.yaml `eval_no_metrics`. Judged
at the end, only when every evaluation record was empty and no error finding is there already.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.rl_divergence import EndJudged
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

# the keys of an evaluation record, quoted as a dict or JSON prints them
_KEY = re.compile(rb"""['"](eval_[A-Za-z0-9_/@.-]{1,60})['"]\s*:""")
_TIMING = {b"eval_runtime", b"eval_samples_per_second", b"eval_steps_per_second", b"eval_model_preparation_time"}


class EvalNoMetricsTracker(EndJudged):
    """Counts the evaluation records with timing only and those with a measurement; judges at the end."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.empty: list[int] = []      # lines of the records with timing only (the first ones kept, the count)
        self.count = 0
        self.last = 0
        self.measured = 0               # records with eval_loss or any eval metric

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if b"eval_runtime" not in view:
            return
        for i, line in enumerate(view.split(b"\n")):
            if b"eval_runtime" not in line:
                continue
            keys = set(_KEY.findall(line))
            if b"eval_runtime" not in keys:
                continue
            if keys <= _TIMING:
                self.count += 1
                self.last = line_base + i
                if len(self.empty) < 64:
                    self.empty.append(line_base + i)
            else:
                self.measured += 1

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("eval_no_metrics")
        if not spec or self.measured or self.count < int(spec["min_evals"]):
            return None
        if any(f.severity == "error" for f in findings):
            return None
        entry = detector_texts()["eval_no_metrics"]
        values = {"evals": str(self.count), "first": str(self.empty[0]), "last": str(self.last)}
        return detector_finding(entry, detector_text(entry, self.lang), values, line=self.empty[0],
                                last_line=self.last, count=self.count, default_priority=46)
