"""metric_eval_summary (MetricLogger evaluation summaries: perfect too early, frozen with a flat training loss),
throughput_starved (GPU snapshots averaging <= 20%) and alloc_retries (the allocator's retry counter growing),
plus the parser's MetricLogger evaluation lines and snake-case training-loss keys."""
from __future__ import annotations

import random

from llmtriage import analyze
from llmtriage.detect.metric_parse import parse_line


def _kinds(text: str) -> list[tuple[str, str]]:
    return [(f.rule_id, f.category) for f in analyze(text).findings if f.severity == "error"]


def _finetune(accs, losses, epochs=50, samples=9000, eval_loss=None):
    out = [f"Start training for {epochs} epochs"]
    for ep, (acc, loss) in enumerate(zip(accs, losses)):
        out.append(f"Epoch: [{ep}]  [ 0/90]  eta: 0:01:00  lr: 0.000400  loss: {loss * (1.5 if ep == 0 else 1.002):.4f} ({loss:.4f})  time: 0.5  data: 0.01  max mem: 9000")
        out.append(f"Epoch: [{ep}]  [89/90]  eta: 0:00:00  lr: 0.000400  loss: {loss:.4f} ({loss:.4f})  time: 0.5  data: 0.01  max mem: 9000")
        out.append(f"Test:  [ 0/20]  eta: 0:00:10  loss: {loss / 9:.4f} ({loss / 9:.4f})  acc1: {acc:.4f} ({acc:.4f})  time: 0.5")
        out.append(f"* Acc@1 {acc:.3f} Acc@5 100.000 loss {eval_loss if eval_loss is not None else loss / 9:.3f}")
        out.append(f"Accuracy of the network on the {samples} val images: {acc:.2f}%")
    return "\n".join(out) + "\n"


def test_metriclogger_eval_lines_are_not_training_records():
    assert parse_line(b"Test:  [ 0/19]  eta: 0:00:22  loss: 0.4312 (0.4312)  acc1: 90.0 (90.0)") is None
    assert parse_line(b"Val:  [10/18]  eta: 0:00:41  loss: 0.0301 (0.0301)  accuracy: 1.0000 (1.0000)") is None
    assert parse_line(b"Epoch: [3]  [ 10/121]  lr: 0.000309  loss: 0.0148 (0.0148)  class_acc: 1.0000")[1] == 0.0148
    assert parse_line(b"Epoch:153, Training_loss:0.6822, Eval_loss:0.6876, Eval_acc:0.5298")[1] == 0.6822
    assert parse_line(b"epoch 1 iter 50/135 train_loss 1.3863 lr 0.000500")[1] == 1.3863


def test_perfect_held_out_accuracy_after_the_first_epochs_is_loss_suspicious():
    text = _finetune([99.97, 100.0, 100.0, 100.0], [0.7, 0.05, 0.02, 0.01])
    assert ("metric-eval-perfect-early", "loss-suspicious") in _kinds(text)


def test_high_late_small_or_started_good_accuracy_is_not_eval_perfect():
    # high but not perfect (a ViT fine-tuned on CIFAR-10)
    assert not _kinds(_finetune([97.0, 98.3, 98.9, 98.95], [0.9, 0.6, 0.5, 0.45]))
    # perfect only on a small set
    assert "metric-eval-perfect-early" not in dict(_kinds(_finetune([100.0] * 4, [0.7, 0.05, 0.02, 0.01], samples=300)))
    # perfect late in the schedule
    accs = [80 + i for i in range(19)] + [100.0, 100.0]
    assert "metric-eval-perfect-early" not in dict(_kinds(_finetune(accs, [2.0 * 0.8 ** i for i in range(21)], epochs=25)))
    # started good: no fall of the training loss (resumed or already trained)
    assert "metric-eval-perfect-early" not in dict(_kinds(_finetune([100.0] * 4, [0.05, 0.048, 0.047, 0.046])))


def test_identical_eval_summaries_with_a_flat_training_loss_are_no_grad():
    losses = [2.48] + [1.995, 1.9961, 1.9952, 1.9947, 1.995, 1.9958, 1.9944, 1.9953]
    text = _finetune([71.4] + [78.612] * 8, losses, eval_loss=0.702)
    assert ("metric-eval-summary-frozen", "no-grad") in _kinds(text)


def test_identical_eval_summaries_while_the_training_loss_falls_are_healthy():
    losses = [2.4 - 0.05 * i for i in range(9)]
    assert not _kinds(_finetune([71.4] + [78.612] * 8, losses, eval_loss=0.702))


def _keras(val_acc, losses):
    out = []
    for ep, (va, loss) in enumerate(zip(val_acc, losses), 1):
        out.append(f"Epoch {ep}/{len(losses)}")
        out.append(f"131/131 [==============================] - 9s 68ms/step - loss: {loss:.4f} - accuracy: 0.6100 - val_loss: {0.6650 + 0.0003 * ((ep * 7) % 11):.4f} - val_accuracy: {va:.4f}")
    return "\n".join(out) + "\n"


def test_inline_val_accuracy_frozen_with_a_flat_loss_is_no_grad_but_saturated_or_moving_is_not():
    rnd = random.Random(5)
    flat = [0.6661 + rnd.uniform(-0.0009, 0.0009) for _ in range(20)]
    assert ("metric-eval-summary-frozen", "no-grad") in _kinds(_keras([0.6176] * 20, flat))
    assert "metric-eval-summary-frozen" not in dict(_kinds(_keras([1.0] * 20, flat)))        # saturated at 100%
    assert "metric-eval-summary-frozen" not in dict(_kinds(_keras([0.6176] * 20, [0.9 - 0.01 * i for i in range(20)])))


def _rl_steps(n):
    return "".join(f"step:{s} - actor/pg_loss:0.001 - actor/grad_norm:0.2 - actor/lr:1e-06 - critic/score/mean:0.3\n" for s in range(1, n + 1))


def _dmon(utils):
    return "# gpu    sm   mem   enc   dec\n# Idx     %     %     %     %\n" + "".join(f"    {i}    {u}     5     0     0\n" for i, u in enumerate(utils))


def test_snapshot_with_gpus_idle_and_the_rest_barely_busy_is_throughput_low():
    text = _rl_steps(5) + _dmon([31, 27, 0, 29, 0, 33, 24, 0]) + _rl_steps(2)
    assert ("metric-throughput-low", "throughput-low") in _kinds(text)


def test_snapshot_with_a_busy_gpu_or_before_training_is_not_starved():
    assert not _kinds(_rl_steps(5) + _dmon([55, 0, 31, 18]) + _rl_steps(2))
    assert not _kinds(_dmon([31, 27, 0, 29, 0, 33, 24, 0]) + _rl_steps(6))


def _retries(values):
    return "".join(f"step {10 * (i + 1)} | loss {5.0 - 0.01 * i:.4f} | lr 4.0e-04 | num_alloc_retries: {v}\n" for i, v in enumerate(values))


def test_alloc_retry_counter_growing_every_step_is_throughput_low_and_a_warm_up_one_is_not():
    assert ("metric-allocator-retries-growing", "throughput-low") in _kinds(_retries([30 * i for i in range(1, 9)]))
    assert not _kinds(_retries([2, 3, 3, 3, 3, 3, 3, 3]))
