"""RL judgement: one exploding update, then a reward that stays down (detect/rl_grad_blowup.py)."""
from __future__ import annotations

import llmtriage

RULE = "metric-rl-grad-norm-blowup"


def _trl(grads: list[float], rewards: list[float]) -> str:
    return "".join(f"{{'loss': 0.01, 'grad_norm': {g}, 'learning_rate': 1e-06, 'reward': {r}, 'reward_std': 0.3, "
                   f"'kl': 0.001, 'epoch': {i / 100:.2f}}}\n" for i, (g, r) in enumerate(zip(grads, rewards)))


def _verl(grads: list[float], rewards: list[float]) -> str:
    return "".join(f"(TaskRunner pid=1) step:{i + 1} - actor/pg_loss:0.01 - actor/grad_norm:{g} - "
                   f"critic/score/mean:{r} - response_length/mean:300.0\n" for i, (g, r) in enumerate(zip(grads, rewards)))


def _hits(text: str) -> list:
    return [f for f in llmtriage.analyze(text).findings if f.rule_id == RULE]


def _series(spike: float = 900.0, after: float = 0.3, n_after: int = 12) -> tuple[list[float], list[float]]:
    grads = [0.4 + 0.05 * (i % 5) for i in range(12)] + [spike] + [0.6] * n_after
    rewards = [0.5 + 0.01 * i for i in range(12)] + [0.55] + [after] * n_after
    return grads, rewards


def test_spike_then_lasting_reward_drop_is_a_divergence():
    hits = _hits(_trl(*_series()))
    assert hits and hits[0].category == "nan-loss" and hits[0].severity == "error"
    assert hits[0].line == 13 and hits[0].captures["grad"] == "900"


def test_verl_step_lines():
    assert _hits(_verl(*_series(spike=420.0, after=0.25)))


def test_recovered_small_or_short_are_no_finding():
    grads, rewards = _series(after=0.3)
    rewards[-6:] = [0.62] * 6                      # the reward came back in the later half
    assert not _hits(_trl(grads, rewards))
    assert not _hits(_trl(*_series(spike=20.0)))    # a 40x bump, under grad_min and the factor
    assert not _hits(_trl(*_series(after=0.5)))     # the reward held
    assert not _hits(_trl(*_series(n_after=4)))     # too few records after the spike to judge


def test_an_error_already_found_wins():
    text = _trl(*_series()) + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert not _hits(text)
