"""metric-loss-rising-first-epoch: a fine-tune whose loss climbs back from its minimum in every window of the
first epoch while a gradient norm is logged (metric_creep.graded_creep)."""
from __future__ import annotations

import math

import llmtriage


def _log(losses, epoch=lambda i: 0) -> str:
    return "".join(f"epoch: {epoch(i)} step: {20 * (i + 1)} loss: {x:.4f} lr: 5.00e-05 grad_norm: {1.5 + (i % 5) * 0.4:.3f}\n"
                   for i, x in enumerate(losses))


def _rule_ids(text: str):
    return [f.rule_id for f in llmtriage.analyze(text).findings if f.severity == "error"]


def _wobble(i: int) -> float:
    return 0.03 * math.sin(i * 1.7)


RISING = [2.09 - 0.004 * i + _wobble(i) for i in range(20)] + [1.99 + 0.01 * i + _wobble(i) for i in range(60)]


def test_a_loss_rising_in_every_window_of_the_first_epoch_is_an_error():
    assert _rule_ids(_log(RISING))[:1] == ["metric-loss-rising-first-epoch"]


def test_a_loss_that_steps_up_once_and_stays_is_not_a_climb():
    step = [2.09 - 0.004 * i + _wobble(i) for i in range(30)] + [2.5 + _wobble(i) for i in range(50)]
    assert "metric-loss-rising-first-epoch" not in _rule_ids(_log(step))


def test_a_small_rise_is_noise():
    small = [2.09 - 0.004 * i + _wobble(i) for i in range(20)] + [1.99 + 0.002 * i + _wobble(i) for i in range(60)]
    assert "metric-loss-rising-first-epoch" not in _rule_ids(_log(small))


def test_a_rise_in_a_later_epoch_is_left_alone():
    assert "metric-loss-rising-first-epoch" not in _rule_ids(_log(RISING, epoch=lambda i: 1 + i // 40))


def test_a_healthy_falling_curve_is_quiet():
    falling = [2.1 * math.exp(-i / 60) + 0.8 + _wobble(i) for i in range(80)]
    assert not _rule_ids(_log(falling))
