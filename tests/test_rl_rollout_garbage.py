"""RL judgement: rollouts that go from normal to all-capped, ~0-reward garbage in one step (detect/rl_rollout_garbage.py)."""
from __future__ import annotations

import llmtriage

RULE = "metric-rl-rollouts-garbage-after-sync"


def _skyrl(rewards: list[float], caps: list[float]) -> str:
    return "".join(f"(skyrl_entrypoint pid=1) 2026-05-28 09:{i:02d}:00.000 | INFO | skyrl_train.trainer:train:227 - "
                   f"step {i + 1}: reward/avg: {r} | response_length/avg: {240 + 780 * c:.1f} | "
                   f"stop_reason/length_frac: {c}\n" for i, (r, c) in enumerate(zip(rewards, caps)))


def _trl(rewards: list[float], caps: list[float], kls: list[float], grads: list[float]) -> str:
    return "".join(f"{{'loss': 0.01, 'grad_norm': {g}, 'completions/clipped_ratio': {c}, 'reward': {r}, "
                   f"'reward_std': 0.3, 'kl': {k}, 'epoch': {i / 100:.2f}}}\n"
                   for i, (r, c, k, g) in enumerate(zip(rewards, caps, kls, grads)))


def _hits(text: str) -> list:
    return [f for f in llmtriage.analyze(text).findings if f.rule_id == RULE]


def test_one_step_collapse_after_the_first_sync():
    hits = _hits(_skyrl([0.54, 0.02, 0.004, 0.0, 0.0], [0.012, 0.981, 0.995, 1.0, 1.0]))
    assert hits and hits[0].category == "dependency-mismatch" and hits[0].severity == "error"
    assert hits[0].line == 2 and hits[0].captures["cap_after"] == "0.981"


def test_trl_records_after_several_healthy_steps():
    rewards = [0.5, 0.55, 0.6, 0.58, 0.01, 0.0, 0.0, 0.0]
    caps = [0.05, 0.02, 0.0, 0.03, 0.97, 1.0, 1.0, 1.0]
    assert _hits(_trl(rewards, caps, [0.01] * 8, [0.3] * 8))


def test_gradual_or_runaway_collapse_or_recovery_is_no_finding():
    caps = [0.05, 0.02, 0.0, 0.03, 0.97, 1.0, 1.0, 1.0]
    rewards = [0.5, 0.55, 0.6, 0.58, 0.01, 0.0, 0.0, 0.0]
    # the policy had already run away from the reference (KL 4.8) before the collapse: a learning-rate collapse
    assert not _hits(_trl(rewards, caps, [0.01, 0.2, 1.5, 4.8, 12.0, 15.0, 15.0, 15.0], [0.3] * 8))
    # a gradient blow-up came first
    assert not _hits(_trl(rewards, caps, [0.01] * 8, [0.3, 0.3, 0.3, 23.5, 60.0, 0.0, 0.0, 0.0]))
    # the reward was already sliding when the cap was hit
    assert not _hits(_trl([0.5, 0.55, 0.4, 0.2, 0.01, 0.0, 0.0, 0.0], caps, [0.01] * 8, [0.3] * 8))
    # the rollouts came back
    assert not _hits(_skyrl([0.54, 0.02, 0.004, 0.5, 0.52], [0.012, 0.981, 0.995, 0.02, 0.01]))
    # too few records after the collapse to judge
    assert not _hits(_skyrl([0.54, 0.02, 0.004], [0.012, 0.981, 0.995]))
    # capped from the first step on: no healthy record before (a cap that is too small, not a broken sync)
    assert not _hits(_skyrl([0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]))


def test_an_error_already_found_wins():
    text = _skyrl([0.54, 0.02, 0.004, 0.0, 0.0], [0.012, 0.981, 0.995, 1.0, 1.0])
    text += "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert not _hits(text)
