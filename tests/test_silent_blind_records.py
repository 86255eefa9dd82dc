"""Silent failures read from records that print no gradient norm and from formats read since session 30: MMF's
logistics lines, comma-separated `step N, loss x` fields, `Epoch [e/E]` ordinals, and a loss that collapses to ~0 in the
first epoch without a printed gradient."""
from __future__ import annotations

from llmtriage.detect import metric_detect as D
from llmtriage.detect import metric_parse as P
from llmtriage.detect.metrics import MetricTracker

_MMF = ("2022-03-14T16:24:02 | mmf.trainers.callbacks.logistics: progress: {n}/22000, train/hateful_memes/cross_entropy: "
        "{loss}, train/total_loss: {loss}, train/total_loss/avg: 0.7100, max mem: 7421.0, experiment: run, epoch: 1, "
        "num_updates: {n}, iterations: {n}, max_updates: 22000, lr: {lr}, ups: 0.51, time: 03m 18s 114ms, eta: 20h 01m 12s")


def test_mmf_progress_line_is_a_record_and_lr_point_is_below_precision():
    step, loss, grad, lr, _ = P.parse_line(_MMF.format(n=200, loss="0.6921", lr="0.").encode())
    assert (step, loss, grad, lr) == (200, 0.6921, None, None)
    assert P.parse_line(_MMF.format(n=300, loss="0.6800", lr="0.00001").encode())[3] == 1e-05
    t = MetricTracker.of_text("".join(_MMF.format(n=i * 100, loss=f"{0.7 - i / 100:.4f}", lr="0.") + "\n" for i in range(1, 6)))
    assert [r.step for r in t.records()] == [100, 200, 300, 400, 500]


def test_comma_separated_step_loss_fields_and_bracketed_epoch_ordinal():
    t = MetricTracker.of_text("epoch 0, step 100, loss 0.6931, auc 0.5012\nepoch 0, step 200, loss 0.6013, auc 0.61\n")
    assert [(r.step, r.loss) for r in t.records()] == [(100, 0.6931), (200, 0.6013)]
    # "Epoch [1/5]" is the first epoch (an ordinal), not one epoch completed
    assert P.parse_line(b"Epoch [1/5], Step [100/1875], Loss: 0.2101")[4] == 0.0


def _blind(first_epoch_tail: bool, start: float = 0.6931) -> str:
    """A loop that prints no gradient: `Epoch [e/5], Step [s/1875], Loss: x`, ~0 from the 7th record on."""
    lines = []
    for k in range(40):
        ep = 1 if first_epoch_tail or k < 30 else 2
        loss = start * 0.5 ** k if k < 6 else 1e-4 * (1 + (k % 5) / 10)
        lines.append(f"Epoch [{ep}/5], Step [{(k % 30 + 1) * 50}/1875], Loss: {loss:.6f}\n")
    return "".join(lines)


def test_blind_collapse_in_first_epoch_is_an_error():
    found = [a for a in D.detect(MetricTracker.of_text(_blind(True))) if a.kind == "collapse"]
    assert found and found[0].severity == "error" and found[0].numbers["grad_norm"] is None


def test_blind_collapse_needs_a_hundredfold_drop_below_fall_from():
    # from 0.005 to 1e-4 is a low start, not a collapse from a real loss level
    assert not [a for a in D.detect(MetricTracker.of_text(_blind(True, start=0.005))) if a.kind == "collapse"]


def test_loss_reaching_zero_only_in_a_later_epoch_is_no_collapse():
    text = "".join(f"Epoch [{e}/10], Step [100/391], Loss: {0.69 * 0.6 ** e if e < 7 else 0.004 + e / 1e4:.6f}\n"
                   for e in range(1, 11) for _ in range(3))
    assert not [a for a in D.detect(MetricTracker.of_text(text)) if a.kind == "collapse"]
