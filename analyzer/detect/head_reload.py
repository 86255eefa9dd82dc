"""A trained task head lost on reload: "newly initialized" again after training, then far worse scores.

transformers prints "Some weights of XForSequenceClassification were not initialized from the model checkpoint
at <base> and are newly initialized: ['score.weight']" whenever it builds a task head the checkpoint lacks. At
the start of a fine-tune that is expected (rule `hf-head-newly-initialized`, info). A run that trains, finishes
(`train_runtime`) and then builds the model again to predict prints it once more, and then the trained head must
come from the saved adapter or checkpoint (PEFT's modules_to_save). When it does not (the head saved under
another key, not saved at all, or the base model reloaded without the adapter), the model predicts with a random
head: the scores printed after the reload fall far below the same metric of the last evaluation during training
(f1_macro 0.13 after, eval_f1_macro 0.51 before).

So, with the rule's warning printed again after the finish line, a metric printed after that last warning
("f1_macro=0.1303", "accuracy: 0.21") whose name is an evaluation metric of the last Trainer eval record before
the finish (eval_ prefix dropped) and whose value is at most `ratio` x the record's value (the record's at least
`min_value`) gives `metric-head-reinitialised-on-reload` (state-dict-keys; rules/verdict.yaml `head_reload`, texts
in rules/detectors.yaml `head_reload`). A reload whose scores match the training-time ones, or no scores after it,
say nothing. Judged at the end, only when no error finding explains the run.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.rl_divergence import EndJudged
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_RULE = "hf-head-newly-initialized"
_METRIC = rb"(?:f1|acc|accuracy|precision|recall|auc|roc_auc|matthews_correlation|exact_match|mcc)"
# a Trainer eval record's metric: 'eval_f1_macro': 0.5104
_EVAL = re.compile(rb"""['"]eval_(\w{0,40}?""" + _METRIC + rb"""\w{0,40}?)['"]\s*:\s*([0-9]*\.?[0-9]+)""")
# a metric printed in free text after the finish: f1_macro=0.1303, accuracy: 0.21
_FREE = re.compile(rb"(?<![\w.'\"])(?:eval_)?(\w{0,40}?" + _METRIC + rb"\w{0,40}?)\s*[=:]\s*([0-9]*\.[0-9]+)")
_FINISH = re.compile(rb"""['"]train_runtime['"]\s*:""")
_KEEP = 64


class HeadReloadTracker(EndJudged):
    """The last eval record's metrics before the finish line, and metrics printed after it."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.evals: dict[str, float] = {}
        self.eval_line = 0
        self.finish_line = 0
        self.after: list[tuple[int, str, float]] = []

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if not self.finish_line and b"eval_" not in view and b"train_runtime" not in view:
            return
        if self.finish_line and (len(self.after) >= _KEEP or _FREE.search(view) is None):
            return      # after the finish only blocks holding a metric are read, up to _KEEP of them
        for i, line in enumerate(view.split(b"\n")):
            if not self.finish_line:
                if b"'eval_" in line or b'"eval_' in line:
                    found = {k.decode(): float(v) for k, v in _EVAL.findall(line)}
                    if found:
                        self.evals, self.eval_line = found, line_base + i
                if _FINISH.search(line):
                    self.finish_line = line_base + i
                continue
            if len(self.after) < _KEEP and (b"=" in line or b":" in line):
                for k, v in _FREE.findall(line):
                    self.after.append((line_base + i, k.decode().removeprefix("eval_"), float(v)))

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("head_reload")
        if not spec or not self.finish_line or not self.evals or any(f.severity == "error" for f in findings):
            return None
        head = next((f for f in findings if f.rule_id == _RULE and f.count >= 2 and f.line < self.finish_line
                     and (f.last_line or 0) > self.finish_line), None)
        if head is None:
            return None
        for line, key, value in self.after:
            before = self.evals.get(key)
            if line > (head.last_line or 0) and before is not None and before >= float(spec["min_value"]) \
                    and value <= float(spec["ratio"]) * before:
                entry = detector_texts()["head_reload"]
                values = {"keys": head.captures.get("keys", ""), "model": head.captures.get("model", ""),
                          "reload": str(head.last_line), "metric": key, "after": f"{value:g}", "line": str(line),
                          "before": f"{before:g}", "eval_line": str(self.eval_line)}
                return detector_finding(entry, detector_text(entry, self.lang), values, line=head.last_line or line,
                                        last_line=line, default_priority=45)
        return None
