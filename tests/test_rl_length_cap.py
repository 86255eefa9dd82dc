"""RL judgement: completions that grew into the length cap while a reward fell (detect/rl_length_cap.py)."""
from __future__ import annotations

import llmtriage

RULE = "metric-rl-completions-hit-length-cap"
CONFIG = "GRPOConfig(max_prompt_length=512, max_completion_length=1024, num_generations=8, learning_rate=1e-06)\n"


def _trl(lengths: list[float], fmt_rewards: list[float], clip: bool = False) -> str:
    out = []
    for i, (n, r) in enumerate(zip(lengths, fmt_rewards)):
        extra = f"'completions/clipped_ratio': {min(1.0, max(0.0, (n - 700) / 324)):.3f}, " if clip else ""
        key = "'completions/mean_length'" if clip else "'completion_length'"
        out.append(f"{{'loss': 0.0004, 'grad_norm': 0.3, 'learning_rate': 1e-06, {key}: {n}, {extra}"
                   f"'rewards/format_reward': {r}, 'rewards/accuracy_reward': 0.3, 'reward': {r + 0.3}, "
                   f"'reward_std': 0.4, 'kl': 0.01, 'epoch': {i / 100:.2f}}}\n")
    return "".join(out)


def _verl(lengths: list[float], scores: list[float], clips: list[float]) -> str:
    return "".join(f"(TaskRunner pid=7) step:{i + 1} - actor/pg_loss:0.01 - actor/grad_norm:0.2 - critic/score/mean:{s} - "
                   f"response_length/mean:{n} - response_length/max:2048.0 - response_length/clip_ratio:{c}\n"
                   for i, (n, s, c) in enumerate(zip(lengths, scores, clips)))


def _hits(text: str) -> list:
    return [f for f in llmtriage.analyze(text).findings if f.rule_id == RULE]


GROW = [380.0, 410.0, 470.0, 590.0, 720.0, 870.0, 980.0, 1012.0, 1024.0, 1024.0, 1024.0, 1024.0]
FALL = [0.30, 0.31, 0.27, 0.20, 0.11, 0.05, 0.01, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_lengths_into_the_configured_cap_with_a_reward_falling():
    hits = _hits(CONFIG + _trl(GROW, FALL))
    assert hits and hits[0].category == "seq-too-long" and hits[0].severity == "error"
    c = hits[0].captures
    assert c["cap"] == "1024" and c["reward"] == "rewards/format_reward" and c["reward_late"] == "0"
    assert hits[0].line == 9    # the first record pinned at the cap (1012 >= 0.97 x 1024)


def test_clip_ratio_without_a_configured_cap():
    assert _hits(_trl(GROW, FALL, clip=True))


def test_verl_step_lines():
    lengths = [600.0, 650.0, 800.0, 1100.0, 1500.0, 1900.0, 2040.0, 2048.0, 2048.0]
    clips = [0.01, 0.02, 0.05, 0.12, 0.4, 0.8, 0.95, 0.99, 1.0]
    scores = [0.4, 0.42, 0.41, 0.35, 0.25, 0.12, 0.05, 0.02, 0.01]
    assert _hits(_verl(lengths, scores, clips))


def test_no_finding_without_the_pattern():
    assert not _hits(_trl(GROW, FALL))                      # no cap known and no clip ratio: length alone says nothing
    assert not _hits(CONFIG + _trl(GROW, [0.3] * 12))       # the rewards held: long answers that still finish
    assert not _hits(CONFIG + _trl([1024.0] * 12, FALL))    # capped from the first step: another failure (no spread)
    short = GROW[:8] + [900.0, 880.0, 860.0, 850.0]         # the lengths came back under the cap
    assert not _hits(CONFIG + _trl(short, FALL))
    assert not _hits(CONFIG + _trl(GROW[:5], FALL[:5]))     # too few records


def test_an_error_already_found_wins():
    text = CONFIG + _trl(GROW, FALL) + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert not _hits(text)


def test_a_long_run_is_judged_at_its_end():
    # more records than the detector keeps from the start: the pinned records at the real end are still read
    lengths = [400.0 + i % 7 for i in range(5990)] + [1024.0] * 10
    rewards = [0.3 + 0.01 * (i % 5) for i in range(5990)] + [0.0] * 10
    hits = _hits(CONFIG + _trl(lengths, rewards))
    assert hits and hits[0].line == 5992
