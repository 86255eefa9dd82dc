"""RL judgement: a KL that ran away while the rewards collapsed (detect/rl_divergence.py), and a
recovered server-side signature whose path the client's death names (detect/named_by_death.py)."""
from __future__ import annotations

import llmtriage
from llmtriage.findings import Finding


def _errors(rep: llmtriage.Report) -> list[Finding]:
    return [f for f in rep.findings if f.severity == "error"]


def _trl(records: list[tuple[float, float, float]]) -> str:
    head = "[INFO|trainer.py:2369] 2025-02-09 21:03:22,501 >> ***** Running training *****\n"
    lines = [f"{{'loss': {kl * 0.04:.4f}, 'grad_norm': 0.8, 'learning_rate': 1e-06, 'reward': {r}, "
             f"'reward_std': {s}, 'completion_length': 900.0, 'kl': {kl}, 'epoch': {i / 100:.2f}}}"
             for i, (r, s, kl) in enumerate(records)]
    return head + "\n".join(lines) + "\n"


def test_kl_runaway_with_zero_reward_std_is_a_nan_loss_error():
    recs = [(0.4 + 0.01 * i, 0.6, 1e-4 * (i + 1)) for i in range(12)]
    recs += [(0.05, 0.0, 6.0 + i) for i in range(5)]
    errs = _errors(llmtriage.analyze(_trl(recs)))
    assert errs and errs[0].rule_id == "metric-rl-kl-diverged"
    assert errs[0].category == "nan-loss" and errs[0].action == "fix"
    assert errs[0].captures["std_zero"] == "0"


def test_kl_runaway_with_falling_reward_needs_no_std():
    text = "".join(
        f"(TaskRunner pid=1) step:{i + 1} - actor/kl_loss:{kl} - actor/pg_loss:0.01 - actor/grad_norm:0.3 - "
        f"critic/score/mean:{r}\n"
        for i, (r, kl) in enumerate([(0.5, 0.001)] * 8 + [(0.05, 9.0), (0.02, 11.0), (0.0, 14.0)]))
    errs = _errors(llmtriage.analyze(text))
    assert errs and errs[0].rule_id == "metric-rl-kl-diverged"
    assert errs[0].captures["peak"] == "0.5"


def _verl(rows: list[tuple[float, float]]) -> str:
    return "".join(f"(TaskRunner pid=1) step:{i + 1} - actor/kl_loss:{kl} - actor/pg_loss:0.01 - critic/score/mean:{r}\n"
                   for i, (r, kl) in enumerate(rows))


def test_small_kl_estimator_that_rose_300x_while_scores_collapsed_is_an_error():
    # verl low_var_kl: 1e-3 when healthy, clamped at 10; here it plateaus near 1.2, far below kl_min
    rows = [(0.5 + 0.002 * i, 0.001) for i in range(12)] + [(-0.9, 1.1), (-0.95, 1.2), (-0.96, 1.3)]
    errs = _errors(llmtriage.analyze(_verl(rows)))
    assert errs and errs[0].rule_id == "metric-rl-kl-diverged"
    assert errs[0].captures["kl_min"] == "0.5"


def test_small_kl_rise_below_the_floor_or_with_rewards_holding_is_no_finding():
    low = [(0.5, 0.001)] * 12 + [(-0.9, 0.3), (-0.95, 0.35), (-0.96, 0.4)]        # collapsed, but KL < kl_floor
    held = [(0.5, 0.001)] * 12 + [(0.6, 1.1), (0.62, 1.2), (0.63, 1.3)]          # KL up 1000x, rewards fine
    for rows in (low, held):
        assert not [f for f in llmtriage.analyze(_verl(rows)).findings if f.rule_id == "metric-rl-kl-diverged"]


def test_kl_that_rose_while_rewards_stayed_healthy_is_no_finding():
    recs = [(0.4 + 0.02 * i, 0.5, 1e-3 * (i + 1)) for i in range(10)] + [(0.7, 0.4, 6.0 + i) for i in range(4)]
    assert not [f for f in llmtriage.analyze(_trl(recs)).findings if f.rule_id == "metric-rl-kl-diverged"]


