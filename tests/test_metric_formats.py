"""Loss lines the anchor misses (detect/metric_formats.py): Marian's `Cost` display and a bare `step N loss X`."""
from __future__ import annotations

import math

import llmtriage
from llmtriage.detect import metrics as M


def _marian(costs: list[str]) -> str:
    return "".join(f"[2020-08-31 10:{i:02d}:11] Ep. 1 : Up. {(i + 1) * 500} : Sen. {(i + 1) * 232118:,} : Cost {c} * 7,150,112 "
                   f"after {(i + 1) * 7150112:,} : Time 263.10s : 27150.22 words/s : L.r. 1.8750e-05\n"
                   for i, c in enumerate(costs))


def _bare(losses: list[float]) -> str:
    return "".join(f"epoch 0 step {(i + 1) * 20} loss {x:.4f} lr {2e-4 * (1 - i / 80):.6e}\n" for i, x in enumerate(losses))


def _top(text: str):
    found = [f for f in llmtriage.analyze(text).findings if f.severity == "error"]
    return found[0] if found else None


def test_marian_cost_lines_are_records_with_the_update_counter():
    t = M.MetricTracker.of_text(_marian(["9.1", "7.5", "6.2"]))
    assert t.count == 3 and t.last_step == 1500
    assert [r.loss for r in t.head] == [9.1, 7.5, 6.2] and t.head[0].lr == 1.875e-05


def test_marian_cost_turning_nan_is_the_nan_loss():
    top = _top(_marian(["8.1", "6.0", "4.9", "4.1"] + ["nan"] * 6))
    assert top is not None and top.rule_id == "metric-nan-loss" and top.category == "nan-loss"
    # a Marian run whose cost keeps falling is healthy
    assert _top(_marian([f"{2 + 6 * math.exp(-i / 5):.5f}" for i in range(40)])) is None


def test_bare_step_loss_lines_that_never_fall_are_no_grad():
    flat = [3.41 + 0.05 * math.sin(i) for i in range(62)]
    top = _top(_bare(flat))
    assert top is not None and top.category == "no-grad"
    # the same print with a loss that falls is a run that trains
    assert _top(_bare([1.2 + 2.2 * math.exp(-i / 15) for i in range(62)])) is None


def test_a_bare_line_the_anchor_reads_is_counted_once():
    text = "step 10 loss 2.31 | loss 2.31\n" * 3 + "step 10, loss 2.31\n"
    t = M.MetricTracker.of_text(text)
    assert t.count == 4


def _hf34(first: float, level: float, n: int = 40) -> str:
    """transformers 3.4: no step in the record, the epoch tells it; the first record is step 1 of 25503."""
    head = f"{{'loss': {first}, 'learning_rate': 3e-05, 'epoch': {1 / 25503}}}\n"
    return head + "".join(f"{{'loss': {level + 0.03 * math.sin(i)}, 'learning_rate': 3e-05, 'epoch': {(i + 1) * 500 / 25503}}}\n"
                          for i in range(n))


def test_a_first_step_loss_averaged_over_the_logging_interval_is_not_a_jump():
    # 0.0096 x 500 steps = 4.8: the step-1 loss divided by logging_steps (fixed in transformers PR #8193)
    assert _top(_hf34(0.0096, 2.7)) is None
    # a loss that starts low and is wrecked by the first updates is still the first-update jump
    top = _top(_hf34(0.2, 2.7))
    assert top is not None and top.rule_id == "metric-loss-jumped-after-first-update"


def test_a_flat_loss_whose_records_lose_the_bar_step_is_judged_by_epochs():
    # a bar `0/1164` above the first records gives them step 0; the later ones carry only an epoch
    bar = "  0%|          | 0/1164 [00:00<?, ?it/s]\n"
    flat = "".join(f"{{'loss': {1.41 + 0.03 * math.sin(i):.4f}, 'learning_rate': 3e-4, 'epoch': {0.01 + i * 0.08:.2f}}}\n"
                   for i in range(38))
    top = _top(bar + flat)
    assert top is not None and top.rule_id == "metric-loss-stuck-from-start"
    falling = "".join(f"{{'loss': {0.9 + 0.6 * math.exp(-i / 8):.4f}, 'learning_rate': 3e-4, 'epoch': {0.01 + i * 0.08:.2f}}}\n"
                      for i in range(38))
    assert _top(bar + falling) is None
