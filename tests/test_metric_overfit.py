"""Evaluation loss climbing while the training loss falls over several epochs (detect/metric_overfit.py)."""
from __future__ import annotations

import llmtriage


def _run(train: list[float], evals: list[float], epochs: float, per_eval: int = 4) -> str:
    """Trainer dicts: `per_eval` training records, then one evaluation, spread evenly over `epochs`."""
    out, n = [], len(train)
    for i, x in enumerate(train):
        ep = (i + 1) * epochs / n
        out.append(f"{{'loss': {x:.4f}, 'grad_norm': 0.8, 'learning_rate': 0.0002, 'epoch': {ep:.2f}}}\n")
        if (i + 1) % per_eval == 0 and (i + 1) // per_eval <= len(evals):
            out.append(f"{{'eval_loss': {evals[(i + 1) // per_eval - 1]:.4f}, 'eval_runtime': 6.1, 'epoch': {ep:.2f}}}\n")
    out.append("{'train_runtime': 901.2, 'train_samples_per_second': 9.8, 'train_loss': 0.31, 'epoch': %.1f}\n" % epochs)
    return "".join(out)


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def _falling(n: int, start: float = 1.6, end: float = 0.08) -> list[float]:
    return [start * (end / start) ** (i / (n - 1)) for i in range(n)]


def test_eval_loss_rising_at_every_evaluation_over_many_epochs_is_overfitting():
    evals = [1.22, 1.24, 1.43, 1.60, 1.79, 1.95, 2.14]
    errs = _errors(_run(_falling(28), evals, epochs=40))
    assert errs and errs[0].rule_id == "metric-eval-loss-rising-overfit" and errs[0].category == "loss-suspicious"
    assert "1.22" in errs[0].message and "2.14" in errs[0].message


def test_a_healthy_fine_tune_whose_eval_loss_creeps_up_in_the_last_epoch_is_not():
    # three epochs, eval best at epoch 1 then +12%: common, not over-fitting worth an error
    assert not _errors(_run(_falling(12, 1.6, 0.7), [1.10, 1.08, 1.21], epochs=3, per_eval=4))
    # many epochs but the evaluation loss dips back down between rises: not a steady climb
    assert not _errors(_run(_falling(28), [1.22, 1.24, 1.43, 1.30, 1.79, 1.60, 2.14], epochs=40))
    # a steady rise to only 1.3x the best
    assert not _errors(_run(_falling(28), [1.22, 1.24, 1.28, 1.31, 1.40, 1.45, 1.55], epochs=40))


def test_an_eval_loss_rising_while_the_training_loss_rises_too_is_not_read_as_overfitting():
    train = [1.6, 1.2, 1.0, 0.9] + [0.9 + 0.05 * i for i in range(24)]
    errs = _errors(_run(train, [1.22, 1.24, 1.43, 1.60, 1.79, 1.95, 2.14], epochs=40))
    assert not any(e.rule_id == "metric-eval-loss-rising-overfit" for e in errs)
