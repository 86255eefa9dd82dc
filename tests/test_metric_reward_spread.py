"""RL records whose group rewards never had any spread (detect/metric_reward_spread.py)."""
from __future__ import annotations

import llmtriage


def rec(step: int, std: float, grad: float = 0.03) -> str:
    return (f"{{'loss': 0.0001, 'grad_norm': {grad}, 'learning_rate': 1e-06, 'reward': 0.0, 'reward_std': {std}, "
            f"'kl': 0.002, 'completion_length': 512.0, 'epoch': {step / 1000:.3f}}}\n")


def errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_every_rl_record_without_reward_spread_trains_nothing():
    found = errors("".join(rec(s, 0.0) for s in range(1, 13)))
    assert [f.rule_id for f in found] == ["metric-rl-rewards-no-spread"] and found[0].category == "no-grad"
    assert found[0].action == "fix"


def test_some_groups_with_a_spread_or_a_short_run_are_normal():
    mixed = "".join(rec(s, 0.0 if s % 4 else 0.31) for s in range(1, 25))
    assert not errors(mixed)
    assert not errors("".join(rec(s, 0.0) for s in range(1, 5)))     # too few records to judge


def test_zero_grad_norm_keeps_its_own_reading():
    found = errors("".join(rec(s, 0.0, grad=0.0) for s in range(1, 13)))
    assert found and all(f.rule_id != "metric-rl-rewards-no-spread" for f in found)     # the flat loss / zero grad tells it
