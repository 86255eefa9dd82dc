"""Weights reported newly initialised, then trained from a pretrained model's loss: the new keys were added modules.

transformers prints "Some weights of X were not initialized from the model checkpoint ... and are newly
initialized: [...]" for every parameter the checkpoint lacks. When those are the model's core weights (lm_head,
embeddings, decoder layers) the model is random and its first loss sits near ln(vocab size) (10.4 for 32k tokens);
when they are modules the run adds on purpose (a method's extra projections inside each layer, LoRA or prefix
weights, a value head) the pretrained model still works and the first logged loss is a pretrained model's (1-4).

So a rule of `rules` (rules/verdict.yaml `new_keys_trained`) whose line is followed by at least `min_records`
training records (finite, not RL) whose first loss is at most `ratio` x ln(vocab) (`bound` when the log prints
no vocabulary size), and whose last loss is not above the first, is judged a warning: the keys it names were
initialised for the run to train. A first loss near ln(vocab), a run that never trained, or a loss that rose
leave the error alone. Runs in the training observer before the verdict (detect/observers.py).
"""
from __future__ import annotations

import math
from typing import Any, Optional

from llmtriage.detect.spec import tr, verdict_spec
from llmtriage.findings import Finding


def new_keys_trained(findings: list[Finding], records: list[Any], vocab: int, lang: Optional[str]) -> None:
    spec = verdict_spec().get("new_keys_trained") or {}
    if not spec:
        return
    rules = set(spec["rules"])
    for f in findings:
        if f.rule_id not in rules or f.severity != "error" or f.judgement is not None:
            continue
        after = f.last_line or f.line
        recs = [r for r in records if r.line > after and r.loss is not None and math.isfinite(r.loss)
                and not getattr(r, "rl", False)]
        if len(recs) < int(spec["min_records"]):
            continue
        bound = float(spec["ratio"]) * math.log(vocab) if vocab > 1 else float(spec["bound"])
        first, last = recs[0], recs[-1]
        if first.loss > bound or last.loss > first.loss:
            continue
        reason = tr(spec["reason"], lang, loss=f"{first.loss:g}", at=first.at, line=first.line, n=len(recs),
                    last=f"{last.loss:g}", bound=f"{bound:.1f}")
        f.judgement = {"context": "new-keys-trained", "severity_was": f.severity, "reason": reason}
        f.severity = str(spec["severity"])
