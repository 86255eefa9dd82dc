"""metric-loss-rising-single-pass: an iteration-counted run (gradient norm logged, no epoch) whose loss rises in every
window after its minimum, by a real margin (metric_creep.pass_creep)."""
from __future__ import annotations

import math

import llmtriage

RULE = "metric-loss-rising-single-pass"


def _meg(losses, grads=None) -> str:
    grads = grads or [0.5 + 0.1 * math.sin(i) for i in range(len(losses))]
    return "".join(f" iteration {10 * (i + 1):8d}/   30000 | learning rate: 1.000000E-05 | lm loss: {x:.6E} | "
                   f"loss scale: 1.0 | grad norm: {g:.3f} | number of skipped iterations:   0 |\n"
                   for i, (x, g) in enumerate(zip(losses, grads)))


def _loop(losses) -> str:
    return "".join(f"step {100 * i:5d} | loss {x:.4f} | lr 3.000e-04 | grad_norm {0.8 + 0.3 * math.sin(i):.3f}\n"
                   for i, x in enumerate(losses))


def _errors(text: str):
    return [f.rule_id for f in llmtriage.analyze(text).findings if f.severity == "error"]


def _wobble(i: int) -> float:
    return 0.05 * math.sin(i * 1.7)


def test_a_megatron_loss_that_doubles_after_its_minimum_is_an_error():
    losses = [2.05 - 0.004 * i + _wobble(i) for i in range(15)] + [1.99 + 0.02 * i + _wobble(i) for i in range(100)]
    errs = _errors(_meg(losses))
    assert errs[:1] == [RULE]
    f = next(f for f in llmtriage.analyze(_meg(losses)).findings if f.rule_id == RULE)
    assert f.category == "nan-loss"


def test_a_pretraining_loss_that_climbs_back_most_of_its_fall_is_an_error():
    losses = [10.5 - 0.09 * i + _wobble(i) for i in range(30)] + [7.8 + 0.07 * i + 3 * _wobble(i) for i in range(31)]
    assert _errors(_loop(losses))[:1] == [RULE]


def test_a_small_rise_after_the_minimum_is_noise():
    losses = [10.5 - 0.09 * i + _wobble(i) for i in range(30)] + [7.8 + 0.01 * i + _wobble(i) for i in range(31)]
    assert RULE not in _errors(_loop(losses))


def test_a_loss_that_steps_up_once_and_stays_is_not_a_climb():
    losses = [10.5 - 0.09 * i + _wobble(i) for i in range(30)] + [9.5 + _wobble(i) for i in range(31)]
    assert RULE not in _errors(_loop(losses))


def test_a_healthy_falling_pretraining_curve_is_quiet():
    losses = [8 * math.exp(-i / 40) + 3 + _wobble(i) for i in range(120)]
    assert not _errors(_meg(losses))


def test_a_run_that_prints_its_epoch_is_left_to_the_epoch_aware_detectors():
    losses = [2.05 - 0.004 * i + _wobble(i) for i in range(15)] + [1.99 + 0.02 * i + _wobble(i) for i in range(100)]
    text = "".join(f"{{'loss': {x:.4f}, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': {1 + i / 10:.2f}}}\n"
                   for i, x in enumerate(losses))
    assert RULE not in _errors(text)
