"""An RL run whose rollout engine does not compute the trainer's policy (silent failure).

RL frameworks that generate with vLLM/SGLang and train with FSDP/Megatron log how far the rollout engine's
log-probabilities of the sampled tokens are from the trainer's own recomputation: slime's
`train_rollout_logprob_abs_diff`, verl's `training/rollout_probs_diff_mean`. With the same weights and
dtype they agree to about 1e-2 (a little more for MoE routing). When the gap sits at 0.1 or more on every
logged step, the engine is not running the weights the trainer updates: a weight conversion or sync between
the training backend and the rollout engine that the installed versions get wrong (an outdated
megatron-core/mbridge, an SGLang/vLLM release with a weight-loading bug), or another dtype. Every update is
then computed for samples of another policy; the rewards stay flat and the run finishes without an error.

Records: any line carrying one of the gap metrics (and optionally a reward). Thresholds: rules/verdict.yaml
`rl_logprob_gap`; texts: rules/detectors.yaml `rl_logprob_gap`. Only when no error finding is there already.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import fmt, median
from llmtriage.detect.rl_divergence import NUMBER, EndJudged, finite_number
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_KEEP = 2048    # records kept (first ones); the count and the last record are kept over all of them

# (a key's closing quote, a separator, then rl_divergence's number: a float, nan or inf, quoted or not)
_NUM = rb"""['"]?\s*[:=]?\s*""" + NUMBER
# the metric names the frameworks print for the rollout-vs-trainer gap; the unit (log-prob or prob) picks the limit
_GAP = re.compile(rb"""(train_rollout_logprob_abs_diff|rollout_probs_diff_mean)['"]?""" + _NUM)
_REWARD = re.compile(rb"""(?:rollout/raw_reward|critic/score/mean|['"]reward['"])['"]?""" + _NUM)   # not eval/


class RlLogprobGapTracker(EndJudged):
    """Collects (line, metric, gap, reward) per record carrying a rollout/trainer gap; judges at the end."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.recs: list[tuple[int, bytes, float]] = []
        self.rewards: list[float] = []
        self.count = 0
        self.last: Optional[tuple[int, bytes, float]] = None

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        gaps = b"rollout_logprob_abs_diff" in view or b"rollout_probs_diff_mean" in view
        if not gaps and (not self.count or (b"reward" not in view and b"score/mean" not in view)):
            return
        for i, line in enumerate(view.split(b"\n")):
            r = _REWARD.search(line) if b"reward" in line or b"score/mean" in line else None
            reward = finite_number(r)
            if reward is not None and len(self.rewards) < _KEEP:
                self.rewards.append(reward)
            m = _GAP.search(line) if gaps else None
            gap = finite_number(m, 2)
            if m is None or gap is None:
                continue
            rec = (line_base + i, m.group(1), abs(gap))
            self.count += 1
            self.last = rec
            if len(self.recs) < _KEEP:
                self.recs.append(rec)

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_logprob_gap")
        if not spec or self.count < int(spec["min_records"]) or self.last is None:
            return None
        if any(f.severity == "error" for f in findings):
            return None
        metric = self.recs[0][1]
        limit = float(spec["prob_min"] if metric == b"rollout_probs_diff_mean" else spec["logprob_min"])
        gaps = [r[2] for r in self.recs if r[1] == metric]
        above = sum(1 for g in gaps if g >= limit)
        if len(gaps) < int(spec["min_records"]) or above < float(spec["share"]) * len(gaps) or median(gaps) < limit:
            return None
        entry = detector_texts()["rl_logprob_gap"]
        text = detector_text(entry, self.lang)
        rewards = self.rewards
        flat = None
        if len(rewards) >= int(spec["min_records"]):
            q = max(2, len(rewards) // 4)
            early, late = median(rewards[:q]), median(rewards[-q:])
            if late - early <= float(spec["reward_rise"]) * max(abs(early), 1e-9):
                flat = (early, late)
        values = {"metric": metric.decode(), "median": fmt(median(gaps)), "limit": fmt(limit),
                  "above": str(above), "records": str(len(gaps)), "first": str(self.recs[0][0]),
                  "reward_early": fmt(flat[0]) if flat else None, "reward_late": fmt(flat[1]) if flat else None}
        return detector_finding(entry, text, values, line=self.recs[0][0], last_line=self.last[0],
                                count=self.count, default_priority=48,
                                captures={k: v for k, v in values.items() if v is not None})
