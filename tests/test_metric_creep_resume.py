"""The slow loss climb (metric_creep), the loss drop at a resume (metric_resume), and the loop timers added to the
step-wait and periodic-step detectors (a split `data Xs | fwd+bwd Ys` timer, EDSR's `model+data` timer, a
`step_time` field)."""
from __future__ import annotations

import random

from llmtriage import analyze


def _errors(text: str) -> list:
    return [f for f in analyze(text).findings if f.severity == "error"]


def _creep_log(rise_per_step: float, step_up: bool = False) -> str:
    rnd = random.Random(7)
    out = ["$ python train.py --dtype bfloat16"]
    for i in range(0, 12000, 100):
        base = 3.0 + 8.0 * 2.718 ** (-i / 600.0) if i < 3000 else 3.0 + rise_per_step * (i - 3000)
        if step_up and i >= 7000:
            base = 3.0 + 3.5
        out.append(f"iter {i}: loss {base + rnd.uniform(-0.06, 0.06):.4f}, time 812.10ms")
    return "\n".join(out) + "\n"


def test_loss_climbing_back_in_every_stretch_is_a_divergence():
    errs = _errors(_creep_log(0.0005))
    assert [f.rule_id for f in errs] == ["metric-loss-creeping-up"] and errs[0].category == "nan-loss"


def test_one_step_up_that_stays_or_a_small_rise_is_no_creep():
    assert not _errors(_creep_log(0.0, step_up=True))      # a new data mixture: one step up, then level
    assert not _errors(_creep_log(0.00005))                 # rises, but nowhere near twice the minimum


def _resume_log(after: float, epoch_after: float = 0.42) -> str:
    rnd = random.Random(3)
    out = ["***** Running training *****"]
    for k in range(1, 30):
        out.append("{'loss': %.4f, 'grad_norm': 0.41, 'learning_rate': 1e-4, 'epoch': %.2f}"
                   % (1.1 + rnd.uniform(-0.05, 0.05), 0.4 * k / 29))
    out += ["Saving model checkpoint to out/checkpoint-1200", "--- session restarted ---",
            "  Continuing training from checkpoint, will skip to saved global_step",
            "  Continuing training from global step 1200"]
    for k in range(1, 12):
        out.append("{'loss': %.4f, 'grad_norm': 0.40, 'learning_rate': 1e-4, 'epoch': %.2f}"
                   % (after + rnd.uniform(-0.02, 0.02), epoch_after + 0.01 * k))
    return "\n".join(out) + "\n"


def test_loss_several_fold_lower_right_after_a_resume_is_suspicious():
    errs = _errors(_resume_log(0.16))
    assert [f.rule_id for f in errs] == ["metric-loss-dropped-at-resume"] and errs[0].category == "loss-suspicious"


def test_a_resume_that_continues_the_curve_or_starts_a_new_epoch_is_healthy():
    assert not _errors(_resume_log(1.05))
    assert not _errors(_resume_log(0.2, epoch_after=1.0))   # a new pass over the same data: the drop is learned


def test_split_data_and_compute_timer_shows_the_data_wait():
    rows = ["iter %d/900 | data %.3fs | fwd+bwd 0.310s | loss 0.51" % (i, 2.4 if i % 4 == 0 else 0.003)
            for i in range(40)]
    errs = _errors("\n".join(rows) + "\n")
    assert errs and errs[0].rule_id == "metric-step-wait-dominates"


def test_step_time_field_with_periodic_stalls_after_warm_up():
    rows = ["step %d | loss %.3f | step_time %.3fs" % (i, 2.0 - i * 0.002, 9.0 if i < 2 else (0.95 if i % 3 == 0 else 0.21))
            for i in range(60)]
    errs = _errors("\n".join(rows) + "\n")
    assert errs and errs[0].rule_id == "metric-throughput-low"
    steady = ["step %d | loss %.3f | step_time %.3fs" % (i, 2.0 - i * 0.002, 9.0 if i < 2 else 0.21) for i in range(60)]
    assert not _errors("\n".join(steady) + "\n")
