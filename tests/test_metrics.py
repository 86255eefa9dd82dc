"""Metric parsing and the metric detectors (engine-produced findings `metric-*`)."""
from __future__ import annotations

import io
import math
import random
import tracemalloc

import pytest

from llmtriage.detect import metric_detect as D
from llmtriage.detect import metric_parse as P
from llmtriage.detect import metrics as M
from llmtriage import scan_source
from llmtriage.engine.logparse import iter_blocks, match_view


@pytest.mark.parametrize("line, expect", [
    (b"{'loss': 2.3456, 'grad_norm': 0.91, 'learning_rate': 1.9e-05, 'epoch': 0.12}", (None, 2.3456, 0.91, 1.9e-05, 0.12)),
    (b"{'loss': '4.131', 'grad_norm': 'nan', 'learning_rate': '2e-05', 'epoch': '0.5'}", (None, 4.131, math.nan, 2e-05, 0.5)),
    (b" iteration      100/  500000 | consumed samples: 51200 | learning rate: 2.9E-04 | lm loss: 7.215E+00 | loss scale: 65536.0 | grad norm: 3.210 |",
     (100, 7.215, 3.21, 2.9e-04, None)),
    (b"[Rank 0] step=120, skipped=0, loss=2.31, lr=[0.0001], grad_norm=0.8", (120, 2.31, 0.8, 1e-4, None)),
    (b"Epoch 0:  45%|####5     | 450/1000 [01:23<01:42, 5.38it/s, v_num=0, train_loss=2.310]", (450, 2.31, None, None, 0)),
    # Lightning < 2.0 under manual optimization: the bar's own `loss` is nan (training_step returns nothing), the
    # module's logged train_loss is the loss; a nan train_loss stays nan
    (b"Epoch 0:   2%|          | 40/1640 [00:16<10:56,  2.44it/s, loss=nan, v_num=3, train_loss=4.915, lr=0.0001]",
     (40, 4.915, None, 1e-4, 0)),
    (b"Epoch 0:   2%|          | 40/1640 [00:16<10:56,  2.44it/s, loss=nan, v_num=3, train_loss=nan, lr=0.0001]",
     (40, math.nan, None, 1e-4, 0)),
    (b"Step 100: loss = 2.3000, lr = 0.0001", (100, 2.3, None, 1e-4, None)),
    (b"{'loss': 1.0, 'grad_norm': inf, 'learning_rate': 0.0, 'epoch': 1.0}", (None, 1.0, math.inf, 0.0, 1.0)),
    # the reference DPO implementation's "train stats after N examples: {...}" (quoted values, loss/train)
    (b"train stats after 160768 examples: {'rewards_train/chosen': 'nan', 'logps_train/chosen': 'nan', "
     b"'loss/train': 'nan', 'examples_per_second': '5.4876', 'grad_norm': 'nan', 'counters/updates': 5024}",
     (None, math.nan, math.nan, None, None)),
    (b"07/12 09:07:50 - mmengine - INFO - Iter(train) [   10/12867]  lr: 5.1813e-07  eta: 17 days, 18:31:42  "
     b"time: 5.0501  data_time: 0.0283  memory: 58207  loss: 1.0672  grad_norm: 5.8255", (10, 1.0672, 5.8255, 5.1813e-07, None)),
    # darkflow: "step N - loss X - moving ave loss Y" (the step's own loss, not the moving average)
    (b"step 45 - loss 0.0081234 - moving ave loss 0.9102", (45, 0.0081234, None, None, None)),
])
def test_parse_line_formats(line, expect):
    got = P.parse_line(line)
    assert got is not None
    for g, e in zip(got, expect):
        if isinstance(e, float) and math.isnan(e):
            assert g is not None and math.isnan(g)
        elif e is None:
            assert g is None or line.startswith(b"Epoch")   # Lightning's "Epoch 0" is read as the epoch too
        else:
            assert g == pytest.approx(e)


@pytest.mark.parametrize("line", [
    b"{'eval_loss': 1.23, 'eval_runtime': 3.1, 'epoch': 1.0}",
    b"{'train_runtime': 31.2, 'train_loss': 1.41, 'epoch': 1.0}",
    b"validation loss: 1.2",
    b"[INFO] loss scale: 65536",
])
def test_parse_line_ignores_non_training_losses(line):
    assert P.parse_line(line) is None


def _tracker(text: str, **th) -> M.MetricTracker:
    return M.MetricTracker.of_text(text, M.Thresholds(**th) if th else None)


def _hf(losses, grads=None, quoted=False):
    q = "'" if quoted else ""
    out = []
    for i, loss in enumerate(losses):
        g = grads[i] if grads else 1.0
        out.append(f"  {i}%|#         | {(i + 1) * 10}/5000 [00:10<10:00, 1.0it/s]\n"
                   f"{{'loss': {q}{loss}{q}, 'grad_norm': {q}{g}{q}, 'learning_rate': {q}2e-05{q}, 'epoch': {q}0.01{q}}}")
    return "\n".join(out) + "\n"


def kinds(t):
    return {(a.kind, a.severity) for a in D.detect(t)}


def test_healthy_noisy_curve_raises_nothing():
    rnd = random.Random(1)
    losses = [round(max(1.0, 3.0 * 0.99 ** i) * (1 + rnd.uniform(-0.3, 0.3)), 4) for i in range(300)]
    grads = [round(rnd.uniform(0.3, 2.5), 3) for _ in range(300)]
    assert kinds(_tracker(_hf(losses, grads))) == set()


def test_nan_is_an_error_with_step_and_line():
    t = _tracker(_hf([2.1, 2.0, 1.9, "nan", "nan", "nan"], quoted=True))
    [a] = D.detect(t)
    assert (a.kind, a.severity, a.step) == ("nan", "error", 40)
    assert a.line == 8 and a.numbers["last_finite_loss"] == "1.9"


def test_single_transient_nan_grad_is_a_warning():
    t = _tracker(_hf([2.1, 2.0, 1.9, 1.8, 1.7], grads=[1.0, 1.0, "inf", 1.0, 1.0]))
    assert kinds(t) == {("nan", "warning")}


def test_flat_loss_with_zero_grad_is_no_grad_error():
    t = _tracker("".join(f"step={s} loss=10.3716 grad_norm=0.0 lr=2e-4\n" for s in range(10, 200, 10)))
    [a] = D.detect(t)
    assert (a.kind, a.category, a.severity) == ("flat", "no-grad", "error")
    assert a.line == 1 and a.numbers["records"] == 19


def test_flat_loss_with_gradients_is_only_a_warning():
    t = _tracker("".join(f"step={s} loss=2.5000 grad_norm=1.3 lr=2e-4\n" for s in range(10, 200, 10)))
    assert kinds(t) == {("flat", "warning")}


def test_fast_fall_with_flat_grad_norm_is_suspicious():
    losses = [3.2, 1.1, 0.3, 0.05, 0.004, 0.002, 0.001]
    t = _tracker(_hf(losses, grads=[0.3, 0.31, 0.29, 0.3, 0.3, 0.32, 0.3]))
    assert kinds(t) == {("fall", "error")}
    # with a falling grad_norm it is only a warning
    t = _tracker(_hf(losses, grads=[0.9, 0.45, 0.3, 0.2, 0.15, 0.1, 0.1]))
    assert kinds(t) == {("fall", "warning")}


def test_loss_climbing_to_the_end_is_a_divergence_error():
    rnd = random.Random(3)
    warm = [round(2.0 - 0.05 * i, 3) for i in range(10)]                      # falls to 1.55
    rising = [round(1.6 * 1.12 ** i * (1 + rnd.uniform(-0.02, 0.02)), 3) for i in range(20)]
    t = _tracker(_hf(warm + rising))
    [a] = [x for x in D.detect(t) if x.kind == "diverge"]
    assert (a.category, a.severity) == ("nan-loss", "error")
    assert a.numbers["low"] == "1.55" and a.numbers["factor"] >= 3
    assert "spike" not in {k for k, _ in kinds(t)}            # one story: the divergence


def test_a_rise_that_comes_back_or_stays_small_is_no_divergence():
    warm = [round(2.0 - 0.05 * i, 3) for i in range(10)]
    rising = [round(1.6 * 1.12 ** i, 3) for i in range(20)]
    back = [2.0, 1.7, 1.5, 1.4, 1.35, 1.3, 1.28, 1.25, 1.22, 1.2, 1.18, 1.15]   # recovered
    assert "diverge" not in {k for k, _ in kinds(_tracker(_hf(warm + rising + back)))}
    small = [round(1.55 + 0.04 * i, 3) for i in range(20)]                     # +50%: noise of a warm-up
    assert "diverge" not in {k for k, _ in kinds(_tracker(_hf(warm + small)))}


def test_grad_norm_dropping_to_zero_for_good_is_an_error():
    losses = [0.31, -0.12] + [0.0] * 12
    grads = [4.2, 6.2] + [0.0] * 12
    t = _tracker(_hf(losses, grads))
    [a] = D.detect(t)
    assert (a.kind, a.category, a.severity) == ("zero_grad_late", "no-grad", "error")
    assert a.numbers["records"] == 12 and a.numbers["before"] == "6.2"
    # a few zero-grad steps (one GRPO group with equal rewards) that end the log are not enough
    assert kinds(_tracker(_hf([0.3] * 20 + [0.0] * 4, [1.0] * 20 + [0.0] * 4))) == set()


def _grpo(rows):
    """TRL GRPO records from (loss, grad_norm, reward, reward_std, frac_reward_zero_std) rows."""
    return "\n".join(f"  {i}%|#         | {i + 1}/900 [00:30<7:40:00, 30.6s/it]\n"
                     f"{{'loss': {loss}, 'grad_norm': {g}, 'learning_rate': 2e-06, 'reward': {r}, 'reward_std': {sd}, "
                     f"'frac_reward_zero_std': {fz}, 'completions/mean_length': 400.0, 'epoch': 0.02}}"
                     for i, (loss, g, r, sd, fz) in enumerate(rows)) + "\n"


def test_short_zero_grad_tail_with_flat_grpo_rewards_is_an_error():
    # one normal GRPO record, then reward 0 / reward_std 0 / frac_reward_zero_std 1 with loss and grad_norm 0:
    # every advantage is 0 -- shorter than zero_tail_records, but each record says why nothing is learned
    rows = [(-0.2874, 6.23, 0.375, 0.5175, 0.0)] + [(0.0, 0.0, 0.0, 0.0, 1.0)] * 5
    [a] = D.detect(_tracker(_grpo(rows)))
    assert (a.kind, a.category, a.severity) == ("zero_grad_late", "no-grad", "error")
    assert a.numbers["records"] == 5
    # the same tail without the reward fields (or with rewards that still vary) stays below the bar
    assert kinds(_tracker(_hf([-0.2874] + [0.0] * 5, [6.23] + [0.0] * 5))) == set()
    varied = [(-0.2874, 6.23, 0.375, 0.5175, 0.0)] + [(0.0, 0.0, 0.25, 0.31, 0.5)] * 5
    assert kinds(_tracker(_grpo(varied))) == set()
    # flat rewards on a few steps that end a long learning run are not a dead run
    long = [(0.01, 0.8, 0.4, 0.45, 0.1)] * 12 + [(0.0, 0.0, 0.0, 0.0, 1.0)] * 4
    assert kinds(_tracker(_grpo(long))) == set()


