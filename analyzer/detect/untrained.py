"""A fine-tune whose first logged loss is an untrained model's: the pretrained weights were never loaded.

A model that predicts uniformly over its vocabulary has cross-entropy ln(vocab size): 10.4 for 32k tokens,
11.8 for 128k, 11.9 for 152k. A pretrained language model starts far below that on text (1-4). When the log
says the run starts from pretrained weights (`loads` in rules/verdict.yaml `untrained_start`: an initial load
path, checkpoint shards being loaded, a LoRA/SFT fine-tune) and prints the vocabulary size, and the first
logged loss is still at least `ratio` x ln(vocab) (and `min_loss`), the weights the run trains are freshly
initialised: a load that was skipped (an existing but empty checkpoint folder that made a trainer take the
resume branch), weights loaded into another module, or a config that built a new model. The run looks
healthy: the loss falls, from the wrong place.

Only when no error finding explains the run. The cues come from detect/head_cues.py; texts: rules/detectors.yaml
`untrained_start`.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from llmtriage.detect.head_cues import HeadCues
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding


def untrained_start(cues: HeadCues, records: list[Any], findings: list[Finding], lang: Optional[str]) -> Optional[Finding]:
    spec = verdict_spec().get("untrained_start") or {}
    load_line, vocab = cues.line("loads"), cues.number("vocab")
    if not spec or load_line is None or vocab < 2 or any(f.severity == "error" for f in findings):
        return None
    first = next((r for r in records if r.loss is not None and math.isfinite(r.loss)), None)
    if first is None or getattr(first, "rl", False):
        return None
    uniform = math.log(vocab)
    if first.loss < max(float(spec["ratio"]) * uniform, float(spec["min_loss"])):
        return None
    from llmtriage.detect.loss_above_uniform import above_uniform   # deferred: as the observers
    if above_uniform(first.loss, vocab):       # far above a uniform guess: a scaled loss, not fresh weights
        return None
    entry = detector_texts()["untrained_start"]
    values = {"loss": f"{first.loss:g}", "at": first.at, "line": first.line, "vocab": vocab,
              "uniform": f"{uniform:.2f}", "load_line": load_line}
    return detector_finding(entry, detector_text(entry, lang), values, line=first.line, default_priority=50,
                            captures={k: str(v) for k, v in values.items()})
