"""Silent-failure readings added for plain loops: a whole per-epoch metric sequence repeated digit for digit
(detect/metric_epoch_repeat.py), a short step-time series that still proves a slowdown, Composer's SpeedMonitor rate and a
report interval's wall time (detect/throughput_sources.py), and Megatron / GPT-NeoX interval timers read as a data wait
(detect/step_waits.py)."""
from __future__ import annotations

import io

from llmtriage.detect import metrics as M
from llmtriage.detect.metric_epoch_repeat import epoch_repeat
from llmtriage.detect.step_waits import StepWaitTracker, timer_split
from llmtriage.detect.throughput import ThroughputTracker
from llmtriage.detect.throughput_sources import loop_step_time, short_rise
from llmtriage.engine.logparse import iter_blocks, match_view


def _epochs(train: list[float], valid: list[float]) -> str:
    return "".join(f"Epoch {e}     Train,      psnr 24.1     loss = {t}\nEpoch {e}     Valid,      psnr 23.7     loss = {v}\n"
                   for e, (t, v) in enumerate(zip(train, valid)))


def test_per_epoch_sequence_repeated_to_every_digit_is_no_grad():
    t = M.MetricTracker.of_text(_epochs([0.04045784] + [0.04801134] * 5, [0.05095885] * 6))
    [a] = epoch_repeat(t, [])
    assert (a.kind, a.category, a.severity) == ("repeat", "no-grad", "error")
    assert a.numbers["period"] == 2 and a.numbers["epochs"] == 5


def test_per_epoch_sequences_that_move_or_print_few_digits_or_repeat_briefly_are_not():
    moving = M.MetricTracker.of_text(_epochs([0.0481 - i * 1e-4 for i in range(6)], [0.05095885] * 6))
    assert epoch_repeat(moving, []) == []      # the train average still moves: the weights change
    coarse = M.MetricTracker.of_text(_epochs([0.05] * 6, [0.06] * 6))
    assert epoch_repeat(coarse, []) == []      # two printed digits: a plateau can print that
    brief = M.MetricTracker.of_text(_epochs([0.04101, 0.04801134, 0.04801134], [0.05, 0.05095885, 0.05095885]))
    assert epoch_repeat(brief, []) == []       # two equal epochs are not enough
    with_lr = M.MetricTracker.of_text("".join(f"Epoch {e} loss = 0.04801134 lr = 0.001\nEpoch {e} val_loss = 0.05095885\n"
                                              for e in range(6)))
    assert epoch_repeat(with_lr, []) == []     # a record with a learning rate is for the lr / flat detectors


def _throughput(text: str) -> ThroughputTracker:
    t = ThroughputTracker(M.Thresholds())
    base = 1
    for chunk, _ in iter_blocks(io.BytesIO(text.encode())):
        lines, view = match_view(chunk)
        t.feed(lines, view, base)
        base += lines.count(b"\n")
    return t


def _neox(ms: list[float]) -> str:
    return "".join(f" samples/sec: 60.1 | iteration {100 * (i + 1):9d}/  320000 | elapsed time per iteration (ms): {x} | "
                   f"learning rate: 2.4E-06 | lm_loss: 7.9E+00 | loss scale: 4096.0 |\n" for i, x in enumerate(ms))


def test_a_short_series_with_a_strong_rise_to_the_end_is_a_slowdown():
    ms = [515.2, 513.6, 516.3, 729.4, 1490.7, 3264.5, 6252.9, 9406.8]
    [a] = _throughput(_neox(ms)).detect(1)
    assert (a.category, a.severity) == ("throughput-low", "error") and float(a.numbers["rise"]) > 5
    vals = list(enumerate(ms))
    assert short_rise(vals, 2.5)
    assert not short_rise(vals[:7], 2.5)                        # fewer than SHORT_MIN records
    assert not short_rise(vals[:-1] + [(8, 1500.0)], 2.5)       # no longer slowing at the end: an eval or save pause
    assert _throughput(_neox([515.2, 513.6, 516.3, 514.0, 3100.0, 512.9, 514.4, 515.0])).detect(1) == []


def test_composer_batches_per_sec_and_report_interval_times_are_read():
    assert loop_step_time(b"\t Train throughput/samples_per_sec: 2.5000") == ("rate", 0.4, None)
    # batches/s falls by design while a batch-size warm-up grows the batch: not read
    assert loop_step_time(b"\t Train throughput/batches_per_sec: 1.2") is None
    assert loop_step_time(b"\t Train throughput/device/samples_per_sec: 160.0") is None
    assert loop_step_time(b"iter: 300 train_loss: 2.7410  train_score: 0.3990 time(s): 282.1 s") == ("loop", 282.1, None)
    assert loop_step_time(b"Total time(s): 282.1 s") is None    # a total, not a report interval of a loop
    blocks = "".join(f"[epoch=1][batch={b}/4000]:\n\t Train loss/train/total: 2.1\n\t Train throughput/batches_per_sec: 4.1\n"
                     f"\t Train throughput/samples_per_sec: {4.1 if b <= 1000 else 1.2}\n" for b in range(100, 3100, 100))
    [a] = _throughput(blocks).detect(1)
    assert a.category == "throughput-low" and a.numbers["rate_from"] == "4.1" and a.numbers["rate_to"] == "1.2"


def test_megatron_and_neox_timers_split_into_step_and_data_wait():
    neox = b"time (ms) | forward: 162.91 | backward: 298.55 | backward-backward: 298.49 | optimizer: 41.36 | batch generator: 8899.47"
    assert timer_split(neox) == (162.91 + 298.55 + 41.36 + 8899.47, 8899.47)     # backward-backward is a part of backward
    assert timer_split(b"time (ms) | model-and-optimizer-setup: 2211.42 | train/valid/test-data-iterators-setup: 91822.07") is None
    t = StepWaitTracker()
    rows = "".join(f"time (ms) | forward-compute: 600.0 | backward-compute: 1200.0 | optimizer-copy-to-main-grad: 9.1 | optimizer: 95.0 | "
                   f"batch-generator: {21000.0 if i == 0 else 5300.0}\n" for i in range(10))
    t.feed(rows.encode(), 1)
    [a] = t.detect(1)
    assert (a.kind, a.severity, a.numbers["records"], a.numbers["data_pct"]) == ("step_wait", "error", 9, "74")
    quick = StepWaitTracker()
    quick.feed(rows.replace("5300.0", "4.0").encode(), 1)
    assert quick.detect(1) == []