@pytest.mark.parametrize("line, flat", [
    (b"{'loss': 0.0, 'reward': 0.0, 'reward_std': 0.0, 'frac_reward_zero_std': 1.0}", True),
    (b"{'loss': 0.0, 'reward': 0.5, 'reward_std': 0.0}", True),
    (b"{'loss': 0.01, 'reward': 0.5, 'reward_std': 0.05, 'frac_reward_zero_std': 0.125}", False),
    (b"{'loss': 0.01, 'reward': 0.5, 'reward_std': 0.0e-3}", True),
    (b"{'loss': 0.01, 'reward': 0.5, 'reward_std': 0.012, 'frac_reward_zero_std': 1.5}", False),
    (b"step:7 - actor/pg_loss:0.000 - actor/grad_norm:0.000 - critic/advantages/mean:0.000 - "
     b"critic/advantages/max:0.000 - critic/advantages/min:0.000 - critic/returns/mean:0.000", True),
    (b"step:7 - actor/pg_loss:0.004 - actor/grad_norm:0.183 - critic/advantages/mean:-0.001 - "
     b"critic/advantages/max:1.436 - critic/advantages/min:-1.677", False),
    (b"step:7 - critic/advantages/max:0.0 - critic/advantages/min:-0.5 - critic/returns/mean:0.0", False),
])
def test_flat_reward_fields(line, flat):
    assert P.is_flat_reward(line) is flat


def test_slow_healthy_fall_is_not_suspicious():
    losses = [round(2.5 * 0.97 ** i, 4) for i in range(200)]      # below 0.1 only after ~105 records
    assert "fall" not in {k for k, _ in kinds(_tracker(_hf(losses)))}


def test_spike_is_a_warning_and_small_bumps_are_not():
    base = [2.0 + 0.05 * (i % 3) for i in range(40)]
    bumps = list(base)
    bumps[25] = 3.9                                  # < 3x the median
    assert kinds(_tracker(_hf(bumps))) == set()
    spiky = list(base)
    spiky[25] = 9.5
    t = _tracker(_hf(spiky))
    assert kinds(t) == {("spike", "warning")}


def test_overflow_only_at_start_is_calibration():
    lines = [f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (32 - i)}, reducing to {2 ** (31 - i)}\n"
             f"step={i} loss=3.1 lr=1e-5\n" for i in range(12)]
    lines += [f"step={i} loss={3.1 - i * 0.001:.4f} lr=1e-5\n" for i in range(12, 60)]
    assert kinds(_tracker("".join(lines))) == set()


