"""metric-loss-stuck-from-start over several epochs: a noisy loss that never falls while the run goes over its data two
or more times is stuck (metric_start.stuck); within one pass, or falling across passes, it is not."""
from __future__ import annotations

import random

import llmtriage

RULE = "metric-loss-stuck-from-start"


def _hf(losses, epochs: float) -> str:
    n = len(losses)
    return "".join(f"{{'loss': {x:.4f}, 'learning_rate': {5e-05 * (1 - i / n):.4e}, 'epoch': {epochs * (i + 1) / n:.2f}}}\n"
                   for i, x in enumerate(losses))


_RNG = random.Random(7)
_NOISE = [_RNG.gauss(0.0, 0.07) for _ in range(100)]


def _noise(i: int) -> float:
    return _NOISE[i]


def _errors(text: str):
    return [f.rule_id for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_a_noisy_loss_that_never_falls_over_four_epochs_is_stuck():
    assert _errors(_hf([1.55 + _noise(i) for i in range(100)], 4.0))[:1] == [RULE]


def test_the_same_noisy_level_inside_one_epoch_is_left_alone():
    assert RULE not in _errors(_hf([1.55 + _noise(i) for i in range(100)], 1.0))


def test_a_stretch_far_noisier_than_the_rest_is_no_plain_plateau():
    # a spike that recovers inside the second quarter: the quarters are not equally noisy
    assert RULE not in _errors(_hf([1.55 + _noise(i) * (6 if 30 <= i < 45 else 1) for i in range(100)], 4.0))


def test_a_noisy_loss_that_falls_epoch_by_epoch_is_learning():
    assert RULE not in _errors(_hf([1.55 - 0.004 * i + _noise(i) for i in range(100)], 4.0))
