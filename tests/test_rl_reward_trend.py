"""RL reward trends (detect/rl_reward_trend.py): a finished run whose reward never rose while the KL grew (no-grad),
and an accuracy reward that reached 1 while the completions shrank (loss-suspicious); healthy runs stay quiet."""
from __future__ import annotations

import math

import llmtriage

STALLED = "metric-rl-reward-flat-while-kl-grows"
HACKED = "metric-rl-accuracy-reward-hacked"
END = "{'train_runtime': 1238.4, 'train_samples_per_second': 13.5, 'train_loss': 0.0016, 'epoch': 0.14}\n"


def _grpo(n, reward, kl, length=lambda i: 180.0, acc=None) -> str:
    out = []
    for i in range(n):
        a = f"'rewards/accuracy_reward': {acc(i):.4f}, " if acc else ""
        out.append(f"{{'loss': 0.0002, 'grad_norm': {1.5 + 0.3 * math.sin(i):.4f}, 'learning_rate': 1e-05, "
                   f"'completion_length': {length(i):.2f}, {a}'reward': {reward(i):.4f}, 'reward_std': {0.6 + 0.05 * math.sin(i):.4f}, "
                   f"'kl': {kl(i):.6f}, 'epoch': {i / 200:.2f}}}\n")
    return "".join(out)


def _errors(text: str):
    return [f.rule_id for f in llmtriage.analyze(text).findings if f.severity == "error"]


def _noisy(i: int) -> float:
    return 0.2 * math.sin(i * 2.1) + 0.1 * math.cos(i * 3.7)


def test_a_finished_run_whose_reward_never_rose_while_kl_grew_is_no_grad():
    text = _grpo(30, lambda i: 0.5 + _noisy(i), lambda i: 0.0015 * (i + 1)) + END
    assert _errors(text)[:1] == [STALLED]


def test_the_same_run_still_going_is_left_alone():
    assert STALLED not in _errors(_grpo(30, lambda i: 0.5 + _noisy(i), lambda i: 0.0015 * (i + 1)))


def test_a_reward_that_rises_is_learning():
    text = _grpo(30, lambda i: 0.5 + 0.02 * i + _noisy(i), lambda i: 0.0015 * (i + 1)) + END
    assert STALLED not in _errors(text)


def test_a_reward_held_at_its_ceiling_is_not_stalled():
    text = _grpo(30, lambda i: 2.0 if i % 3 else 1.875, lambda i: 0.0015 * (i + 1)) + END
    assert STALLED not in _errors(text)


def test_accuracy_reward_at_one_with_shrinking_completions_is_reward_hacking():
    text = _grpo(40, lambda i: 1.0 + min(1.0, 0.3 + 0.03 * i), lambda i: 0.001 * (i + 1),
                 length=lambda i: 95.0 if i < 15 else 35.0, acc=lambda i: min(1.0, 0.3 + 0.03 * i))
    assert _errors(text)[:1] == [HACKED]


def test_accuracy_reward_at_one_with_steady_completions_is_healthy():
    text = _grpo(40, lambda i: 1.0 + min(1.0, 0.3 + 0.03 * i), lambda i: 0.001 * (i + 1),
                 length=lambda i: 95.0 + 5 * math.sin(i), acc=lambda i: min(1.0, 0.3 + 0.03 * i))
    assert HACKED not in _errors(text)
