"""Silent metric failures decided by evidence in the printed records: digits as printed (a flat loss),
a trainer's gradient guard skipping every step, validation perfect from the first epochs, Composer's
gradient-norm keys, and a missing optional module the program only printed."""
from __future__ import annotations

import math

from llmtriage import get_engine, load_rules, scan_source
from llmtriage.detect import metric_detect as D
from llmtriage.detect import metric_parse as P
from llmtriage.detect.metric_flat_exact import exact_flat
from llmtriage.detect.metric_guard import guard_skips
from llmtriage.detect.metric_val_leak import validation_perfect
from llmtriage.detect.metrics import MetricTracker

_tracker = MetricTracker.of_text


def test_printed_digits_keep_trailing_zeros():
    assert P.printed_digits(b"4.600") == 4
    assert P.printed_digits(b"0.0012") == 2
    assert P.printed_digits(b"2.569e-04") == 4
    assert P.printed_digits(b"-10.90") == 4
    step, loss, *_ = P.parse_line(b"Epoch 0:  14%|#4   | 100/704 [00:44<04:29, 2.24it/s, v_num=11, train_loss=4.600]")
    assert loss == 4.6 and getattr(loss, "digits", 0) == 4


def _bar(values):
    return "".join(f"Epoch 0:  {i // 10}%|#    | {i}/900 [00:{i % 60:02d}<03:00, 2.27it/s, v_num=3, train_loss={v}]\n"
                   for i, v in enumerate(values))


def test_same_printed_value_on_many_steps_is_a_flat_loss_error():
    t = _tracker(_bar(["2.303"] * 60))
    found = D.detect(t)
    exact_flat(t, found)
    [a] = [a for a in found if a.kind == "flat"]
    assert a.severity == "error" and a.numbers["exact"] == "2.303"


def test_few_printed_digits_or_a_short_run_stay_warnings():
    for values in (["2.3"] * 60, ["2.303"] * 30):
        t = _tracker(_bar(values))
        found = D.detect(t)
        exact_flat(t, found)
        assert [a.severity for a in found if a.kind == "flat"] == ["warning"]


def _guard(steps, every_record=True, norm="1.37"):
    out = []
    for s in steps:
        out.append(f"2025-03-01 10:{s // 60 % 60:02d}:{s % 60:02d} WARNING trainer: iter {s}: grad_norm={norm} above "
                   f"max_spike 1.0 - skipping optimizer update")
        if every_record or s % 10 == 0:
            out.append(f"2025-03-01 10:{s // 60 % 60:02d}:{s % 60:02d} INFO trainer: step={s} loss={0.52 + 0.013 * math.sin(s * 1.7):.4f} lr=1e-4")
    return "\n".join(out) + "\n"


def test_guard_skipping_every_step_to_the_end_is_an_error():
    t = _tracker(_guard(range(100, 140)))
    [a] = guard_skips(t, D.detect(t))
    assert a.kind == "guard_skip" and a.category == "no-grad" and a.severity == "error"
    assert a.numbers["norm_max"] == "1.37" and a.numbers["skipped"] == 40
    t = _tracker(_guard(range(100, 140), norm="nan"))
    [a] = guard_skips(t, D.detect(t))
    assert a.category == "nan-loss" and a.numbers["nonfinite"] == 40


def test_occasional_guard_skips_or_steps_let_through_are_healthy():
    t = _tracker(_guard(range(100, 1000, 37)))                      # now and then
    assert guard_skips(t, D.detect(t)) == []
    text = _guard(range(100, 140)) + "".join(f"INFO trainer: step={s} loss={0.45 + 0.01 * math.sin(s * 1.3):.4f} lr=1e-4\n" for s in range(140, 160))
    t = _tracker(text)                                              # training went on after the skips
    assert guard_skips(t, D.detect(t)) == []
    t = _tracker("Gradient guard: skip optimizer step when grad norm > 2.0\n" * 20)    # a configuration echo
    assert t.guard["count"] == 0