def test_persistent_overflow_is_an_error():
    lines = []
    for i in range(60):
        if i % 2 == 0:
            lines.append(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2048, reducing to 1024\n")
        lines.append(f"step={i} loss={3.1 - i * 0.001:.4f} lr=1e-5\n")
    t = _tracker("".join(lines))
    assert ("overflow", "error") in kinds(t) and t.overflows == 30


def test_overflows_with_no_readable_records_but_a_scale_that_grew_back_are_steps_taken():
    """apex/torch scalers grow the scale only after a run of good steps: "reducing ... to 16384" after an
    earlier 1024 says thousands of steps went through, even when the log's step lines are unreadable."""
    scales = [32768, 16384, 8192, 4096, 2048, 4096, 1024, 16384, 2048]
    body = "".join(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {s}.0\nEpoch [{i}] ok\n"
                   for i, s in enumerate(scales))
    assert ("overflow", "error") not in kinds(_tracker(body))
    falling = "".join(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {2.0 ** (15 - i)}\n"
                      for i in range(12))
    assert ("overflow", "error") in kinds(_tracker(falling))      # never grew back: still no evidence of a step


def test_thresholds_from_env_and_configure():
    t = M.Thresholds.from_env({"LLMTRIAGE_METRIC_SPIKE_FACTOR": "5", "LLMTRIAGE_METRIC_FLAT_MIN_RECORDS": "20"})
    assert t.spike_factor == 5.0 and t.flat_min_records == 20
    old = M.THRESHOLDS.overflow_min
    try:
        M.configure(overflow_min=3)
        assert M.THRESHOLDS.overflow_min == 3
        with pytest.raises(KeyError):
            M.configure(nope=1)
    finally:
        M.configure(overflow_min=old)
    t = _tracker("".join(f"step={s} loss=2.5000 grad_norm=1.3\n" for s in range(10)), flat_min_records=20)
    assert kinds(t) == set()


def test_findings_through_the_engine_en_and_zh(ruleset):
    from llmtriage import get_engine

    text = "".join(f"step={s} loss=10.3716 grad_norm=0.0 lr=2e-4\n" for s in range(10, 200, 10))
    rep = scan_source(get_engine(ruleset), text)
    top = rep.findings[0]
    assert (top.rule_id, top.category, top.severity) == ("metric-flat-loss", "no-grad", "error")
    assert "10.37" in top.message and "step 10" in top.message and top.fixes
    assert rep.extra["phase"] == "training" and rep.extra["step"] == 190
    assert rep.extra["metrics"]["records"] == 19
    zh = scan_source(get_engine(ruleset, lang="zh"), text).findings[0]
    assert "loss" in zh.message and "纹丝不动" in zh.title


def test_yaml_nan_rule_is_not_duplicated(engine):
    text = _hf([2.1, 2.0, 0.0, 0.0, 0.0], grads=[1.0, 1.0, "nan", "nan", "nan"])
    rep = scan_source(engine, text)
    ids = [f.rule_id for f in rep.findings]
    assert rep.findings[0].category == "nan-loss" and not rep.findings[0].rule_id.startswith("metric-")
    assert "metric-nan-loss" not in ids
    assert rep.extra["metrics"]["nonfinite"] == 3


def test_big_log_is_sampled_in_bounded_memory(engine):
    rnd = random.Random(2)
    n = 150_000
    parts = []
    for i in range(n):
        loss = "nan" if i >= n - 5000 else f"{2 + rnd.random():.4f}"
        parts.append(f"[rank0]: {{'loss': {loss}, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': {i / n:.3f}}}\n"
                     f"[rank0]:  12%|#         | {i}/{n} [01:00<10:00, 10it/s]\n")
    data = "".join(parts).encode()
    tracemalloc.start()
    t = M.MetricTracker()
    base = 1
    for chunk, _ in iter_blocks(io.BytesIO(data)):
        lines, view = match_view(chunk)
        t.feed_block(lines, view, base)
        base += lines.count(b"\n")
    t.flush(base)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert t.sampled and t.count < 10_000
    assert len(t.tail) <= t.th.window and len(t.head) <= t.th.head_records
    assert peak < 8 << 20
    # the first NaN is located exactly even though the block was sampled
    assert t.first_nonfinite is not None and t.first_nonfinite.line == 2 * (n - 5000) + 1
    rep = scan_source(engine, data)
    assert rep.findings[0].category == "nan-loss" and rep.extra["step"] == n - 1


def test_detector_texts_are_complete():
    """rules/detectors.yaml: every anomaly kind in both languages, same placeholders and fix count."""
    from llmtriage.templates import template_names
    from llmtriage.detect.metric_detect import RULE_IDS
    from llmtriage.detect.metric_findings import detector_texts

    texts = detector_texts()
    # collective_hang: detect/threaddump; hung_until_killed: detect/hung; memory_at_limit: detect/accounting;
    # untrained_start: detect/untrained; loss_above_uniform: detect/loss_above_uniform; loss_at_uniform: detect/metric_uniform; interrupted_save: detect/interrupted_save;
    # rl_kl_diverged: detect/rl_divergence; rl_logprob_gap: detect/rl_logprob_gap; world_shortfall: detect/world_shortfall
    verdict_ids = {"rl_kl_diverged": "metric-rl-kl-diverged", "rl_logprob_gap": "metric-rl-rollout-logprob-gap", "rl_grad_blowup": "metric-rl-grad-norm-blowup", "rl_length_cap": "metric-rl-completions-hit-length-cap", "rl_reward_stalled": "metric-rl-reward-flat-while-kl-grows", "rl_reward_hacked": "metric-rl-accuracy-reward-hacked", "rl_rollout_garbage": "metric-rl-rollouts-garbage-after-sync", "collective_hang": "thread-dump-collective-hang", "hung_until_killed": "verdict-hung-until-killed",
                   "memory_at_limit": "verdict-memory-at-limit", "untrained_start": "metric-loss-starts-untrained",
                   "interrupted_save": "verdict-resumed-interrupted-save", "loss_above_uniform": "metric-loss-above-uniform",
                   "loss_at_uniform": "metric-loss-at-uniform",
                   "world_shortfall": "verdict-world-smaller-than-requested",
                   "init_incomplete": "verdict-init-world-incomplete",
                   "eval_no_metrics": "metric-eval-without-metrics",
                   "decode_speed_gap": "metric-decode-speed-fallback-kernel",
                   "head_reload": "metric-head-reinitialised-on-reload"}
    # interrupted_wait (detect/interrupted_wait): one entry per reading, each a complete text of its own
    nested = {"interrupted_wait": {"hub": "verdict-interrupted-in-hub-request", "shm": "verdict-stalled-first-step-small-shm",
                                   "collective": "verdict-interrupted-in-collective",
                                   "tp_workers": "verdict-interrupted-waiting-tp-workers",
                                   "collective_pinned_stop": "verdict-stopped-while-gpus-pinned",
                                   "collective_stalled": "verdict-stalled-first-step-gpus-pinned"}}
    assert set(texts) == set(RULE_IDS) | set(verdict_ids) | set(nested)
    flat = [(kind, entry) for kind, entry in texts.items() if kind not in nested]
    for kind, readings in nested.items():
        assert {k: v["rule_id"] for k, v in texts[kind].items()} == readings
        flat += [(f"{kind}.{k}", v) for k, v in texts[kind].items()]
    for kind, entry in flat:
        assert "." in kind or entry["rule_id"] == RULE_IDS.get(kind) or entry["rule_id"] == verdict_ids[kind]
        en, zh = entry["en"], entry["zh"]
        for lang in (en, zh):
            assert all(lang[k].strip() for k in ("title", "message", "what", "why")), kind
            assert lang["fixes"] and all(f["title"] and f["detail"] for f in lang["fixes"]), kind
        assert len(en["fixes"]) == len(zh["fixes"]), kind
        assert template_names(en["message"]) == template_names(zh["message"]), kind
        if "kill_reason" in en:
            assert template_names(en["kill_reason"]) == template_names(zh["kill_reason"]), kind


# ---------------------------------------------------------------- formats added for issue 14
@pytest.mark.parametrize("line, expect", [
    (b"(TaskRunner pid=401) step:12 - global_seqlen/mean:9544.75 - actor/pg_loss:-0.004 - actor/kl_loss:0.001 - "
     b"actor/grad_norm:0.231 - actor/lr:1e-06 - critic/score/mean:0.61", (12, -0.004, 0.231, 1e-06, None)),
    (b"Epoch 3: 100%|##########| 50/50 [00:10<00:00,  4.90it/s, Loss: 1.14]", (50, 1.14, None, None, 3)),
    (b" 45%|####5     | 450/1000 [01:23<01:42,  5.38it/s, loss=0.5]", (450, 0.5, None, None, None)),
    (b"{'loss': '4.131', 'grad_norm': '2.2', 'learning_rate': '0', 'epoch': '0.25'}", (None, 4.131, 2.2, 0.0, 0.25)),
    # a custom loop's pipe-separated record (space between key and value)
    (b"| step 20 | loss 3.1021 | grad_norm 0.0000 | lr 2.00e-04 |", (20, 3.1021, 0.0, 2e-4, None)),
    # "Epoch 2/3" counts from 1: one epoch done plus 40% of the second
    (b"Epoch 2/3: 40%|####      | 40/100 [00:10<00:15, 4.0it/s, loss=0.0003, grad_norm=0.0006]", (40, 0.0003, 0.0006, None, 1.4)),
    (b"Epoch 3/3 - loss: 0.1", (None, 0.1, None, None, 2.0)),
    # a phase timing in seconds is not a step number (SkyRL: no step key on the line); a later whole counter is
    (b"{'timing/generate': 481.3, 'timing/step': 569.77, 'policy_loss': 0.0106}", (None, 0.0106, None, None, None)),
    (b"{'timing/step': 569.77, 'loss': 2.5, 'global_step': 12}", (12, 2.5, None, None, None)),
])
def test_parse_line_more_formats(line, expect):
    got = P.parse_line(line)
    assert got is not None
    for g, e in zip(got, expect):
        assert g == (pytest.approx(e) if e is not None else None)


def test_parse_skip_counters():
    assert P.parse_skips(b"[Rank 0] step=40, skipped=40, lr=[0.0], mom=[(0.9, 0.999)]") == ("ds", 40, 40, None)
    got = P.parse_skips(b" iteration       20/  500000 | consumed samples: 10240 | elapsed time per iteration (ms): 812.3 | "
                        b"learning rate: 0.000E+00 | global batch size:   512 | loss scale: 1.0 | "
                        b"number of skipped iterations:  10 | number of nan iterations:   0 |")
    assert got == ("megatron", 20, 10, 1.0)
    assert P.parse_skips(b"skipped 3 files") is None


def test_zero_grad_with_wiggling_loss_is_no_grad():
    # ~1e-4 relative wiggle: flat, and grad_norm 0 makes it an error
    losses = [2.31457, 2.31462, 2.31449, 2.31471, 2.31455, 2.31466, 2.31452, 2.31460, 2.31469, 2.31458]
    [a] = D.detect(_tracker(_hf(losses, grads=[0.0] * 10, quoted=True)))
    assert (a.category, a.severity) == ("no-grad", "error")
    # ~1e-3: no longer "flat", but grad_norm is exactly 0 on every step
    losses = [2.3146, 2.3172, 2.3131, 2.3188, 2.3155, 2.3166, 2.3129, 2.3160, 2.3179, 2.3148]
    t = _tracker(_hf(losses, grads=[0.0] * 10, quoted=True))
    assert kinds(t) == {("zero_grad", "error")}
    [a] = D.detect(t)
    assert a.category == "no-grad" and a.numbers["records"] == 10 and a.numbers["loss_lo"] == "2.313"


def test_lr_zero_everywhere_is_no_grad_or_fp16_overflow():
    lines = "".join(f"{{'loss': '{3.2 - i * 0.01:.3f}', 'grad_norm': '1.3', 'learning_rate': '0', 'epoch': '{i / 10}'}}\n"
                    for i in range(6))
    assert kinds(_tracker(lines)) == {("lr_zero", "error")}
    fp16 = "Training/evaluation parameters TrainingArguments(\nfp16=True,\nlearning_rate=3e-05,\n)\n"
    t = _tracker(fp16 + lines)
    assert kinds(t) == {("lr_zero_fp16", "error")} and D.detect(t)[0].category == "fp16-overflow"


def test_loss_sequence_repeating_each_epoch_is_no_grad():
    epoch = [2.913, 2.744, 3.021, 2.688, 2.857, 2.790, 2.932, 2.701]
    recs = [(e + i / len(epoch), x) for e in range(3) for i, x in enumerate(epoch)]
    text = "".join(f"{{'loss': {x}, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': {ep:.3f}}}\n" for ep, x in recs)
    [a] = D.detect(_tracker(text))
    assert (a.kind, a.category, a.severity, a.numbers["period"]) == ("repeat", "no-grad", "error", 8)
    # a noisy curve with two-decimal losses that repeats by chance over a short stretch is not enough
    rnd = random.Random(3)
    noisy = "".join(f"step={i} loss={1.2 + rnd.choice([0.0, 0.01, 0.02]):.2f}\n" for i in range(80))
    assert "repeat" not in {k for k, _ in kinds(_tracker(noisy))}


def test_spike_then_exact_zero_is_a_hidden_nan():
    losses = [2.43, 2.11, 2.05, 1.99, 2.04, 1.97, 2.01, 2.28, 3.77] + [0.0] * 8
    t = _tracker("".join(f"{{'loss': {x}, 'learning_rate': 0.005, 'epoch': 0.0{i}}}\n" for i, x in enumerate(losses)))
    [a] = D.detect(t)
    assert (a.kind, a.category, a.severity) == ("nan_hidden", "nan-loss", "error")
    assert a.line == 10 and a.numbers["last_loss"] == "3.77"
    # a gradual fall to 0 is not a hidden NaN
    fall = [2.4, 1.5, 0.9, 0.4, 0.1, 0.03, 0.008, 0.001] + [0.0] * 8
    t = _tracker("".join(f"{{'loss': {x}, 'learning_rate': 0.005, 'epoch': 0.0{i}}}\n" for i, x in enumerate(fall)))
    assert "nan_hidden" not in {k for k, _ in kinds(t)}


def test_older_megatron_lines_without_colons_are_records_and_an_unskipped_zero_lr_is_no_grad():
    """Older Megatron prints "learning rate 0.000E+00 | lm loss 1.14E+01 |" (no colons). A learning rate of 0
    on every line while its own counter says no iteration was skipped is a schedule that never starts
    (no-grad), not fp16's scaler skipping every step, even in an fp16 run."""
    text = "--fp16\n" + "".join(
        f" iteration {i:9d}/  320000 | elapsed time per iteration (ms): 1757.0 | learning rate 0.000E+00 | "
        f"lm loss {11.40 + (i % 3) * 0.01:.6E} | loss scale 1073741824.0 | number of skipped iterations:   0 | "
        f"number of nan iterations:   0 |\n" for i in range(100, 1300, 100))
    t = _tracker(text)
    assert t.count == 12
    assert ("lr_zero", "error") in {(a.kind, a.severity) for a in D.detect(t)}


def test_the_end_of_run_metrics_table_is_no_step_record():
    """transformers' `***** train metrics *****` table prints the run's average loss
    ("  train_loss = 0.7963") after the last step: it is not a step, and must not end the zero tail."""
    losses = [2.43, 2.11, 2.05, 1.99, 2.04, 1.97, 2.01, 2.28, 9.77] + [0.0] * 8
    text = "".join(f"{{'loss': {x}, 'learning_rate': 0.005, 'epoch': 0.0{i}}}\n" for i, x in enumerate(losses))
    text += ("{'train_runtime': 3330.1, 'train_samples_per_second': 1.085, 'train_loss': 0.7963, 'epoch': 3.0}\n"
             "***** train metrics *****\n  epoch                    =        3.0\n"
             "  train_loss               =     0.7963\n  train_runtime            = 0:55:30.10\n")
    assert [(a.kind, a.severity) for a in D.detect(_tracker(text))] == [("nan_hidden", "error")]
    assert P.parse_line(b"  train_loss               =     0.7963") is None


def test_collapse_within_first_epoch_is_an_error_and_memorising_a_tiny_set_too():
    def run(epochs, grads=True):
        losses = [3.1, 2.2, 1.1, 0.4, 0.05] + [0.004 - i * 1e-4 for i in range(12)]
        gs = [2.0, 1.5, 1.0, 0.5, 0.1] + [0.003] * 12
        return "".join(f"{{'loss': {x:.4f}, " + (f"'grad_norm': {g}, " if grads else "") + f"'learning_rate': 2e-05, 'epoch': {e:.2f}}}\n"
                       for x, g, e in zip(losses, gs, epochs))
    t = _tracker(run([i * 0.05 for i in range(17)]))
    assert ("collapse", "error") in kinds(t)
    # every sample seen >= 20 times before the loss went under 0.01: memorised, an error with or without grad_norm
    for grads in (True, False):
        t = _tracker(run([i * 20.0 for i in range(17)], grads))
        got = D.detect(t)
        assert [(a.kind, a.severity) for a in got] == [("overfit", "error")], got
        assert got[0].numbers["seen"] == 100 and got[0].numbers["records"] == 13
    # the same curve reached under 0.01 by epoch 6 (a few epochs over a small set): no memorisation finding
    assert not any(k == "overfit" for k, _ in kinds(_tracker(run([i * 1.0 for i in range(17)]))))


def test_memorised_needs_a_language_model_loss_that_ends_under_001():
    def curve(losses, per_epoch=5.0):
        return "".join(f"{{'loss': {x}, 'learning_rate': 2e-05, 'epoch': {i * per_epoch:.1f}}}\n" for i, x in enumerate(losses))
    ok = [2.5, 1.2, 0.5, 0.2, 0.08, 0.02, 0.009, 0.006]
    assert ("overfit", "error") in kinds(_tracker(curve(ok)))
    # ends at 0.02 (a small model on a narrow task): not memorised in this sense
    assert not any(k == "overfit" for k, _ in kinds(_tracker(curve(ok[:-2] + [0.03, 0.02]))))
    # a classifier starting at ln 2 is not a language model's curve
    assert not any(k == "overfit" for k, _ in kinds(_tracker(curve([0.69] + ok[1:]))))
    # exactly 0 at the end is the hidden-NaN / no-label reading, not memorisation
    assert not any(k == "overfit" for k, _ in kinds(_tracker(curve(ok[:-1] + [0.0]))))


def test_grpo_zero_then_growing_loss_and_negative_loss_are_healthy():
    lines = []
    for i in range(40):
        loss = 0.0 if i < 6 else round(0.0004 * i * (1 if i % 3 else -1), 5)
        lines.append(f"{{'loss': {loss}, 'grad_norm': {0.3 + (i % 5) * 0.05:.2f}, 'learning_rate': 1e-06, "
                     f"'rewards/accuracy_reward': 0.{i % 9}, 'reward': 0.{i % 7}, 'kl': {0.0001 * i:.4f}, 'epoch': 0.0{i}}}\n")
    assert kinds(_tracker("".join(lines))) == set()


def test_deepspeed_every_step_skipped_is_an_error_but_settling_is_not():
    lines = []
    for s in range(1, 13):
        lines.append(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (17 - s)}, reducing to {2 ** (16 - s)}\n")
        lines.append(f"[Rank 0] step={s}, skipped={s}, lr=[0.0], mom=[(0.9, 0.999)]\n")
    t = _tracker("".join(lines))
    got = D.detect(t)
    assert [(a.kind, a.category, a.severity) for a in got] == [("no_step", "fp16-overflow", "error")]
    settle = [f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (32 - s)}, reducing to {2 ** (31 - s)}\n"
              f"[Rank 0] step={s}, skipped={s}, lr=[0.0]\n" for s in range(1, 8)]
    settle += [f"[Rank 0] step={s}, skipped=7, lr=[1e-05]\nstep={s} loss={2.4 - s * 0.004:.4f}\n" for s in range(8, 60)]
    assert kinds(_tracker("".join(settle))) == set()


