"""RL judgement: a rollout engine whose log-probs stay far from the trainer's (detect/rl_logprob_gap.py)."""
from __future__ import annotations

import llmtriage

RULE = "metric-rl-rollout-logprob-gap"


def _slime(gaps: list[float], reward: float = 0.23) -> str:
    out = []
    for i, g in enumerate(gaps):
        out.append(f"(RolloutManager pid=7) rollout {i}: {{'rollout/raw_reward': {reward}, 'rollout/response_len/mean': 600.0}}\n")
        out.append(f"(MegatronTrainRayActor pid=8) step {i}: {{'train/loss': 0.001, 'train/pg_loss': 0.001, "
                   f"'train/train_rollout_logprob_abs_diff': {g}, 'train/grad_norm': 0.5}}\n")
    return "".join(out)


def _verl(gaps: list[float]) -> str:
    return "".join(f"(TaskRunner pid=1) step:{i + 1} - actor/pg_loss:0.01 - actor/grad_norm:0.3 - "
                   f"training/rollout_probs_diff_max:0.9 - training/rollout_probs_diff_mean:{g} - critic/score/mean:0.4\n"
                   for i, g in enumerate(gaps))


def _hits(text: str) -> list:
    return [f for f in llmtriage.analyze(text).findings if f.rule_id == RULE]


def test_persistent_logprob_gap_is_a_dependency_mismatch_with_flat_reward():
    hits = _hits(_slime([0.29 + 0.002 * i for i in range(12)]))
    assert hits and hits[0].category == "dependency-mismatch" and hits[0].action == "fix"
    assert hits[0].captures["metric"] == "train_rollout_logprob_abs_diff"
    assert hits[0].captures["reward_late"] == "0.23" and hits[0].line == 2


def test_verl_probability_gap_uses_its_own_limit():
    assert _hits(_verl([0.08] * 10))
    assert not _hits(_verl([0.012] * 10))         # a healthy bf16 run


def test_healthy_gap_spikes_and_short_runs_are_no_finding():
    assert not _hits(_slime([0.012] * 12))
    assert not _hits(_slime([0.012] * 10 + [0.4, 0.5]))       # a spike at the end, not a persistent gap
    assert not _hits(_slime([0.3] * 5))                      # too few records to judge


def test_an_error_already_found_wins():
    text = _slime([0.3] * 10) + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert not _hits(text)
