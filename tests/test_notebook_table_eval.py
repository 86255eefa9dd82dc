"""The notebook loss table's Validation Loss column is read as evaluation losses, and a table without an Epoch
column takes each row's epoch from the run plan (Num Epochs / Total steps), so the train/eval checks see it."""
from __future__ import annotations

import llmtriage

PLAN = ("==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1\n"
        "   \\\\   /|    Num examples = 8,000 | Num Epochs = 1\n"
        "O^O/ \\_/ \\    Batch size per device = 8 | Gradient Accumulation steps = 1\n"
        "\\        /    Total batch size = 8 | Total steps = 1,100\n")


def _table(evals) -> str:
    rows = ["Step\tTraining Loss\tValidation Loss"]
    for i in range(40):
        step = 25 * (i + 1)
        train = 1.9 - 0.024 * i
        ev = evals(i) if (i + 1) % 4 == 0 else None
        rows.append(f"{step}\t{train:.6f}\t" + (f"{ev:.6f}" if ev is not None else "No log"))
    return "\n".join(rows) + "\n"


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_a_validation_column_that_climbs_while_training_falls_in_the_first_epoch_is_read():
    errs = _errors(PLAN + _table(lambda i: 1.7 + 0.09 * i))
    assert errs and errs[0].rule_id == "metric-train-loss-far-below-eval"
    assert "epoch 0.9" in errs[0].message


def test_a_validation_column_that_tracks_the_training_loss_is_healthy():
    assert not _errors(PLAN + _table(lambda i: 1.95 - 0.024 * i))


def test_without_the_run_plan_the_rows_have_no_epoch_and_no_first_epoch_claim_is_made():
    assert not _errors(_table(lambda i: 1.7 + 0.09 * i))


def test_the_table_rows_carry_the_evaluation_losses():
    from llmtriage.detect.metrics import MetricTracker
    t = MetricTracker()
    text = (PLAN + _table(lambda i: 1.7 + 0.09 * i)).encode()
    t.feed_block(text, text, 1)
    assert len(t.evals) == 10 and t.evals[0][1] == "1.970000"
    assert t.plan_epochs == 1 and t.plan_steps == 1100
    assert abs(t.records()[-1].epoch - 1000 / 1100) < 1e-9