def test_megatron_all_iterations_skipped_is_an_error():
    text = "".join(f" iteration {i:8d}/  500000 | consumed samples: {i * 512} | elapsed time per iteration (ms): 801.2 | "
                   f"learning rate: 0.000E+00 | global batch size:   512 | loss scale: 1.0 | "
                   f"number of skipped iterations:  10 | number of nan iterations:   0 |\n" for i in range(10, 130, 10))
    [a] = D.detect(_tracker(text))
    assert (a.kind, a.severity, a.numbers["skipped"]) == ("no_step", "error", 120)


def test_notebook_loss_tables_are_read_by_their_header():
    """The Trainer's notebook table (tab-separated, `No log` for a missing value) and the pipe form
    with RL columns: the header names the columns, rows are numbers only, the table ends at the
    first line that is not a row of it."""
    text = ("Unsloth: Will smartly offload gradients\n [30/30 04:12, Epoch 0/1]\n"
            "Step\tTraining Loss\tValidation Loss\n"
            + "".join(f"{i}\t{2.5 - i * 0.01:.6f}\tNo log\n" for i in range(1, 11))
            + "TrainOutput(global_step=10, training_loss=2.45)\n11\t9.9\tNo log\n")
    t = _tracker(text)
    recs = t.records()
    assert [r.step for r in recs] == list(range(1, 11))
    assert recs[0].loss == 2.49 and recs[0].line == 4 and recs[-1].line == 13
    assert not any(r.rl for r in recs)           # the row after TrainOutput is not part of the table
    rl = _tracker("Step | Training Loss | reward | reward_std | kl\n"
                  + "".join(f"{i} | 0.000000 | -1.5 | 0.5 | 0.0001\n" for i in range(1, 9)))
    assert rl.count == 8 and all(r.rl and r.loss == 0.0 for r in rl.records())
    assert not {k for k, s in kinds(rl) if s == "error"}


def test_a_notebook_table_with_a_spike_then_zeros_is_a_hidden_nan():
    rows = [2.31, 2.05, 1.88, 1.79, 1.71, 1.66, 48.93, 1051.2] + [0.0] * 20
    text = "Step\tTraining Loss\n" + "".join(f"{i}\t{v:.6f}\n" for i, v in enumerate(rows, 1))
    assert ("nan_hidden", "error") in kinds(_tracker(text))


def test_a_loss_table_split_across_blocks_is_read_whole():
    rows = "".join(f"{i}\t{3.0 - i * 1e-4:.6f}\n" for i in range(1, 6001))
    t = _tracker("x" * 70000 + "\nStep\tTraining Loss\n" + rows, full_records=10**6, head_records=10**6)
    assert t.count == 6000 and t.records()[-1].step == 6000 and t.records()[-1].line == 6002


def _megatron(losses, skipped=0, scale="1.0", nan_iters=0):
    return "".join(f" iteration {i + 1:8d}/     100 | elapsed time per iteration (ms): 1996.4 | learning rate: 1.0E-05 | "
                   + (f"lm loss: {loss:.6E} | " if loss is not None else "")
                   + f"loss scale: {scale} | number of skipped iterations: {skipped:3d} | "
                   f"number of nan iterations: {nan_iters if loss is None else 0:3d} |\n" for i, loss in enumerate(losses))


def test_megatron_lines_that_stop_showing_a_loss_are_a_hidden_nan():
    """Megatron prints a loss only when its interval average is > 0: a NaN loss just vanishes."""
    assert kinds(_tracker(_megatron([2.5 - i * 0.01 for i in range(12)]))) == set()
    [a] = D.detect(_tracker(_megatron([2.5 - i * 0.01 for i in range(5)] + [None] * 6, nan_iters=1)))
    assert (a.kind, a.category, a.severity, a.count, a.line, a.numbers["to"]) == ("meg_noloss", "nan-loss", "error", 6, 6, 11)
    assert a.numbers["nan_iterations"] == 6 and a.numbers["since_start"] is None
    [a] = D.detect(_tracker(_megatron([None] * 10)))
    assert a.kind == "meg_noloss" and a.numbers["since_start"] is True
    # a loss that comes back, or too few silent lines at the end, is no finding of this kind
    assert "meg_noloss" not in {k for k, _ in kinds(_tracker(_megatron([None] * 6 + [2.0, 2.0])))}
    assert kinds(_tracker(_megatron([2.5 - i * 0.01 for i in range(8)] + [None] * 3))) == set()
    # an interval every iteration of which was skipped prints no loss by design (fp16 overflow is judged elsewhere)
    assert "meg_noloss" not in {k for k, _ in kinds(_tracker(_megatron([None] * 10, skipped=1)))}
    # older Megatron writes "lm loss 1.1E+01 |" without the colon
    old = _megatron([None] * 6).replace("learning rate:", "lm loss 1.140000E+01 | learning rate:")
    assert "meg_noloss" not in {k for k, _ in kinds(_tracker(old))}


def test_loss_near_zero_from_the_first_record_is_suspicious():
    low = [0.0058, 0.0056, 0.0052, 0.0077, 0.0053, 0.0062, 0.0058, 0.006, 0.0053]
    [a] = [a for a in D.detect(_tracker(_hf(low, grads=[0.02] * 9))) if a.kind == "low_start"]
    assert (a.category, a.severity, a.count, a.numbers["loss"]) == ("loss-suspicious", "error", 9, "0.0058")
    # a normal start, too few records, exactly 0 (a hidden NaN), or no gradient at all: not this finding
    assert "low_start" not in {k for k, _ in kinds(_tracker(_hf([2.1] + low, grads=[0.02] * 10)))}
    assert "low_start" not in {k for k, _ in kinds(_tracker(_hf(low[:5], grads=[0.02] * 5)))}
    assert "low_start" not in {k for k, _ in kinds(_tracker(_hf(low, grads=[0.0] * 9)))}
    # Megatron's throughput benchmarks run on mock data, which is that easy
    meg = _megatron(low).replace("loss scale", "grad norm: 0.02 | loss scale")
    assert "low_start" not in {k for k, _ in kinds(_tracker(meg))}


def _composer(batches, loss, grad):
    return "".join(f"[epoch=1][batch={b}/20000]:\n\t Train time/batch: {b}\n\t Train loss/train/total: {loss(b):.4f}\n"
                   f"\t Train metrics/train/LanguageCrossEntropy: {loss(b):.4f}\n\t Train l2_norm/grad/global: {grad(b):.4f}\n"
                   f"\t Train lr-DecoupledAdamW/group0: 0.0006\n" for b in batches)


def test_composer_records_span_a_header_and_indented_metric_lines(engine):
    """MosaicML Composer prints `[batch=N/M]:` then one indented line per metric: one record each,
    its step the batch, read across the lines under the header."""
    t = _tracker(_composer(range(100, 1300, 100), lambda b: 13.0 - b / 200, lambda b: 1.3))
    recs = t.records()
    assert [r.step for r in recs][:3] == [100, 200, 300]
    assert (recs[0].loss, recs[0].grad_norm, recs[0].lr) == (pytest.approx(12.5), pytest.approx(1.3), pytest.approx(6e-4))
    assert recs[0].line == 3       # the loss line
    assert kinds(t) == set()
    # the loss stops moving with a grad norm of exactly 0 (a torch release candidate's FSDP bug): no-grad
    flat = _composer(range(100, 1300, 100), lambda b: 13.0 - b / 200 if b < 500 else 10.5, lambda b: 1.3 if b < 500 else 0.0)
    errors = [f for f in scan_source(engine, flat.encode()).findings if f.severity == "error"]
    assert errors and errors[0].category == "no-grad", errors


def test_a_loss_that_never_falls_from_where_training_started_is_no_grad():
    """nanoGPT from scratch sitting at ln(65) = 4.17 for 1200 iterations: a plateau at the untrained level
    while steps run. Not when the loss falls, zig-zags between kinds of batch, or the lr is still warming up."""
    rnd = random.Random(3)
    stuck = "".join(f"iter {i}: loss {4.16 + rnd.uniform(-0.04, 0.05):.4f}, time 50.2ms, mfu 9.4%\n" for i in range(0, 1220, 20))
    [a] = D.detect(_tracker(stuck))
    assert (a.kind, a.category, a.severity) == ("stuck", "no-grad", "error")
    falling = "".join(f"iter {i}: loss {4.16 * 0.9995 ** i:.4f}, time 50.2ms\n" for i in range(0, 1220, 20))
    assert kinds(_tracker(falling)) == set()
    zigzag = "".join(f"iter {i}: loss {(1.6 if (i // 100) % 2 else 0.9) + rnd.uniform(-0.05, 0.05):.4f}\n" for i in range(0, 1220, 20))
    assert "stuck" not in {k for k, _ in kinds(_tracker(zigzag))}
    warmup = "".join(f"step {i}: loss {4.16 + rnd.uniform(-0.04, 0.05):.4f}, lr {1e-6 * (i + 1):.2e}\n" for i in range(0, 1220, 20))
    assert "stuck" not in {k for k, _ in kinds(_tracker(warmup))}
    late = "".join(f"iter {i}: loss {2.16 + rnd.uniform(-0.02, 0.02):.4f}\n" for i in range(5000, 6220, 20))
    assert "stuck" not in {k for k, _ in kinds(_tracker(late))}     # a plateau late in a run is not "from the start"
    resumed = "".join(f"Epoch 9:   3%|3         | {i}/20000 [00:10<10:00, 3.1it/s, loss={4.16 + rnd.uniform(-0.04, 0.05):.4f}]\n"
                      for i in range(0, 1220, 20))
    assert "stuck" not in {k for k, _ in kinds(_tracker(resumed))}  # a per-epoch bar restarting at 0 in epoch 9


