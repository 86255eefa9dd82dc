"""A reward function that maps its own failures to a reward of 0 (rules/no-grad/reward-fn-failure-scored-zero.yaml)
is the stated cause of an RL run's all-zero gradient (rules/verdict.yaml `explains_metric`), with its own action
reason (rules/actions.yaml `reward-failures-scored-zero`); a few such failures in a run that learns stay a warning."""
from __future__ import annotations

import llmtriage

FAIL = ("WARNING 05-02 10:11:40 http_scorer_client.py:88: HTTP scorer request to http://10.1.0.7:8089/score failed: "
        "ConnectionError(Connection refused); returning score 0.0\n")


def _records(grad: float, score: float, n: int = 12) -> str:
    """verl step records; with grad > 0 the score rises and the loss moves from step to step."""
    def rec(i: int) -> str:
        g = grad * (1 - 0.03 * i)
        s = score * (1 + 0.05 * i)
        return (f"(TaskRunner pid=1) step:{i} - critic/score/mean:{s:.3f} - critic/score/std:{s:.3f} - "
                f"actor/pg_loss:{g / 10 * (1 + 0.2 * (i % 3)):.4f} - actor/grad_norm:{g:.3f} - actor/lr:1.000e-06\n")
    return "".join(rec(i) for i in range(1, n + 1))


def test_scored_zero_failures_explain_a_zero_gradient() -> None:
    rep = llmtriage.analyze(FAIL * 3 + _records(0.0, 0.0) + "(TaskRunner pid=1) Training finished at step 12.\n")
    errors = [f for f in rep.findings if f.severity == "error"]
    assert errors and errors[0].rule_id == "reward-fn-failure-scored-zero"
    assert errors[0].judgement["context"] == "explains-metric"
    metric = next(f for f in rep.findings if f.rule_id == "metric-zero-grad")
    assert metric.severity == "warning" and metric.judgement["context"] == "explained"
    assert errors[0].action == "fix" and "scorer" in (errors[0].action_reason or "")


def test_occasional_scored_zero_failures_in_a_learning_run_stay_a_warning() -> None:
    rep = llmtriage.analyze(FAIL + _records(0.21, 0.3) + "(TaskRunner pid=1) Training finished at step 12.\n")
    assert not [f for f in rep.findings if f.severity == "error"]
    sig = next(f for f in rep.findings if f.rule_id == "reward-fn-failure-scored-zero")
    assert sig.severity == "warning"
