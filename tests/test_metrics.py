"""Metric parsing and the metric detectors (engine-produced findings `metric-*`)."""
from __future__ import annotations

import io
import math
import random
import tracemalloc

import pytest

from llmtriage import metrics as M
from llmtriage import scan_source
from llmtriage.logparse import iter_blocks, match_view


@pytest.mark.parametrize("line, expect", [
    (b"{'loss': 2.3456, 'grad_norm': 0.91, 'learning_rate': 1.9e-05, 'epoch': 0.12}", (None, 2.3456, 0.91, 1.9e-05, 0.12)),
    (b"{'loss': '4.131', 'grad_norm': 'nan', 'learning_rate': '2e-05', 'epoch': '0.5'}", (None, 4.131, math.nan, 2e-05, 0.5)),
    (b" iteration      100/  500000 | consumed samples: 51200 | learning rate: 2.9E-04 | lm loss: 7.215E+00 | loss scale: 65536.0 | grad norm: 3.210 |",
     (100, 7.215, 3.21, 2.9e-04, None)),
    (b"[Rank 0] step=120, skipped=0, loss=2.31, lr=[0.0001], grad_norm=0.8", (120, 2.31, 0.8, 1e-4, None)),
    (b"Epoch 0:  45%|####5     | 450/1000 [01:23<01:42, 5.38it/s, v_num=0, train_loss=2.310]", (450, 2.31, None, None, 0)),
    (b"Step 100: loss = 2.3000, lr = 0.0001", (100, 2.3, None, 1e-4, None)),
    (b"{'loss': 1.0, 'grad_norm': inf, 'learning_rate': 0.0, 'epoch': 1.0}", (None, 1.0, math.inf, 0.0, 1.0)),
])
def test_parse_line_formats(line, expect):
    got = M.parse_line(line)
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
    assert M.parse_line(line) is None


def _tracker(text: str, **th) -> M.MetricTracker:
    t = M.MetricTracker(M.Thresholds(**th) if th else M.Thresholds())
    base = 1
    for chunk, _ in iter_blocks(io.BytesIO(text.encode())):
        lines, view = match_view(chunk)
        t.feed_block(lines, view, base)
        base += lines.count(b"\n")
    t.flush(base)
    return t


def _hf(losses, grads=None, quoted=False):
    q = "'" if quoted else ""
    out = []
    for i, loss in enumerate(losses):
        g = grads[i] if grads else 1.0
        out.append(f"  {i}%|#         | {(i + 1) * 10}/5000 [00:10<10:00, 1.0it/s]\n"
                   f"{{'loss': {q}{loss}{q}, 'grad_norm': {q}{g}{q}, 'learning_rate': {q}2e-05{q}, 'epoch': {q}0.01{q}}}")
    return "\n".join(out) + "\n"


def kinds(t):
    return {(a.kind, a.severity) for a in M.detect(t)}


def test_healthy_noisy_curve_raises_nothing():
    rnd = random.Random(1)
    losses = [round(max(1.0, 3.0 * 0.99 ** i) * (1 + rnd.uniform(-0.3, 0.3)), 4) for i in range(300)]
    grads = [round(rnd.uniform(0.3, 2.5), 3) for _ in range(300)]
    assert kinds(_tracker(_hf(losses, grads))) == set()


def test_nan_is_an_error_with_step_and_line():
    t = _tracker(_hf([2.1, 2.0, 1.9, "nan", "nan", "nan"], quoted=True))
    [a] = M.detect(t)
    assert (a.kind, a.severity, a.step) == ("nan", "error", 40)
    assert a.line == 8 and a.numbers["last_finite_loss"] == "1.9"


def test_single_transient_nan_grad_is_a_warning():
    t = _tracker(_hf([2.1, 2.0, 1.9, 1.8, 1.7], grads=[1.0, 1.0, "inf", 1.0, 1.0]))
    assert kinds(t) == {("nan", "warning")}


def test_flat_loss_with_zero_grad_is_no_grad_error():
    t = _tracker("".join(f"step={s} loss=10.3716 grad_norm=0.0 lr=2e-4\n" for s in range(10, 200, 10)))
    [a] = M.detect(t)
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
    from llmtriage.matcher import Engine

    text = "".join(f"step={s} loss=10.3716 grad_norm=0.0 lr=2e-4\n" for s in range(10, 200, 10))
    rep = scan_source(Engine(ruleset), text)
    top = rep.findings[0]
    assert (top.rule_id, top.category, top.severity) == ("metric-flat-loss", "no-grad", "error")
    assert "10.37" in top.message and "step 10" in top.message and top.fixes
    assert rep.extra["phase"] == "training" and rep.extra["step"] == 190
    assert rep.extra["metrics"]["records"] == 19
    zh = scan_source(Engine(ruleset, lang="zh"), text).findings[0]
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
    from llmtriage.loader import template_names
    from llmtriage.metrics import RULE_IDS, detector_texts

    texts = detector_texts()
    assert set(texts) == set(RULE_IDS)
    for kind, entry in texts.items():
        assert entry["rule_id"] == RULE_IDS[kind]
        en, zh = entry["en"], entry["zh"]
        for lang in (en, zh):
            assert all(lang[k].strip() for k in ("title", "message", "what", "why")), kind
            assert lang["fixes"] and all(f["title"] and f["detail"] for f in lang["fixes"]), kind
        assert len(en["fixes"]) == len(zh["fixes"]), kind
        assert template_names(en["message"]) == template_names(zh["message"]), kind
