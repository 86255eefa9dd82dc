"""An RL run whose gradient norm exploded once and whose reward never came back (silent failure).

GRPO/PPO trainers log the gradient norm and the mean reward of every step on the same line: TRL's dicts
({'grad_norm': .., 'reward': ..}), verl's step lines (actor/grad_norm, critic/score/mean), slime's
(train/grad_norm with rollout/raw_reward), tqdm postfixes of smaller trainers (grad_norm=.., avg_reward=..).
In a healthy run the norm stays within a small factor of its median. When one update blows up (a norm
hundreds of times the median: too high a learning rate or too weak clipping for this stage, a batch of
degenerate rollouts, a loss spike from a stale log-prob) the policy is pushed far away in one step; the run
goes on, but the reward falls and stays below the level it had reached. Nothing crashes and the loss soon
looks normal again, so the only trace is this pair of series.

Judged at the end: a finite norm >= `factor` x the median of the norms before it and >= `grad_min`, after
>= `warm` records, followed by >= `min_after` records whose later half has a median reward <= (1 - `drop`) x
the median of the rewards just before the spike. Thresholds: rules/verdict.yaml `rl_grad_blowup`; texts:
rules/detectors.yaml `rl_grad_blowup`. Only when no error finding is there already.
"""
from __future__ import annotations

import bisect
import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import fmt, median
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.rl_divergence import NUMBER, EndJudged, finite_number
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_KEEP = 4096    # records kept (the first ones): enough for the spike and the reward after it

_SEP = rb"""['"]?\s*[:=]\s*"""
_GRAD = re.compile(rb"""(?<![\w.])(?:actor/|train/)?grad_norm""" + _SEP + NUMBER)
_REWARD = re.compile(rb"""(?:critic/score/mean|rollout/raw_reward|(?<![\w/])avg_reward|(?<![\w/])reward_mean|"""
                     rb"""['"]reward)""" + _SEP + NUMBER)


class RlGradBlowupTracker(EndJudged):
    """Collects (line, grad_norm, reward) per record carrying both; judges the series at the end."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.recs: list[tuple[int, float, float]] = []

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        # every reward key of _REWARD holds "reward" or "score/mean": a block with neither (a metric-dense log of a
        # run that is not RL) is skipped without splitting it into lines
        if (b"grad_norm" not in view or (b"reward" not in view and b"score/mean" not in view)
                or len(self.recs) >= _KEEP):
            return
        for i, line in enumerate(view.split(b"\n")):
            if b"grad_norm" not in line:
                continue
            grad, reward = finite_number(_GRAD.search(line)), finite_number(_REWARD.search(line))
            if grad is None or reward is None:
                continue
            self.recs.append((line_base + i, abs(grad), reward))
            if len(self.recs) >= _KEEP:
                return

    def _spike(self, spec: dict[str, Any]) -> Optional[tuple[int, float]]:
        """Index of the first exploding norm and the median norm before it, or None."""
        warm, factor, floor = int(spec["warm"]), float(spec["factor"]), float(spec["grad_min"])
        seen = sorted(r[1] for r in self.recs[:warm])      # the norms before record k, kept sorted
        for k in range(warm, len(self.recs)):
            n = len(seen)
            before = seen[n // 2] if n % 2 else (seen[n // 2 - 1] + seen[n // 2]) / 2
            g = self.recs[k][1]
            if g >= floor and g >= factor * max(before, 1e-12):
                return k, before
            bisect.insort(seen, g)
        return None

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_grad_blowup")
        recs = self.recs
        if not spec or len(recs) < int(spec["min_records"]):
            return None
        if any(f.severity == "error" for f in findings):
            return None
        hit = self._spike(spec)
        if hit is None:
            return None
        k, before = hit
        after = recs[k + 1:]
        if len(after) < int(spec["min_after"]):
            return None
        pre = median([r[2] for r in recs[max(0, k - int(spec["pre"])):k]])
        late = median([r[2] for r in after[len(after) // 2:]])
        if pre <= 0 or late > (1.0 - float(spec["drop"])) * pre:
            return None
        entry = detector_texts()["rl_grad_blowup"]
        text = detector_text(entry, self.lang)
        values = {"grad": fmt(recs[k][1]), "grad_median": fmt(before), "line": str(recs[k][0]),
                  "times": fmt(recs[k][1] / max(before, 1e-12)), "reward_pre": fmt(pre), "reward_late": fmt(late),
                  "records": str(len(after))}
        return detector_finding(entry, text, values, line=recs[k][0], last_line=recs[-1][0], count=len(after) + 1,
                                default_priority=54)