def _keras(rows):
    out = []
    def f(x):
        return x if isinstance(x, str) else f"{x:.4f}" if abs(x) >= 1e-3 else f"{x:.4e}"
    for i, row in enumerate(rows, 1):
        loss, acc, vloss, vacc = (f(x) for x in row)
        out += [f"Epoch {i}/{len(rows)}",
                f"120/120 [==============================] - 4s 31ms/step - loss: {loss} - accuracy: {acc} - "
                f"val_loss: {vloss} - val_accuracy: {vacc}"]
    return "\n".join(out) + "\n"


def test_validation_perfect_from_the_start_and_far_below_train_is_a_leak():
    rows = [(0.61, 0.71, 0.05, 0.9911)] + [(0.3 - 0.02 * i, 0.9 + 0.005 * i, 0.003 / (i + 1), "1.0000") for i in range(8)]
    t = _tracker(_keras(rows))
    [a] = validation_perfect(t, D.detect(t))
    assert a.kind == "val_perfect" and a.category == "loss-suspicious" and a.severity == "error"
    assert a.numbers["first"] == 2 and a.numbers["evals"] == 8


def test_validation_a_little_better_or_imperfect_or_late_is_healthy():
    dropout = [(0.5 - 0.03 * i, 0.8 + 0.01 * i, 0.4 - 0.03 * i, 0.85 + 0.01 * i) for i in range(10)]
    easy_both = [(0.05, "1.0000", 0.001, "1.0000")] * 8                 # training perfect too: an easy task
    late = [(0.9 - 0.05 * i, 0.6 + 0.02 * i, 0.8 - 0.05 * i, 0.7 + 0.02 * i) for i in range(6)] + \
           [(0.3, 0.95, 0.01, "1.0000")] * 5
    negative = [(-0.6, 0.9, -0.7, "1.0000")] * 8                        # Dice + CE losses below zero
    for rows in (dropout, easy_both, late, negative):
        t = _tracker(_keras(rows))
        assert validation_perfect(t, D.detect(t)) == []


def test_composer_grad_norm_keys():
    text = "".join(f"[batch={b}/4800]:\n\t Train loss/train/total: {3.0 + b / 1000:.4f}\n\t Train {key}: 0.{b}\n"
                   for b, key in ((10, "grad_l2_norm/step"), (20, "gradient_norms/l2_norm/model"),
                                  (30, "l2_norm/grad/global"), (40, "l2_norm/grad/model.blocks.0")))
    t = _tracker(text)
    assert [r.grad_norm for r in t.records()] == [0.1, 0.2, 0.3, None]


def test_missing_optional_module_printed_then_training_goes_on_is_survived():
    epochs = "".join(f"2024-05-02 11:{i:02d}:00.1: epoch: {i}\n2024-05-02 11:{i:02d}:10.1: train loss : {0.9 - i * 0.01:.4f}\n"
                     f"2024-05-02 11:{i:02d}:20.1: This epoch took 70.1 s\n" for i in range(30))
    text = ("2024-05-02 11:00:00.0: Unable to plot network architecture:\n"
            "2024-05-02 11:00:00.0: No module named 'hiddenlayer'\n" + epochs)
    engine = get_engine(load_rules())
    [f] = [f for f in scan_source(engine, text.encode()).findings if f.category == "missing-dependency"]
    assert f.severity == "warning" and f.judgement["context"] == "optional-import-went-on"
    raised = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    import hiddenlayer\n" \
             "ModuleNotFoundError: No module named 'hiddenlayer'\n"
    [f] = [f for f in scan_source(engine, raised.encode()).findings if f.category == "missing-dependency"]
    assert f.severity == "error"
    # a library's own warning that an extension is missing foretells a failure: not an optional import
    warned = ("/x/awq/modules/linear/gemm.py:14: UserWarning: AutoAWQ could not load GEMM kernels extension. "
              "Details: No module named 'awq_ext'\n" + epochs)
    found = [f for f in scan_source(engine, warned.encode()).findings if f.category == "missing-dependency"]
    assert all((f.judgement or {}).get("context") != "optional-import-went-on" for f in found)
