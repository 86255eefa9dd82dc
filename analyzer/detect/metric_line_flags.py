"""Flags read off one training-metric line beside its loss (metric_parse reads the numbers): an RL
(GRPO/PPO) record, an RL record whose group rewards have no spread, a training accuracy of 100% or under
POOR_ACC, a loss of 0 printed with fixed decimals. `metrics.MetricTracker` sets them on each `Record`.
"""
from __future__ import annotations

import re

# words of RL post-training records (GRPO/PPO): their loss may be 0 at the start or negative, by design
_RL_WORDS = (b"reward", b"'kl'", b"kl_loss", b"pg_loss", b"policy_loss", b"advantage", b"completion_length",
             b"completions/", b"clip_ratio")


# a field logged without a value (LLaMA-Factory's trainer_log.jsonl writes `"reward": null` on every SFT record)
_EMPTY_FIELD = re.compile(rb"""["'][\w/]+["']\s*:\s*(?:null|None)\b""")


def is_rl_line(text: bytes) -> bool:
    """Whether a metric line is an RL post-training record (reward / KL / policy-loss fields with a value)."""
    if not any(w in text for w in _RL_WORDS):
        return False
    return any(w in _EMPTY_FIELD.sub(b"", text) for w in _RL_WORDS) if b"null" in text or b"None" in text else True


# an RL record whose rewards do not vary within any group (TRL / ms-swift / open-r1 keys), or whose advantages
# are all 0 (verl prints their max and min side by side): the policy loss and its gradient are 0 by construction
_FLAT_REWARD = re.compile(rb"""['"]frac_reward_zero_std['"]\s*:\s*['"]?1(?:\.0*)?(?![\d.])|['"]reward_std['"]\s*:\s*['"]?0(?:\.0*)?(?:[eE][-+]?\d+)?(?![\d.])"""
                          rb"""|critic/advantages/max:\s*-?0(?:\.0*)?\s+-\s+critic/advantages/min:\s*-?0(?:\.0*)?(?![\d.])""")


def is_flat_reward(text: bytes) -> bool:
    """Whether an RL metric line says every group's rewards were identical (no advantage to learn from)."""
    return (b"reward" in text or b"advantages" in text) and _FLAT_REWARD.search(text) is not None


# an accuracy of 100% on a metric line: `Prec@1 100.000 (99.4)`, `Acc@1 100.00`, `acc: 1.0000`,
# `'accuracy': 1.0`, `train_acc=100.0` (the first accuracy field of the line: the batch's own, not an average)
_PERFECT_ACC = re.compile(rb"""(?i)(?<![\w/])(?:prec@1|acc@1|top-?1|(?:train_|mean_token_)?acc(?:uracy)?)['"]?\s*[:=]?\s*['"]?(?:100(?:\.0*)?|1\.0*|1)(?![\d.])""")


# a loss field printed as 0 with two or more fixed decimals (`loss=0.000`, `Loss 0.0000 (0.0012)`), not `0.0` / `0e+00`
_ROUNDED_LOSS = re.compile(rb"""(?i)loss[\w/]*['"]?\s*[=:]?\s*['"]?0\.000*(?![\d.eE])""")


def is_rounded_zero_loss(text: bytes) -> bool:
    """Whether a metric line prints its loss as 0 with fixed decimals (below the display's precision)."""
    m = _ROUNDED_LOSS.search(text)
    return m is not None and m.group(0).endswith(b"00")


# the first training-accuracy field of a line with its value (`acc: 0.3100`, `Acc@1 31.2`, `'accuracy': 0.31`)
_ACC_VALUE = re.compile(rb"""(?i)(?<![\w/])(?:prec@1|acc@1|top-?1|(?:train_)?acc(?:uracy)?)['"]?\s*[:=]?\s*['"]?([0-9]+(?:\.[0-9]+)?)(?![\d.])""")
POOR_ACC = 0.5


def is_poor_accuracy(text: bytes) -> bool:
    """Whether a metric line prints a training accuracy below POOR_ACC (a fraction, or a percentage above 1)."""
    m = _ACC_VALUE.search(text) if (b"cc" in text or b"rec@" in text or b"op" in text) else None
    if m is None:
        return False
    v = float(m.group(1))
    return (v / 100 if v > 1 else v) < POOR_ACC


def is_perfect_accuracy(text: bytes) -> bool:
    """Whether a metric line prints a (training) accuracy of exactly 100% / 1.0."""
    return (b"cc" in text or b"rec@" in text or b"op" in text) and _PERFECT_ACC.search(text) is not None