def test_kl_spike_that_came_back_is_no_finding():
    recs = [(0.4, 0.5, 1e-3)] * 8 + [(0.0, 0.0, 12.0), (0.4, 0.5, 0.002), (0.45, 0.5, 0.002), (0.5, 0.5, 0.002)]
    assert not [f for f in llmtriage.analyze(_trl(recs)).findings if f.rule_id == "metric-rl-kl-diverged"]


def test_too_few_records_are_no_finding():
    recs = [(0.4, 0.5, 1e-4), (0.0, 0.0, 9.0), (0.0, 0.0, 10.0), (0.0, 0.0, 12.0)]
    assert not [f for f in llmtriage.analyze(_trl(recs)).findings if f.rule_id == "metric-rl-kl-diverged"]


SERVER_REJECTS = (
    "20251210-09:14:02.006 StatsLogger INFO: Epoch 1/10 Step 1/117 Train step 1/1170 done.\n"
    "[2025-12-10 09:14:11] INFO:     10.3.1.22:50122 - \"POST /update_weights_from_disk HTTP/1.1\" 200 OK\n"
    "[2025-12-10 09:14:12] Update weights from disk failed: Cannot find any model weights with `/shared/ckpt/run7/weight_update_v1`\n"
    "[2025-12-10 09:14:12] INFO:     10.3.1.22:50124 - \"POST /update_weights_from_disk HTTP/1.1\" 400 Bad Request\n"
    "[2025-12-10 09:14:12] INFO:     10.3.1.22:50126 - \"POST /generate HTTP/1.1\" 200 OK\n"
)


def _client_death(path: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/workspace/rl/train.py", line 201, in main\n'
            "    rollout.update_weights(meta).result()\n"
            '  File "/workspace/rl/engine/remote.py", line 377, in _update_weights_from_disk\n'
            "    raise RuntimeError(\n"
            f"RuntimeError: Failed to update weights from disk on server 10.3.1.22:36402: Failed to get weights iterator: {path}.\n")


def test_recovered_signature_named_by_the_death_is_the_cause():
    rep = llmtriage.analyze(SERVER_REJECTS + _client_death("/shared/ckpt/run7/weight_update_v1"))
    errs = _errors(rep)
    assert errs[0].rule_id == "hf-no-weights-in-dir" and errs[0].role == "cause"
    assert errs[0].judgement["context"] == "named-by-death"
    assert any(f.rule_id == "unknown" and f.role == "symptom" for f in rep.findings)


def test_recovered_signature_of_another_path_stays_demoted():
    rep = llmtriage.analyze(SERVER_REJECTS + _client_death("/shared/ckpt/run7/weight_update_v2"))
    errs = _errors(rep)
    assert errs[0].rule_id == "unknown" and errs[0].role == "cause"
    assert all(f.severity != "error" for f in rep.findings if f.rule_id == "hf-no-weights-in-dir")


RETRIED = (
    "(SGLangEngine pid=5) KeyError: 'weight_version'\n"
    "(SGLangEngine pid=5) [2026-02-11 03:22:36] INFO:     10.40.2.7:40332 - \"POST /generate HTTP/1.1\" 500 Internal Server Error\n"
    "(RolloutManager pid=9) WARNING http_utils.py:141: POST http://10.40.2.7:30001/generate failed (500), retry 1/3\n"
    "(RolloutManager pid=9) WARNING http_utils.py:141: POST http://10.40.2.7:30001/generate failed (500), retry 2/3\n"
    "(RolloutManager pid=9) WARNING http_utils.py:141: POST http://10.40.2.7:30001/generate failed (500), retry 3/3\n"
    "Traceback (most recent call last):\n"
    '  File "/root/miles/miles/utils/http_utils.py", line 152, in post\n'
    '    raise RuntimeError(f"POST {url} failed after {retries} retries: {resp.status_code}")\n'
)


def test_retried_error_whose_retries_ran_out_is_the_cause():
    rep = llmtriage.analyze(RETRIED + "RuntimeError: POST http://10.40.2.7:30001/generate failed after 3 retries: 500\n")
    errs = _errors(rep)
    assert errs[0].rule_id == "sglang-meta-info-weight-version-missing"
    assert errs[0].judgement["context"] == "retries-exhausted"


def test_retried_error_then_another_death_stays_recovered():
    rep = llmtriage.analyze(RETRIED + "RuntimeError: rollout buffer is empty\n")
    assert _errors(rep)[0].rule_id == "unknown"
