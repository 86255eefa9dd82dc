"""metric-loss-plunged-to-zero-fp16: in an fp16 run, a loss that plunges from its level to exactly 0 in a few
records inside the first epoch and stays 0 is the half-precision forward breaking (NaN written as 0), not learning."""
from __future__ import annotations

import llmtriage

FP16 = "12/05/2023 18:22:42 - WARNING - __main__ - Process rank: 0, device: cuda:0, n_gpu: 1distributed training: True, 16-bits training: True\n"
BF16 = "12/05/2023 18:22:42 - INFO - __main__ - bf16=True, fp16=False\n"


def _log(losses, epoch_step=0.002, start_epoch=0.0) -> str:
    return "".join(f"{{'loss': {x}, 'learning_rate': {2e-5 + i * 1e-6:.4e}, 'epoch': {start_epoch + epoch_step * (i + 1):.3f}}}\n"
                   for i, x in enumerate(losses))


PLUNGE = [1.61, 1.36, 1.29, 1.25, 1.22, 1.2, 0.94, 0.44, 0.073] + [0.0] * 11


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_an_fp16_plunge_to_exact_zero_in_the_first_epoch_is_nan_loss():
    errs = _errors(FP16 + _log(PLUNGE))
    assert errs and errs[0].rule_id == "metric-loss-plunged-to-zero-fp16" and errs[0].category == "nan-loss"


def test_the_same_plunge_without_fp16_is_no_such_claim():
    assert not any(f.rule_id == "metric-loss-plunged-to-zero-fp16" for f in llmtriage.analyze(BF16 + _log(PLUNGE)).findings)


def test_a_gradual_fp16_descent_to_zero_is_not_a_plunge():
    slow = [1.6 - 0.1 * i for i in range(15)] + [0.05, 0.02, 0.01, 0.005] + [0.0] * 10
    assert not any(f.rule_id == "metric-loss-plunged-to-zero-fp16" for f in llmtriage.analyze(FP16 + _log(slow)).findings)


def test_fp16_zeros_after_the_first_epoch_are_memorisation_territory():
    late = _log(PLUNGE, epoch_step=0.5)
    assert not any(f.rule_id == "metric-loss-plunged-to-zero-fp16" for f in llmtriage.analyze(FP16 + late).findings)


def test_a_short_run_of_fp16_zeros_is_not_enough():
    short = PLUNGE[:9] + [0.0] * 5
    assert not any(f.rule_id == "metric-loss-plunged-to-zero-fp16" for f in llmtriage.analyze(FP16 + _log(short)).findings)
