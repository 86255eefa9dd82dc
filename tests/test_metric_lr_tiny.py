"""metric_lr_tiny: a learning rate too small to train (a tiny floor held for a long tail, or a tiny schedule)."""
from __future__ import annotations

import random

from llmtriage.detect import metric_detect as D
from llmtriage.detect import metrics as M
from llmtriage.detect.metric_lr_tiny import lr_tiny


def _log(lrs, losses):
    return "".join(f"step={(i + 1) * 10} loss={loss:.4f} lr={lr:.4e}\n" for i, (lr, loss) in enumerate(zip(lrs, losses)))


def _run(lrs, losses):
    t = M.MetricTracker.of_text(_log(lrs, losses))
    return lr_tiny(t, D.detect(t))


def _noise(n, level, seed=3):
    rnd = random.Random(seed)
    return [level + rnd.uniform(-0.08, 0.08) for _ in range(n)]


def test_decay_reaching_a_tiny_floor_early_is_lr_floor():
    """mlx-lm cosine_decay [1e-5, 70, 1e-7] after 60 warm-up steps in a 1000-step run: 1e-7 from step 130 on."""
    lrs = [1e-5 * (i + 1) / 6 for i in range(6)] + [1e-5 * (1 - i / 7) + 1e-7 for i in range(6)] + [1e-7] * 88
    [a] = _run(lrs, [1.0, 0.8, 0.7] + _noise(97, 0.62))
    assert (a.kind, a.category, a.severity) == ("lr_floor", "no-grad", "error")
    assert a.numbers["lr"] == "1e-07" and a.numbers["records"] == 88 and a.numbers["total"] == 100


def test_real_floor_short_floor_or_falling_loss_is_not_lr_floor():
    # a floor of 10% of the peak (min_lr = 0.1 x lr) is a real learning rate
    assert _run([1e-4] * 10 + [1e-5] * 50, _noise(60, 2.0)) == []
    # a tiny floor reached on the last records only: the planned end of the schedule
    assert _run([1e-4] * 50 + [1e-7] * 6, _noise(56, 2.0)) == []
    # the loss keeps falling over the floor tail
    assert _run([1e-4] * 10 + [1e-7] * 40, [3.0 * 0.98 ** i for i in range(50)]) == []


def test_whole_schedule_below_1e7_with_flat_loss_is_lr_tiny():
    """learning_rate typed as 2e-9: warm-up to 2e-9, then a cosine decay; the loss never moves."""
    lrs = [2e-9 * (i + 1) / 6 for i in range(6)] + [2e-9 * (1 - i / 40) for i in range(18)]
    [a] = _run(lrs, _noise(24, 1.6))
    assert (a.kind, a.category, a.severity) == ("lr_tiny", "no-grad", "error")
    assert a.numbers["lr"] == "2e-09"


def test_long_warmup_still_rising_or_loss_falling_is_not_lr_tiny():
    # a 30000-step warm-up logged every step: the lr is below 1e-7 but still rising (no decay seen yet)
    assert _run([1e-5 * s / 30000 for s in range(1, 25)], _noise(24, 1.7)) == []
    # a tiny schedule over which the loss falls clearly is not read as untrained
    lrs = [5e-8] * 8 + [4e-8] * 16
    assert _run(lrs, [2.0 * 0.97 ** i for i in range(24)]) == []
