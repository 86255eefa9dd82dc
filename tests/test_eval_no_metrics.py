"""detect/eval_no_metrics: HF Trainer evaluations that printed only their timing (no labels found)."""
from __future__ import annotations

import llmtriage


def _run(eval_record: str, epochs: int = 3) -> str:
    lines = ["trainable params: 1,838,082 || all params: 357,199,876 || trainable%: 0.5146"]
    for e in range(1, epochs + 1):
        lines += [f"{{'loss': {1.6 - 0.1 * e:.4f}, 'learning_rate': {5e-4 - 1e-5 * e:.7f}, 'epoch': {e - 0.01:.2f}}}",
                  eval_record.replace("EPOCH", f"{e}.0")]
    lines.append("{'train_runtime': 612.44, 'train_samples_per_second': 139.5, 'train_steps_per_second': 4.36, "
                 "'train_loss': 0.81, 'epoch': 3.0}")
    return "\n".join(lines) + "\n"


def _errors(text: str):
    rep = llmtriage.analyze(text.encode())
    return [f for f in rep.findings if f.severity == "error"]


def test_evaluations_with_timing_only_are_reported():
    errs = _errors(_run("{'eval_runtime': 3.9976, 'eval_samples_per_second': 279.467, "
                        "'eval_steps_per_second': 8.633, 'epoch': EPOCH}"))
    assert errs and errs[0].rule_id == "metric-eval-without-metrics" and errs[0].category == "unknown"
    assert errs[0].count == 3 and errs[0].captures["evals"] == "3"


def test_evaluations_with_a_loss_or_a_metric_are_healthy():
    assert not _errors(_run("{'eval_loss': 0.52, 'eval_runtime': 3.99, 'eval_samples_per_second': 279.4, "
                            "'eval_steps_per_second': 8.6, 'epoch': EPOCH}"))
    assert not _errors(_run("{'eval_accuracy': 0.91, 'eval_runtime': 3.99, 'eval_samples_per_second': 279.4, "
                            "'eval_steps_per_second': 8.6, 'epoch': EPOCH}"))
    # one timing-only evaluation (a single timing run) is not enough
    assert not _errors(_run("{'eval_runtime': 3.99, 'eval_samples_per_second': 279.4, 'eval_steps_per_second': 8.6, "
                            "'epoch': EPOCH}", epochs=1))
    # a final evaluation with metrics beside earlier timing-only ones: the evaluations did measure
    text = _run("{'eval_runtime': 3.99, 'eval_samples_per_second': 279.4, 'eval_steps_per_second': 8.6, 'epoch': EPOCH}")
    text += "{'eval_loss': 0.41, 'eval_f1': 0.88, 'eval_runtime': 4.1, 'eval_samples_per_second': 270.1, 'epoch': 3.0}\n"
    assert not _errors(text)
