"""RL rollouts that turned to garbage in one step: every response runs to the length cap, the reward drops to ~0.

RL trainers log, per step, the mean reward and the share of responses that stopped at the generation cap: SkyRL's
`reward/avg ... stop_reason/length_frac`, verl's `critic/score/mean ... response_length/clip_ratio`, TRL's
`'reward' ... 'completions/clipped_ratio'`, OpenRLHF's `reward ... truncated_ratio`. When the rollout engine is
handed corrupted weights (a weight sync or reload that scrambles some layers: a trainer/engine version pair whose
weight-loading paths disagree, a sleep/wake or conversion bug) the very next rollouts are token soup that never emits
EOS: the capped share jumps from a few percent to ~100% and the reward falls to ~0 between two consecutive steps,
although the policy itself only moved by one small update. A policy that collapses by itself (too high a learning
rate) degrades over several steps, with its gradient norm and KL blowing up first; that is not this detector.

Judged at the end: after >= `warm` healthy records (capped share <= `healthy_cap`), one record is healthy (capped
share <= `healthy_cap`, reward >= `keep` x the median reward so far, KL on the line, if any, <= `kl_max`, gradient
norm on the line, if any, <= `grad_factor` x the median before) and the next one and every later record (>=
`min_after` of them) are collapsed (capped share >= `cap` and reward <= `drop` x that median). Thresholds:
rules/verdict.yaml `rl_rollout_garbage`; texts: rules/detectors.yaml `rl_rollout_garbage`. Only when no error
finding is there already.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import fmt, median
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.rl_divergence import NUMBER, EndJudged, finite_number
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_KEEP = 4096    # records kept (the first ones)

_SEP = rb"""['"]?\s*[:=]\s*"""
_CAP_KEYS = (b"length_frac", b"clip_ratio", b"clipped_ratio", b"truncated_ratio")
_CAP = re.compile(rb"""(?:stop_reason/length_frac|response_length/clip_ratio|completions/clipped_ratio|"""
                  rb"""(?<![\w/])truncated_ratio)""" + _SEP + NUMBER)
_REWARD = re.compile(rb"""(?:critic/score/mean|reward/avg|reward/mean|rollout/raw_reward|(?<![\w/])avg_reward|"""
                     rb"""(?<![\w/])reward_mean|['"]reward['"]|(?<![\w/'"])reward)""" + _SEP + NUMBER)
_KL = re.compile(rb"""(?:(?<![\w/])|actor/|policy/)(?:kl|ppo_kl|kl_loss)""" + _SEP + NUMBER)
_GRAD = re.compile(rb"""(?<![\w.])(?:actor/|train/|policy/)?grad_norm""" + _SEP + NUMBER)


class RlRolloutGarbageTracker(EndJudged):
    """Collects (line, reward, capped share, kl, grad_norm) per record carrying a reward and a capped share."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.recs: list[tuple[int, float, float, Optional[float], Optional[float]]] = []

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if len(self.recs) >= _KEEP or b"reward" not in view and b"score/mean" not in view:
            return
        if not any(k in view for k in _CAP_KEYS):
            return
        for i, line in enumerate(view.split(b"\n")):
            if not any(k in line for k in _CAP_KEYS):
                continue
            cap, reward = finite_number(_CAP.search(line)), finite_number(_REWARD.search(line))
            if cap is None or reward is None or not 0.0 <= cap <= 1.0:
                continue
            self.recs.append((line_base + i, reward, cap, finite_number(_KL.search(line)), finite_number(_GRAD.search(line))))
            if len(self.recs) >= _KEEP:
                return

    def _collapse(self, spec: dict[str, Any]) -> Optional[tuple[int, float]]:
        """Index of the first collapsed record and the median reward before it, or None."""
        recs, warm = self.recs, int(spec["warm"])
        healthy, cap, drop, keep = (float(spec["healthy_cap"]), float(spec["cap"]), float(spec["drop"]),
                                    float(spec["keep"]))
        for k in range(max(warm, 1), len(recs)):
            before = recs[:k]
            pre = median([r[1] for r in before])
            if pre <= 0 or recs[k][2] < cap or recs[k][1] > drop * pre:
                continue                        # not a collapsed record
            prev = before[-1]
            if any(r[2] > healthy for r in before[-warm:]) or prev[1] < keep * pre:
                return None                     # the first collapsed record decides: it must follow healthy ones
            if prev[3] is not None and abs(prev[3]) > float(spec["kl_max"]):
                return None                     # the policy had already run away from the reference
            grads = [r[4] for r in before[:-1] if r[4] is not None]
            if prev[4] is not None and grads and prev[4] > float(spec["grad_factor"]) * max(median(grads), 1e-12):
                return None                     # a gradient blow-up came first (rl_grad_blowup's story)
            if all(r[2] >= cap and r[1] <= drop * pre for r in recs[k:]):
                return k, pre
            return None
        return None

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_rollout_garbage")
        recs = self.recs
        if not spec or len(recs) < int(spec["warm"]) + int(spec["min_after"]):
            return None
        if any(f.severity == "error" for f in findings):
            return None
        hit = self._collapse(spec)
        if hit is None:
            return None
        k, pre = hit
        after = recs[k:]
        if len(after) < int(spec["min_after"]):
            return None
        entry = detector_texts()["rl_rollout_garbage"]
        text = detector_text(entry, self.lang)
        values = {"line": str(recs[k][0]), "reward_pre": fmt(pre), "reward_after": fmt(recs[k][1]),
                  "cap_pre": fmt(recs[k - 1][2]), "cap_after": fmt(recs[k][2]), "records": str(len(after)),
                  "reward_last": fmt(recs[-1][1])}
        return detector_finding(entry, text, values, line=recs[k][0], last_line=recs[-1][0], count=len(after),
                                default_priority=54)
