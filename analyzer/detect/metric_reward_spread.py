"""RL records whose rewards never had any spread: nothing to learn from (rules/detectors.yaml `reward_flat`).

GRPO-style trainers turn each group's rewards into advantages relative to the group (reward minus the
group mean, over the group's std). When every group of every logged step scored all its completions the
same - TRL's `reward_std` 0 / `frac_reward_zero_std` 1, a reward function that returns 0 for everything,
every completion truncated or failing the format check - every advantage is 0 and the policy term has no
gradient, whatever grad_norm a KL or entropy term still prints. Read only when every RL record of a long
enough run says so: a few flat groups are normal on easy or hard prompts. The grad_norm-0 readings
(`metric_detect._zero_lr_grad`) go first; this is the case where the gradient norm is not 0 or not logged.
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly
from llmtriage.detect.metrics import MetricTracker, Record


def reward_flat(t: MetricTracker, recs: list[Record]) -> list[Anomaly]:
    rl = [r for r in recs if r.rl]
    if t.sampled or len(rl) < t.th.zero_tail_records or not all(r.flat_reward for r in rl):
        return []
    first, last = rl[0], rl[-1]
    return [Anomaly("reward_flat", "no-grad", "error", first.line, last.line, first.step, len(rl),
                    {"records": len(rl), "from": first.at, "to": last.at})]