def test_a_spike_that_never_comes_back_is_a_divergence_and_one_that_recovers_is_not():
    rnd = random.Random(5)
    base = [0.56 + rnd.uniform(-0.01, 0.01) for _ in range(24)]
    stayed = base + [2.35, 2.28] + [2.0 + rnd.uniform(-0.05, 0.05) for _ in range(20)]
    text = "".join(f"step={i * 10} loss={v:.4f} grad_norm=0.3\n" for i, v in enumerate(stayed))
    [a] = [a for a in D.detect(_tracker(text)) if a.severity == "error"]
    assert (a.kind, a.category) == ("jump", "nan-loss") and a.numbers["factor"] >= 3
    recovered = base + [2.35, 2.28] + [0.55 + rnd.uniform(-0.01, 0.01) for _ in range(20)]
    text = "".join(f"step={i * 10} loss={v:.4f} grad_norm=0.3\n" for i, v in enumerate(recovered))
    assert not [a for a in D.detect(_tracker(text)) if a.severity == "error"]


def test_a_preference_loss_flat_at_ln2_is_chance_level_no_grad():
    text = "".join(f"{{'loss': 0.6931, 'grad_norm': 0.0048, 'learning_rate': 5e-06, 'rewards/chosen': 0.0, 'epoch': {i / 100}}}\n"
                   for i in range(1, 26))
    [a] = [a for a in D.detect(_tracker(text)) if a.kind == "flat"]
    assert (a.severity, a.numbers["chance"]) == ("error", "ln 2")
    other = text.replace("0.6931", "1.2345")
    [b] = [a for a in D.detect(_tracker(other)) if a.kind == "flat"]
    assert b.severity == "warning"


def test_a_quantizers_per_module_loss_is_no_training_record():
    assert P.parse_line(b"INFO  {'process': 'gptq', 'layer': 0, 'module': 'self_attn.k_proj', 'loss': '0.02098', "
                        b"'damp': '0.01000', 'time': '1.068'}") is None
    assert P.parse_line(b"2025-03-25 10:41:08 INFO [auto_gptq.quantization.gptq] avg loss: 3.9917166233062744") is None
    assert P.parse_line(b"epoch 3, avg loss: 0.4518") is not None


def test_a_loss_of_exactly_zero_on_every_record_is_an_error():
    """After a first real loss, 0.0 on every record with a steady grad_norm: no label token is counted."""
    from llmtriage import analyze
    lines = ["{'loss': 1.3972, 'grad_norm': 7.84, 'learning_rate': 2.4e-07, 'epoch': 0.01}"]
    lines += [f"{{'loss': 0.0, 'grad_norm': 1.0625, 'learning_rate': {2.4e-07 * (i + 2):.3e}, 'epoch': {0.01 * (i + 2):.2f}}}"
              for i in range(30)]
    rep = analyze("\n".join(lines) + "\n")
    top = rep.findings[0]
    assert top.rule_id == "metric-flat-loss" and top.severity == "error"
    assert "exactly 0" in top.message


def _eval_log(values, bar_postfix=False):
    out, step = [], 0
    for v in values:
        for _ in range(4):
            step += 50
            out.append(f"epoch 0 | step {step}/3000 | train_loss {3.41 + (step % 7) * 0.001:.4f} | lr 4.9e-05 | 1.86 it/s")
        out.append(f"Epoch finished: eval_loss {v} | rouge1 0.0412")
    if bar_postfix:
        out = [f"Epoch 1:  {i}%|##  | {i}/100 [00:{i:02d}<00:10, 1.2it/s, loss={2.5 - i * 0.01:.3f}, val_loss=3.410]"
               for i in range(1, 40)]
    return "\n".join(out) + "\n"


def test_the_same_eval_loss_at_every_evaluation_is_no_grad():
    from llmtriage import analyze
    rep = analyze(_eval_log(["3.4096", "3.4096", "3.4096"]))
    top = rep.findings[0]
    assert top.rule_id == "metric-eval-loss-frozen" and top.severity == "error" and top.category == "no-grad"
    rep = analyze(_eval_log(["0.74120", "0.74120", "0.74120"]))    # a trailing zero after four digits
    assert rep.findings[0].rule_id == "metric-eval-loss-frozen"


def test_eval_loss_frozen_with_a_stale_step_counter_reads_the_epochs():
    """A progress bar's "0/N" drawn before the first record leaves every record at step 0: the epochs
    still move between the evaluations, so the same evaluation loss twice is frozen weights."""
    from llmtriage import analyze
    rows = ["  0%|          | 0/3126 [00:00<?, ?it/s]"]
    for i in range(16):
        if i in (7, 15):
            rows.append("{'eval_loss': 0.6929, 'eval_accuracy': 0.5012, 'epoch': %.2f}" % (0.13 * i))
        else:
            rows.append("{'loss': %.4f, 'grad_norm': 0.05, 'learning_rate': 3e-04, 'epoch': %.2f}"
                        % (0.69 + 0.004 * (i % 3), 0.13 * (i + 1)))
    top = analyze("\n".join(rows) + "\n").findings[0]
    assert top.rule_id == "metric-eval-loss-frozen" and top.severity == "error"


def test_eval_losses_that_move_or_a_bar_postfix_raise_nothing():
    from llmtriage import analyze
    for log in (_eval_log(["3.4096", "3.3811", "3.3502"]), _eval_log(["3.41", "3.41"]),
                _eval_log(["0.79000", "0.79000", "0.79000"]), _eval_log([], bar_postfix=True)):
        assert not any(f.rule_id == "metric-eval-loss-frozen" for f in analyze(log).findings)


