"""metric-caught-exception-repeats: one caught exception at every evaluation, the metric it feeds exactly 0
(analyzer/detect/caught_repeat.py)."""
from __future__ import annotations

import llmtriage


def _log(evals: int = 5, exc: str = "KeyError('question')", metric: str = "mean_reward=0.0 accuracy=0.0 format_accuracy=0.0",
         rows: tuple[int, ...] = (3, 17, 42)) -> str:
    out = "I0610 04:14:21.003852 1398 train_rl.py:322] Reward functions: ['check_answer', 'check_numbers']\n"
    step = 0
    for e in range(evals):
        for r in rows:
            out += f"W0610 04:{16 + e:02d}:49.230118 1398 evaluate_rl.py:118] [eval-reward] reward_fn failed on row {r}: {exc}\n"
        out += f"I0610 04:{16 + e:02d}:50.230118 1398 evaluate_rl.py:204] eval: num_samples=128 {metric}\n"
        for _ in range(5):
            step += 10
            out += (f"I0610 04:{20 + e:02d}:45.236758 1398 metric_logger.py:96] step={step} loss=0.0{step % 7} "
                    f"rewards/sum={1 + step / 100:.4f} kl=0.0002{step % 9}\n")
    return out


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_a_caught_exception_at_every_evaluation_with_a_zero_metric_is_an_unknown_error():
    [f] = _errors(_log())
    assert (f.rule_id, f.category) == ("metric-caught-exception-repeats", "unknown")
    assert "KeyError('question')" in f.message and "5 separate bursts" in f.message


def test_occasional_caught_warnings_and_non_zero_metrics_stay_healthy():
    # one burst only: a few bad rows once
    assert _errors(_log(evals=1)) == []
    # the same exception at every evaluation, but the evaluation still scores (some rows skipped, the rest count)
    assert _errors(_log(metric="mean_reward=0.41 accuracy=0.38 format_accuracy=0.0")) == []
    # a caught warning without an exception repr
    assert _errors(_log(exc="retrying in 2 s")) == []
