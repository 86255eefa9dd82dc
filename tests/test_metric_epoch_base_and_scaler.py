"""1-based epoch labels (detect/metric_epoch_base.py), the fp16 scaler's survived overflows (metric_skips.scaler_recovered)
and the pix2pix / CycleGAN-VC step and epoch timers (throughput_sources.py)."""
from __future__ import annotations

import math
import random

import llmtriage
from llmtriage.detect.metric_epoch_base import ordinal_epochs
from llmtriage.detect.metric_parse import Record


def _top(text: str):
    found = [f for f in llmtriage.analyze(text).findings if f.severity == "error"]
    return found[0] if found else None


def _rec(i: int, epoch):
    return Record(i, i + 1, None, 2.3, epoch=epoch)


def test_whole_epochs_counted_from_one_are_shifted_to_epochs_completed():
    recs = [_rec(0, 1.0), _rec(1, 1.0), _rec(2, 2.0)]
    assert ordinal_epochs(recs) and [r.epoch for r in recs] == [0.0, 0.0, 1.0]
    for eps in ([0.0, 1.0, 2.0], [0.5, 1.0, 1.5], [2.0, 3.0], [1.0]):       # 0-based, fractional, later start, one record
        recs = [_rec(i, e) for i, e in enumerate(eps)]
        assert not ordinal_epochs(recs) and [r.epoch for r in recs] == eps


def _cifar(loss_at) -> str:
    rng = random.Random(1)
    out = []
    for ep in range(1, 6):
        for b in range(0, 391, 39):
            step = (ep - 1) * 391 + b
            out.append(f"Epoch: {ep} [{b:3d}/391] | Loss: {loss_at(step) + rng.gauss(0, 0.012):.4f} | Acc: {10 + rng.gauss(0, 0.9):.3f}% "
                       f"| LR: {1e-3 * min(1.0, (step + 1) / 1000):.6f}\n")
    return "".join(out)


def test_a_loss_that_never_moves_from_the_first_epoch_counted_from_one_is_stuck():
    top = _top(_cifar(lambda s: 2.3026))
    assert top is not None and top.category == "no-grad"
    assert _top(_cifar(lambda s: 2.3026 * math.exp(-s / 900) + 0.3)) is None      # it learns: nothing


def _fairseq(tail_inf: bool) -> str:
    out, scale = [], 128.0
    for k in range(14):
        bad = k in (0, 1, 3) or (tail_inf and k == 13)
        if k in (0, 1, 3):
            scale /= 2
            out.append(f"| INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: {scale}\n")
        loss = "inf" if bad else f"{10.2 - 0.35 * k:.3f}"
        out.append(f"| INFO | train_inner | epoch 001:    {100 * (k + 1)} / 2795 loss={loss}, ppl=inf, num_updates={100 * (k + 1)}, "
                   f"lr=0.001, gnorm=1.1, loss_scale={scale}\n")
    return "".join(out)


def test_inf_averages_from_the_scalers_early_overflows_then_finite_records_are_survived():
    assert _top(_fairseq(False)) is None
    top = _top(_fairseq(True))                  # non-finite again at the end: not survived
    assert top is not None and top.category == "nan-loss"
    no_scaler = "".join(x for x in _fairseq(False).splitlines(keepends=True) if "overflow" not in x)
    top = _top(no_scaler)                       # no scaler overflow printed: the inf is the model's
    assert top is not None and top.category == "nan-loss"


def test_pix2pix_iteration_times_climbing_and_cyclegan_vc_epoch_times_growing_are_slowdowns():
    lines, t = [], 0.118
    for ep in range(1, 4):
        for i in range(100, 49900, 2400):
            t += 0.0018 * i / 1000
            lines.append(f"(epoch: {ep}, iters: {i}, time: {t:.3f}, data: 0.003) G_GAN: 1.023 G_L1: 3.210 D_real: 0.290 D_fake: 0.340\n")
    top = _top("".join(lines))
    assert top is not None and top.category == "throughput-low"
    steady = "".join(f"(epoch: 1, iters: {i}, time: {0.118 + 0.002 * (i % 3):.3f}, data: 0.003) G_GAN: 1.0\n" for i in range(100, 6000, 100))
    assert _top(steady) is None
    sec, out = 131.0, []
    for ep in range(12):
        out.append(f"Epoch: {ep}\nIteration: {54 * (ep + 1):07d}, Generator Learning Rate: 0.0002000, Generator Loss : 9.1, Discriminator Loss : 0.4\n")
        s = int(sec)
        out.append(f"Time Elapsed for This Epoch: {s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}\n")
        sec = sec * 1.23 + 14
    top = _top("".join(out))
    assert top is not None and top.category == "throughput-low"


def test_faster_rcnn_speed_per_iter_and_epoch_took_seconds_growing_are_slowdowns():
    rows = "".join(f"iter: {it} / 70000, total loss: {1.6 * math.exp(-it / 5000) + 0.55:.4f}, lr: 0.001000\nspeed: {0.40 + 0.9 * it / 12000:.3f}s / iter\n"
                   for it in range(10, 12010, 400))
    top = _top(rows)
    assert top is not None and top.category == "throughput-low"
    flat = "".join(f"iter: {it} / 70000, total loss: 0.9, lr: 0.001000\nspeed: {0.40 + 0.002 * (it % 3):.3f}s / iter\n"
                   for it in range(10, 12010, 400))
    assert _top(flat) is None
    et, out = 58.0, []
    for ep in range(1, 31):
        et *= 1.11
        out.append(f"Epoch {ep:03d}: Train Loss: {2.1 * math.exp(-ep / 8) + 0.4:.4f}, Train Accuracy: 50.000%\nEpoch {ep} took {et:.1f} seconds\n")
    top = _top("".join(out))
    assert top is not None and top.category == "throughput-low"


def test_a_printed_nan_loss_tensor_is_a_nan_loss():
    text = ("Training Epoch: 1/3, step 1440/1544 completed (loss: 0.8356)\n"
            " eval_ppl=tensor(nan, device='cuda:0') eval_epoch_loss=tensor(nan, device='cuda:0')\n")
    top = _top(text)
    assert top is not None and top.rule_id == "trainer-loss-nan"
    assert _top(text.replace("tensor(nan", "tensor(1.2031")) is None