def test_training_loss_lines_outside_a_table_do_not_loop():
    """Regression: two 'training loss: X' lines (a header candidate of a notebook table on the line a
    scan resumes from) sent the table reader back to the block's start forever."""
    import subprocess
    import sys
    code = ("from llmtriage import analyze; "
            "r = analyze('training loss: 0.30\\ntraining loss: 0.04\\n' * 3 + 'step 7 training loss: 0.02\\n'); "
            "print(len(r.findings) >= 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "True" in out.stdout, out.stderr


def test_mlx_lm_iteration_lines_are_metric_records():
    from llmtriage.detect.metric_parse import parse_line
    rec = parse_line(b"Iter 10: Train loss 0.972, Learning Rate 1.750e-06, It/sec 0.092, Tokens/sec 192.224, "
                     b"Trained Tokens 24332, Peak mem 46.288 GB")
    assert rec is not None and rec[0] == 10 and rec[1] == 0.972 and rec[3] == 1.75e-06
    assert parse_line(b"Iter 1: Val loss 0.709, Val took 135.128s") is None     # an evaluation, not a step


def test_a_long_run_of_exact_zeros_after_few_or_halving_records_is_a_hidden_nan():
    """Eight or more records of exactly 0 after a normal loss: two records before them are enough, and a
    last record at half the median (one bad step before the NaN) does not make it a gradual fall."""
    short = [1.9156, 1.8055] + [0.0] * 9
    t = _tracker("".join(f"{{'loss': {x}, 'learning_rate': 2e-05, 'epoch': 0.0{i}}}\n" for i, x in enumerate(short)))
    assert ("nan_hidden", "error") in {(a.kind, a.severity) for a in D.detect(t)}
    halving = [2.31, 2.05, 2.18, 1.97, 2.24, 2.01, 2.36, 2.13, 2.49, 1.02] + [0.0] * 10
    t = _tracker("".join(f"{{'loss': {x}, 'learning_rate': 0.01, 'epoch': 0.{i:02d}}}\n" for i, x in enumerate(halving)))
    assert "nan_hidden" in {a.kind for a in D.detect(t)}
    few = [2.3, 2.1] + [0.0] * 5                       # a short stretch after two records stays silent
    t = _tracker("".join(f"{{'loss': {x}, 'learning_rate': 2e-05, 'epoch': 0.0{i}}}\n" for i, x in enumerate(few)))
    assert "nan_hidden" not in {a.kind for a in D.detect(t)}


def test_nan_grads_that_keep_recovering_are_a_warning_even_near_the_end():
    # fp16 loss scaling (mmdet Fp16OptimizerHook): grad_norm nan/inf on many records, every loss
    # finite, each bad record followed by a finite one; the last bad record is the second to last
    losses = [round(3.0 - 0.05 * i, 3) for i in range(12)]
    grads = [1.0, "nan", 1.2, "inf", 1.1, 0.9, "nan", 1.0, 1.3, 1.0, "inf", 1.1]
    assert kinds(_tracker(_hf(losses, grads))) == {("nan", "warning")}


def test_nan_grad_once_near_the_end_with_no_recovery_history_stays_an_error():
    losses = [round(3.0 - 0.05 * i, 3) for i in range(8)]
    grads = [1.0, 1.0, 1.0, 1.0, 1.0, "nan", "nan", 1.0]
    assert ("nan", "error") in kinds(_tracker(_hf(losses, grads)))


# ---------------------------------------------------------------- learning rate decayed to 0 long before the end
def _lr_log(lrs, losses):
    return "".join(f"step={(i + 1) * 50} loss={loss:.4f} lr={lr:.6e}\n" for i, (lr, loss) in enumerate(zip(lrs, losses)))


def test_lr_reaching_zero_early_and_staying_there_is_no_grad():
    """A scheduler built for 400 steps in a 3000-step run: lr 0 from step 400 on, the loss stops improving."""
    from llmtriage.detect.metric_lr import lr_dead

    rnd = random.Random(3)
    lrs = [max(0.0, 5e-5 * (1 - s / 400)) for s in range(50, 3050, 50)]
    losses = [5.9 * 0.885 ** (i + 1) if i < 8 else 2.18 + rnd.uniform(-0.12, 0.12) for i in range(len(lrs))]
    t = _tracker(_lr_log(lrs, losses))
    [a] = lr_dead(t, D.detect(t))
    assert (a.kind, a.category, a.severity) == ("lr_dead", "no-grad", "error")
    assert a.numbers["from"] == "step 400" and a.numbers["records"] == 53 and a.numbers["total"] == 60


def test_lr_ending_at_zero_or_loss_still_falling_is_not_lr_dead():
    """Healthy look-alikes: a schedule that reaches 0 on its last records (the planned end of training),
    and a tail of lr 0 over which the loss keeps falling (a rounded display, not a dead schedule)."""
    from llmtriage.detect.metric_lr import lr_dead

    n = 60
    end = [5e-5 * (1 - i / (n - 1)) for i in range(n)]          # linear decay to exactly 0 at the last record
    losses = [3.0 * 0.98 ** i for i in range(n)]
    t = _tracker(_lr_log(end, losses))
    assert lr_dead(t, D.detect(t)) == []
    early = [5e-5 if i < 20 else 0.0 for i in range(n)]
    t = _tracker(_lr_log(early, losses))                         # loss still falls over the zero tail
    assert lr_dead(t, D.detect(t)) == []
    t = _tracker(_lr_log([5e-5] * 50 + [0.0] * 10, [2.0] * 30 + [2.1, 1.9] * 15))   # tail under a third of the run
    assert lr_dead(t, D.detect(t)) == []


# ---------------------------------------------------------------- a flat loss printed as the very same many-digit value
def test_a_loss_repeated_to_five_digits_on_many_records_is_an_error():
    """`video-loss: 10.3755` on every record: different batches never give the same loss to 5+ significant
    digits, so the weights are not changing (error); few digits or a short run stay a warning."""
    from llmtriage.detect.metric_flat_exact import exact_flat, significant_digits

    assert (significant_digits(10.3755), significant_digits(2.0), significant_digits(0.0012)) == (6, 1, 2)

    def flat(value, n):
        t = _tracker("".join(f"Train Epoch: [0]  [{i * 5:3d}/336]  eta: 0:08:00  video-loss: {value}  time: 1.5\n"
                             for i in range(n)))
        found = D.detect(t)
        exact_flat(t, found)
        return {(a.kind, a.severity) for a in found}, found

    kinds_, found = flat("10.3755", 30)
    assert ("flat", "error") in kinds_ and found[0].numbers["exact"] == "10.3755"
    assert ("flat", "warning") in flat("2.1", 30)[0]
    assert ("flat", "warning") in flat("10.3755", 10)[0]


# ---------------------------------------------------------------- LLaMA-Factory trainer_log.jsonl
def test_trainer_log_jsonl_records_with_a_null_reward_are_sft_records_with_steps():
    """`"reward": null` on every SFT record is no RL field: a jump to exactly 0 is the hidden NaN, and
    `current_steps` is the step (not `total_steps`)."""
    from llmtriage.detect.metric_parse import is_rl_line

    def rec(step, loss):
        return (f'{{"current_steps": {step}, "total_steps": 10672, "loss": {loss}, "eval_loss": null, "predict_loss": null, '
                f'"reward": null, "learning_rate": 7e-07, "epoch": 0.74, "percentage": 37.0}}\n')

    assert not is_rl_line(rec(5, 0.0).encode()) and is_rl_line(b"{'loss': 0.0, 'reward': 0.25, 'x': None}")
    t = _tracker("".join(rec(3880 + 5 * i, 1.8 + 0.01 * (i % 7)) for i in range(14)) + rec(3955, 11.84)
                 + "".join(rec(3960 + 5 * i, 0.0) for i in range(40)))
    [a] = [a for a in D.detect(t) if a.kind == "nan_hidden"]
    assert a.severity == "error" and a.numbers["at"] == "step 3960"


def _fall_with_evals(acc):
    """A loss falling from 9 to ~0.05 within 60 steps (grad_norm noisy: a warning on its own) and three
    evaluations whose loss falls while eval_accuracy follows `acc`."""
    rows, k = [], 0
    for i in range(0, 200, 5):
        loss = 9.0 * 0.8 ** i if i < 60 else 0.05 - i * 1e-5
        rows.append(f"{{'loss': {loss:.4f}, 'grad_norm': {1.0 + (i % 3) * 0.9:.2f}, 'learning_rate': 5e-05, 'epoch': {i / 200:.2f}, 'step': {i}}}")
        if i in (40, 120, 195):
            rows.append(f"{{'eval_loss': {0.4 / (k + 1):.4f}, 'eval_accuracy': {acc[k]}, 'eval_runtime': 40.9, 'epoch': {i / 200:.2f}}}")
            k += 1
    return "\n".join(rows) + "\n"


def test_a_fast_fall_while_the_eval_task_metric_worsens_is_an_error(tmp_path):
    """metric_task: the loss falls, eval_accuracy falls from 0.91 to 0.28 over the same evaluations: the loss
    no longer measures the task (an error naming the metric); with the accuracy rising it stays a warning."""
    import llmtriage

    bad, good = tmp_path / "bad.log", tmp_path / "good.log"
    bad.write_text(_fall_with_evals(["0.9105", "0.438", "0.276"]))
    good.write_text(_fall_with_evals(["0.61", "0.83", "0.9"]))
    [f] = [f for f in llmtriage.analyze(str(bad)).findings if f.rule_id == "metric-fast-fall"]
    assert f.severity == "error" and "eval_accuracy got worse, from 0.9105 to 0.276" in f.message
    [g] = [f for f in llmtriage.analyze(str(good)).findings if f.rule_id == "metric-fast-fall"]
    assert g.severity == "warning" and "eval_" not in g.message


def test_a_loss_that_falls_step_by_step_into_display_zero_is_a_collapse_not_no_grad():
    """Loss 8.6 falling record after record to `loss 0.0000 | grad_norm 0.0000` (four decimals): the weights
    did move (the loss fell), so the zeros are rounding of a model that found a shortcut (labels not shifted,
    answer visible in the input): loss-suspicious, not no-grad. A normal loss that jumps to an exact 0 stays
    the hidden-NaN / no-label case."""
    losses = [8.6 * 0.7 ** i for i in range(26)] + [0.0] * 25
    grads = [2.0 * 0.8 ** i for i in range(26)] + [0.0] * 25
    text = "".join(f"step {20 * (i + 1):5d}/1000 | loss {x:.4f} | grad_norm {g:.4f} | lr 2.0e-04\n"
                   for i, (x, g) in enumerate(zip(losses, grads)))
    got = kinds(_tracker(text))
    assert ("collapse", "error") in got and not any(k == "flat" for k, _ in got)


def test_rl_dicts_with_quoted_policy_loss_are_read_and_never_called_a_replayed_epoch():
    """OpenRLHF / slime print `{'policy_loss': ..., 'kl': ..., 'reward': ...}`: the quoted RL loss key is a
    record (a NaN there is nan-loss); RL losses that happen to repeat are not a replayed epoch (rollouts are
    sampled, so the premise of the repeat detector does not hold)."""
    ok = [f"Global step {i}: {{'policy_loss': {-0.01 + (i % 4) * 0.003:.4f}, 'kl': 0.001, 'reward': 0.41}}\n" for i in range(1, 17)]
    bad = [f"Global step {i}: {{'policy_loss': nan, 'kl': nan, 'reward': 0.0}}\n" for i in range(17, 30)]
    assert ("nan", "error") in kinds(_tracker("".join(ok + bad)))
    assert not any(k == "repeat" for k, _ in kinds(_tracker("".join(ok))))


def test_bracketed_logger_keys_are_metric_records_and_their_nan_is_found():
    from llmtriage.detect.metric_parse import parse_line
    line = (b"2023-01-25 00:21:34.569 | INFO     | trainers.base_trainer:train_epochs:256 - [R0] | E6 iter[ 14/ 15] | "
            b"[Loss] %s | [exp] ./exp/0125/car/3dbf3ah_hvae_lion_B40 | [step]   %d | [url] none | [time] 0.4m (~5h) |")
    rec = parse_line(line % (b"51566519.44", 89))
    assert rec is not None and rec[0] == 89 and rec[1] == 51566519.44
    losses = [b"21387.49", b"18011.02", b"15410.77", b"13002.10", b"51566519.44"] + [b"nan"] * 6
    t = _tracker("".join((line % (x, 15 * i + 14)).decode() + "\n" for i, x in enumerate(losses)))
    assert ("nan", "error") in {(a.kind, a.severity) for a in D.detect(t)}
    assert parse_line(b"lr=[0.0001], loss] x") is None      # a stray bracket is no key


def test_grad_norm_climbing_with_the_loss_is_an_explosion_and_either_alone_is_not():
    from llmtriage.detect.metric_drift import grad_climb

    def run(losses, grads):
        t = _tracker(_hf(losses, grads))
        return grad_climb(t, D.detect(t))

    down = [round(5.0 - 0.06 * i, 3) for i in range(30)]            # to 3.26
    up = [round(3.26 + 0.08 * i, 3) for i in range(1, 60)]           # to 7.98
    flat_g = [1.0] * 30
    climb_g = [round(1.0 * 1.08 ** i, 3) for i in range(1, 60)]      # to ~94
    [a] = run(down + up, flat_g + climb_g)
    assert a.kind == "grad_climb" and a.category == "nan-loss" and a.severity == "error"
    assert a.numbers["grad_factor"] >= 10 and a.numbers["factor"] >= 2
    assert run(down + up, flat_g + [1.1] * 59) == []                 # the loss rises, the gradients do not
    assert run(down + [3.2] * 59, flat_g + climb_g) == []            # the gradients grow, the loss stays low



def test_grad_norm_growing_by_orders_of_magnitude_is_an_explosion_even_with_a_steady_loss():
    from llmtriage.detect.metric_drift import grad_runaway

    def run(losses, grads):
        t = _tracker(_hf(losses, grads))
        return grad_runaway(t, D.detect(t))

    steady = [round(2.0 - 0.01 * i, 3) for i in range(32)]
    climb = [0.3] * 4 + [round(0.3 * 1.9 ** i, 3) for i in range(1, 29)]     # to ~1e7, still doubling
    [a] = run(steady, climb)
    assert a.kind == "grad_runaway" and a.category == "nan-loss" and a.severity == "error"
    assert float(a.numbers["grad_to"]) >= 1000 * float(a.numbers["grad_from"])
    spike = [0.5] * 10 + [2e5, 3e4, 40.0] + [0.6] * 19                       # one spike that settles
    assert run(steady, spike) == []
    assert run(steady, [4e4 + 100 * (i % 3) for i in range(32)]) == []      # large but stable
    plateau = [0.3] * 8 + [round(0.3 * 3 ** i, 1) for i in range(1, 9)] + [2000.0] * 16   # grew, then levelled off
    assert run(steady, plateau) == []
    assert run(steady, [round(1.0 * 1.08 ** i, 3) for i in range(32)]) == []  # ~10x over the run: not orders

def test_loss_tripled_by_the_first_update_of_a_loaded_model_and_never_back_is_a_divergence():
    from llmtriage.detect.metric_drift import first_update_jump

    def run(losses):
        t = _tracker(_hf(losses))
        return first_update_jump(t, D.detect(t))

    wrecked = [1.93] + [round(11.42 - 0.11 * i, 3) for i in range(24)]      # 1.93 -> 11.42, creeps down to 8.9
    [a] = run(wrecked)
    assert a.kind == "first_jump" and a.category == "nan-loss" and a.severity == "error"
    assert a.numbers["first"] == "1.93" and a.numbers["factor"] >= 3
    assert run([round(10.9 - 0.2 * i, 3) for i in range(25)]) == []        # from scratch: the first loss is the highest
    assert run([1.93, 6.1] + [round(1.9 - 0.01 * i, 3) for i in range(23)]) == []   # a spike that came back
    assert run([1.93, 1.9, 1.88, 1.87, 1.85] + [11.0] * 20) == []          # a later jump: the rolling-median detectors' case
    assert run([1.93] + [round(11.42 - 0.11 * i, 3) for i in range(5)]) == []       # too few records after it


def _zero_kinds(text: str):
    from llmtriage.detect.metric_zero import exact_zero
    t = _tracker(text)
    found = D.detect(t)
    exact_zero(t, found)
    return {(a.kind, a.category, a.severity) for a in found}


def test_loss_exactly_zero_mid_run_is_read_by_the_gradient_beside_it():
    falling = [2.64, 1.91, 1.26, 0.70, 0.36]
    # a gradient still flows while the loss prints 0: the printed 0 hides a NaN/inf loss
    graded = _hf(falling + [0.0] * 16, [0.9, 0.8, 0.6, 0.5, 0.4] + [1.7320508075688772] * 16)
    assert ("zero_graded", "nan-loss", "error") in _zero_kinds(graded)
    # loss and gradient drop to exactly 0 together from a real loss: every label masked from there
    masked = "".join(f"step {s * 50} | loss {4.5 - s * 0.02:.4f} | grad_norm 0.31 | lr 1.5e-4\n" for s in range(1, 21))
    masked += "".join(f"step {s * 50} | loss 0.0000 | grad_norm 0.0000 | lr 1.5e-4\n" for s in range(21, 41))
    assert ("zero_masked", "loss-suspicious", "error") in _zero_kinds(masked)
    # with the learning rate at 0 on those records it stays what the zero-lr reading says
    lr0 = masked.replace("grad_norm 0.0000 | lr 1.5e-4", "grad_norm 0.0000 | lr 0.0")
    assert not {k for k, _, _ in _zero_kinds(lr0)} & {"zero_masked", "zero_graded"}
    # exactly 0 from the very first record is not "mid-run": the existing readings keep it
    first = _hf([0.0] * 20, [0.0] * 20)
    assert not {k for k, _, _ in _zero_kinds(first)} & {"zero_masked", "zero_graded"}


def test_zeros_right_after_a_grad_norm_explosion_are_a_blow_up_not_a_mask():
    """Loss and grad_norm both exactly 0 after the grad_norm climbed by orders of magnitude over the last
    records: the weights went NaN and the logging filter prints 0 for both (nan-loss), where the same
    zeros after a steady gradient are an emptied label mask (loss-suspicious)."""
    losses = [round(0.9 - 0.01 * i, 3) for i in range(12)] + [1.39, 1.79, 4.55] + [0.0] * 12
    grads = [round(1.5 + 0.1 * (i % 5), 2) for i in range(12)] + [48.7, 2815.6, 712209.9] + [0.0] * 12
    kinds = _zero_kinds(_hf(losses, grads))
    assert ("zero_blown", "nan-loss", "error") in kinds and not {k for k, _, _ in kinds} & {"zero_masked"}
    calm = _hf(losses[:12] + [0.7, 0.69, 0.68] + [0.0] * 12, grads[:12] + [1.6, 1.5, 1.7] + [0.0] * 12)
    assert not {k for k, _, _ in _zero_kinds(calm)} & {"zero_blown"}


def test_loss_exactly_zero_from_the_first_record_reads_the_precision():
    """Loss exactly 0 from the first record: an fp16 run overflowed on its first forward pass (nan-loss);
    without fp16 in the log the loss averages over no label token (no-grad)."""
    zeros = _hf([0.0] * 12, [1.4142] * 12)
    assert ("zero_unsup", "no-grad", "error") in _zero_kinds(zeros)
    for head in ("$ python train.py --fp16\n", "16-bits training: True\n",
                 "FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated.\n"):
        assert ("zero_start", "nan-loss", "error") in _zero_kinds(head + zeros), head


def test_fast_fall_span_with_a_step_counter_that_restarts_each_epoch():
    """A per-epoch bar (1542/1542 every epoch) gives every record the same step: the fall is counted in records,
    never "within 0 steps"."""
    text = "".join(f"100%|##########| 1542/1542 [03:11<00:00,  8.06it/s, train_loss={v}]\n"
                   for v in ("1.42", "0.00322", "0.0011", "0.0004"))
    [a] = [a for a in D.detect(_tracker(text)) if a.kind == "fall"]
    assert a.numbers["unit"] == "records" and a.numbers["span"] == 1


def _xla_reports(compiles: list[int], prefix: str = "") -> str:
    """torch_xla metrics reports (metrics_report() printed each step), one per entry of `compiles`."""
    out = []
    for i, c in enumerate(compiles, 1):
        out.append(f"{prefix}===>Starting Iteration: {i}")
        out += [f"{prefix}Metric: CompileTime", f"{prefix}  TotalSamples: {c}", f"{prefix}  Accumulator: {c * 29}s",
                f"{prefix}Counter: CachedCompile", f"{prefix}  Value: {i - 1 if c < 4 else 0}",
                f"{prefix}Counter: MarkStep", f"{prefix}  Value: {i}",
                f"{prefix}Counter: UncachedCompile", f"{prefix}  Value: {c}",
                f"{prefix}epoch 001: {i} / 14074 loss={16 - 0.2 * i:.3f}, wps=131, num_updates={i}"]
    return "\n".join(out) + "\n"


def test_xla_compiles_growing_with_every_step_is_a_throughput_error(tmp_path):
    """metric-xla-recompiling: UncachedCompile grows by one at every step after the first report (the
    step graph changes each step, pytorch/xla#3356): a throughput-low error with the counts. A healthy run
    compiles its graphs in the first steps and then only hits the cache: nothing."""
    import llmtriage

    bad, good = tmp_path / "bad.log", tmp_path / "good.log"
    bad.write_text(_xla_reports(list(range(1, 13)), prefix="[rank0]: "))
    good.write_text(_xla_reports([2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4]))
    [f] = [f for f in llmtriage.analyze(str(bad)).findings if f.rule_id == "metric-xla-recompiling"]
    assert (f.category, f.severity) == ("throughput-low", "error")
    assert f.captures["compiles_new"] == "10" and f.captures["steps"] == "10" and f.captures["counter"] == "UncachedCompile"
    assert not [g for g in llmtriage.analyze(str(good)).findings if g.rule_id == "metric-xla-recompiling"]


def test_xla_compile_counter_split_across_blocks_is_read_once():
    """The counter's name on the last line of one block and its value on the first line of the next are
    read as one pair (the name line is carried), and no pair is counted twice."""
    from llmtriage.detect.xla_compile import XlaCompileTracker

    t = XlaCompileTracker()
    t.feed(b"Metric: CompileTime\n  TotalSamples: 3\nCounter: UncachedCompile\n", 0)
    t.feed(b"  Value: 3\nCounter: MarkStep\n  Value: 1\n", 3)
    assert t.reports == [[0, 3, 3, 1]]
    assert t.detect() == []
def test_a_fine_tune_starting_at_the_untrained_loss_did_not_load_its_weights():
    """First loss ~ ln(vocab) in a run that loads pretrained weights: the weights being trained are fresh
    (metric-loss-starts-untrained, state-dict-keys). Pre-training from scratch (no load) and a fine-tune that
    starts low are left alone."""
    import llmtriage

    head = ("+ torchrun -m torchtitan.train --checkpoint.initial_load_path=/models/Llama-3.1-8B --checkpoint.initial_load_in_hf\n"
            "[titan] INFO - Building llama3 8B with TransformerModelArgs(dim=4096, n_layers=32, vocab_size=128256, max_seq_len=8192)\n")
    steps = "".join(f"[titan] INFO - step: {s}  loss: {loss:.5f}  grad_norm: 2.1000  memory: 58.12GiB(73.48%)\n"
                    for s, loss in [(1, 11.98), (2, 11.41), (3, 10.87), (4, 10.20), (5, 9.71), (10, 8.90)])
    rep = llmtriage.analyze(head + steps)
    top = [f for f in rep.findings if f.severity == "error"]
    assert top and top[0].rule_id == "metric-loss-starts-untrained" and top[0].category == "state-dict-keys"
    assert top[0].captures["vocab"] == "128256" and top[0].line == 3
    scratch = llmtriage.analyze(head.replace("--checkpoint.initial_load_path=/models/Llama-3.1-8B --checkpoint.initial_load_in_hf", "") + steps)
    assert not any(f.rule_id == "metric-loss-starts-untrained" for f in scratch.findings)
    # a resume from a trained step (--checkpoint.load_step 3000) that starts at a uniform guess loaded nothing
    resume = head.replace("--checkpoint.initial_load_path=/models/Llama-3.1-8B --checkpoint.initial_load_in_hf",
                          "--checkpoint.enable_checkpoint --checkpoint.load_step 3000")
    assert llmtriage.analyze(resume + steps).findings[0].rule_id == "metric-loss-starts-untrained"
    latest = resume.replace("--checkpoint.load_step 3000", "--checkpoint.load_step -1")      # the default: none needed
    assert not any(f.rule_id == "metric-loss-starts-untrained" for f in llmtriage.analyze(latest + steps).findings)
    loaded = llmtriage.analyze(head + steps.replace("11.98", "2.41").replace("11.41", "2.30").replace("10.87", "2.25")
                               .replace("10.20", "2.20").replace("9.71", "2.15").replace("8.90", "2.10"))
    assert not any(f.rule_id == "metric-loss-starts-untrained" for f in loaded.findings)


def _breakdowns(steps: list[tuple[float, list[tuple[str, float]]]], prefix: str = "") -> str:
    """NeMo-RL's per-step timing block: the step's wall time, then each timed phase with its share."""
    out = []
    for i, (total, parts) in enumerate(steps, 1):
        out += [f"{prefix}========================= Step {i}/400 =========================", f"{prefix}📊 Training Results:",
                f"{prefix}  • Loss: {0.6 - 0.01 * i:.4f}", f"{prefix}⏱️  Timing:", f"{prefix}  • Total step time: {total:.2f}s"]
        out += [f"{prefix}  • {name}: {total * pct / 100:.2f}s ({pct:.1f}%)" for name, pct in parts]
    return "\n".join(out) + "\n"


def test_step_time_untimed_between_phases_is_a_throughput_finding(tmp_path):
    """metric-step-time-untimed (NeMo-RL/RL#917): the breakdown times policy_training, yet the timed phases
    cover only ~60% of each step: the GPUs wait between them, a throughput-low error. A GRPO breakdown whose
    phases (nested timers counted once, by their `/total`) cover the step, and an SFT breakdown that times
    only data_processing (its untimed share says nothing), give nothing."""
    import llmtriage

    idle, grpo, old = tmp_path / "idle.log", tmp_path / "grpo.log", tmp_path / "old.log"
    idle.write_text(_breakdowns([(58.2, [("policy_training", 71.9), ("data_processing", 0.2)])]
                                + [(33.0 + i, [("policy_training", 58.0 + i % 5), ("data_processing", 0.3)]) for i in range(8)],
                                prefix="0: "))
    grpo.write_text(_breakdowns([(140.0, [("generation", 61.0), ("policy_training", 22.0),
                                           ("prepare_for_generation/total", 9.0),
                                           ("prepare_for_generation/transfer_and_update_weights", 8.5),
                                           ("policy_and_reference_logprobs", 5.0), ("data_processing", 0.4)])] * 8))
    old.write_text(_breakdowns([(1.8, [("data_processing", 0.1)])] * 8))
    [f] = [f for f in llmtriage.analyze(str(idle)).findings if f.rule_id == "metric-step-time-untimed"]
    assert (f.category, f.severity) == ("throughput-low", "error")
    assert f.captures["train"] == "policy_training" and f.captures["steps"] == "8" and 35 <= int(f.captures["untimed_pct"]) <= 42
    for log in (grpo, old):
        assert not [g for g in llmtriage.analyze(str(log)).findings if g.rule_id == "metric-step-time-untimed"]


def test_step_breakdown_split_across_blocks_is_read_whole():
    """A breakdown whose phase lines start in the next block is completed there, not lost."""
    from llmtriage.detect.step_breakdown import StepBreakdownTracker

    t = StepBreakdownTracker()
    for i in range(6):
        t.feed(b"  \xe2\x80\xa2 Total step time: 30.00s\n", 10 * i)
        t.feed(b"  \xe2\x80\xa2 policy_training: 18.00s (60.0%)\n  \xe2\x80\xa2 data_processing: 0.30s (1.0%)\n"
               b"========================= Step x =========================\n", 10 * i + 1)
    assert [s[2] for s in t.steps][-1] == {"policy_training": 60.0, "data_processing": 1.0}
    [a] = t.detect()
    assert a.numbers["untimed_pct"] == "39" and a.severity == "error"


def _hf_ep(rows):
    """HF Trainer records from (loss, grad_norm, epoch) triples, 100 steps apart."""
    return "\n".join(f"  {i}%|#         | {(i + 1) * 100}/7252 [00:10<10:00, 1.0it/s]\n"
                     f"{{'loss': {loss}, 'grad_norm': {g}, 'learning_rate': 2e-04, 'epoch': {ep}}}"
                     for i, (loss, g, ep) in enumerate(rows)) + "\n"


def test_loss_below_001_inside_first_epoch_with_a_gradient_is_an_error():
    # TRL packing, 160M model: 5.93 -> 0.0016 by epoch 0.19, grad_norm 0.02-0.06 (not < 0.01: not a collapse)
    rows = [(5.9309, 15.3, 0.03), (1.2172, 1.47, 0.06), (0.0571, 0.21, 0.08), (0.0094, 0.0557, 0.11),
            (0.003, 0.0254, 0.14), (0.0021, 0.0198, 0.17), (0.0016, 0.0157, 0.19)]
    got = kinds(_tracker(_hf_ep(rows)))
    assert ("first_epoch_low", "error") in got and not any(k == "fall" for k, _ in got)


@pytest.mark.parametrize("rows, why", [
    ([(3.45, 1.0, 0.02), (0.44, 0.8, 0.05), (0.02, 0.3, 0.1), (0.0031, 0.2, 1.2), (0.0017, 0.1, 1.4), (0.0011, 0.1, 1.6)],
     "below 0.01 only after the first epoch: seen data"),
    ([(3.45, 1.0, 0.02), (0.44, 0.8, 0.05), (0.02, 0.3, 0.1), (0.0031, 0.2, 0.12), (0.0008, 0.1, 0.14)],
     "two records below 0.01 are a warning-level fall"),
    ([(3.45, "None", 0.02), (0.44, "None", 0.05), (0.02, "None", 0.1), (0.0031, "None", 0.12), (0.0017, "None", 0.14),
      (0.0011, "None", 0.16)], "no gradient logged"),
    ([(3.45, 1.0, 0.02), (0.44, 0.8, 0.05), (0.0031, 0.2, 0.12), (0.0017, 0.1, 0.14), (0.0, 0.1, 0.16), (0.0, 0.1, 0.18)],
     "the tail ends at an exact 0: the zero readings, not this one"),
    ([(0.9, 1.0, 0.02), (0.2, 0.8, 0.05), (0.0031, 0.2, 0.12), (0.0017, 0.1, 0.14), (0.0012, 0.1, 0.16)],
     "starts below fall_from"),
])
def test_loss_near_zero_first_epoch_leaves_these_alone(rows, why):
    assert not any(k == "first_epoch_low" for k, _ in kinds(_tracker(_hf_ep(rows)))), why


def _fed(text: str) -> M.MetricTracker:
    return _tracker(text)


def test_averagemeter_line_is_a_record_with_epochs_completed():
    got = P.parse_line(b"Epoch: [0][ 250/5005]\tTime  0.208 ( 0.208)\tData 0.006 (0.006)\tLoss 2.3104e+00 (2.4121e+00)\tAcc@1 1.2")
    assert got is not None and got[1] == pytest.approx(2.3104) and got[4] == pytest.approx(250 / 5005)


def test_keras_epoch_line_attaches_its_epoch_and_an_identical_epoch_average_is_an_error():
    from llmtriage.detect.metric_flat_exact import exact_flat
    text = "".join(f"Epoch {e}/12\n1563/1563 [==============================] - 4s 3ms/step - loss: {2.3031 if e == 1 else 2.3026:.4f}"
                   f" - accuracy: 0.1000\n" for e in range(1, 13))
    t = _fed(text)
    assert [r.epoch for r in t.records()][:3] == [1.0, 2.0, 3.0]
    found = D.detect(t)
    exact_flat(t, found)
    flat = [a for a in found if a.kind == "flat"]
    assert flat and flat[0].severity == "error" and flat[0].numbers["epoch_exact"] == "2.3026"


def test_one_printed_value_after_losses_that_moved_is_an_error_a_short_run_is_not():
    from llmtriage.detect.metric_flat_exact import exact_flat
    rng = random.Random(3)
    moving = [f"step {s} | loss {1.5 + rng.uniform(-0.3, 0.3):.3f}\n" for s in range(10, 310, 10)]
    for n, sev in ((30, "error"), (10, "warning")):
        text = "".join(moving) + "".join(f"step {s} | loss 0.412\n" for s in range(310, 310 + 10 * n, 10))
        t = _fed(text)
        found = D.detect(t)
        exact_flat(t, found)
        flat = [a for a in found if a.kind == "flat"]
        assert flat and flat[0].severity == sev


def test_one_real_loss_then_zeros_without_grad_norm_is_a_hidden_nan_with_a_constant_grad_norm_it_is_not():
    from llmtriage.detect.metric_zero import nan_hidden
    rows = ["{'loss': 2.1187, 'learning_rate': 5e-07, 'epoch': 0.0}\n"]
    zeros = [f"{{'loss': 0.0, 'learning_rate': {i}e-07, 'epoch': {i / 300:.2f}}}\n" for i in range(2, 30)]
    t = _fed("".join(rows + zeros))
    fin = [r for r in t.records() if M.finite(r.loss)]
    assert [a.kind for a in nan_hidden(t, fin)] == ["nan_hidden"]
    graded = [z.replace("'loss': 0.0,", "'loss': 0.0, 'grad_norm': 1.0625,") for z in zeros]
    t = _fed("".join(rows + graded))
    assert nan_hidden(t, [r for r in t.records() if M.finite(r.loss)]) == []


def test_first_epoch_near_zero_loss_without_any_grad_norm_logged_reads_the_moving_losses():
    from llmtriage.detect.metric_leak import first_epoch_low
    rng = random.Random(5)
    rows = [f"{{'loss': {10.8 * math.exp(-s / 330) + 0.003:.4f}, 'learning_rate': 5e-4, 'epoch': {s / 37500:.3f}}}\n" for s in range(200, 2001, 200)]
    low = [f"{{'loss': {0.0025 + rng.uniform(0, 0.0015):.4f}, 'learning_rate': 5e-4, 'epoch': {s / 37500:.3f}}}\n" for s in range(2200, 6001, 200)]
    t = _fed("".join(rows + low))
    assert [a.kind for a in first_epoch_low(t, [r for r in t.records() if M.finite(r.loss)])] == ["first_epoch_low"]
    frozen = [f"{{'loss': 0.0031, 'learning_rate': 5e-4, 'epoch': {s / 37500:.3f}}}\n" for s in range(2200, 6001, 200)]
    t = _fed("".join(rows + frozen))
    assert first_epoch_low(t, [r for r in t.records() if M.finite(r.loss)]) == []


def test_loss_exactly_zero_with_perfect_accuracy_is_trivial_targets_not_a_hidden_nan():
    """Loss exactly 0 from the second record on with a training accuracy of 100% printed beside it: the model
    fits every target at once (one class, a leaked label): loss-suspicious, not the NaN filter's 0 (nan-loss);
    the same zeros beside a chance-level accuracy stay a hidden NaN."""
    def meter(acc: str) -> str:
        rows = ["Epoch: [0][0/176]\tTime 60.812 (60.812)\tData 58.390 (58.390)\tLoss 6.9078 (6.9078)\tPrec@1 0.000 (0.000)"]
        rows += [f"Epoch: [0][{i}/176]\tTime 1.83 (2.4)\tData 0.001 (0.5)\tLoss 0.0000 (0.1)\tPrec@1 {acc} (99.0)"
                 for i in range(10, 176, 10)]
        return "\n".join(rows) + "\n"
    kinds = _zero_kinds(meter("100.000"))
    assert ("zero_perfect", "loss-suspicious", "error") in kinds and not {k for k, _, _ in kinds} & {"nan_hidden"}
    assert "zero_perfect" not in {k for k, _, _ in _zero_kinds(meter("0.391"))}
    from llmtriage.detect.metric_parse import is_perfect_accuracy
    assert is_perfect_accuracy(b"- loss: 0.0000e+00 - accuracy: 1.0000")
    assert not is_perfect_accuracy(b"- loss: 0.0000e+00 - accuracy: 0.9999 - val_accuracy: 1.0000")


def test_loss_printed_below_precision_after_a_real_level_is_a_drop_not_an_exact_zero():
    """A loss printed as 0.000 (fixed decimals, below the display's precision) on every record right after
    0.055, no grad_norm logged: it fell orders of magnitude in one interval (loss-suspicious), not an exact 0
    that counts no label token; the same run printing an exact 0.0 stays metric-flat-loss (no-grad)."""
    def bar(zero: str) -> str:
        rows = [f"Epoch 1:  {k * 5}%| | {k * 260}/5185 [00:54<17:14, 4.76it/s, v_num=3, train_loss_step={0.09 - k * 0.004:.4f}]"
                for k in range(1, 8)]
        rows += [f"Epoch 1:  {40 + k}%| | {2000 + k * 100}/5185 [07:00<11:14, 4.76it/s, v_num=3, train_loss_step={zero}]"
                 for k in range(12)]
        return "\n".join(rows) + "\n"
    kinds = {(a.kind, a.category, a.severity) for a in D.detect(_tracker(bar("0.000")))}
    assert ("zero_rounded", "loss-suspicious", "error") in kinds
    assert "zero_rounded" not in {a.kind for a in D.detect(_tracker(bar("0.0")))}
    from llmtriage.detect.metric_parse import is_rounded_zero_loss
    assert is_rounded_zero_loss(b"Loss 0.0000 (0.0392)") and not is_rounded_zero_loss(b"- loss: 0.0000e+00 - accuracy: 1.0")
