"""throughput-low: step-time / GPU-use parsing and detection (analyzer/detect/throughput.py)."""
from __future__ import annotations

import io
import random

import pytest

from llmtriage.detect import metrics as M
from llmtriage import scan_source
from llmtriage.engine.logparse import iter_blocks, match_view
from llmtriage.detect.throughput import ThroughputTracker


def _run(text: str, train_start=1, **th):
    t = ThroughputTracker(M.Thresholds(**th) if th else M.Thresholds())
    base = 1
    for chunk, _ in iter_blocks(io.BytesIO(text.encode())):
        lines, view = match_view(chunk)
        t.feed(lines, view, base)
        base += lines.count(b"\n")
    return t, t.detect(train_start)


def _megatron(ms_of):
    return "".join(f" iteration {i:8d}/   20000 | consumed samples: {i * 256:12d} | elapsed time per iteration (ms): {ms_of(i):.1f} | "
                   f"learning rate: 3.0E-04 | global batch size:   256 | lm loss: 2.5E+00 | loss scale: 1.0 | grad norm: 0.9 | "
                   f"number of skipped iterations:   0 | number of nan iterations:   0 |\n" for i in range(10, 1210, 10))


def test_megatron_step_time_rising_is_a_warning_with_numbers():
    t, [a] = _run(_megatron(lambda i: 1400.0 if i < 600 else 3200.0))
    assert (a.category, a.severity) == ("throughput-low", "warning")
    assert a.numbers["early"] == "1.4" and a.numbers["late"] == "3.2" and a.numbers["rise"] == "2.3"
    assert t.steps["meg"].n == 120


def test_a_threefold_slowdown_in_a_run_that_has_not_finished_is_an_error():
    """The job is degrading as the log ends (a straggler node, fragmentation, swap): an error once the
    late median is rise_error (2.5x) the early one; the same curve in a run that finished stays a warning."""
    slow = _megatron(lambda i: 1800.0 if i < 600 else 6800.0)
    _, [a] = _run(slow)
    assert (a.severity, a.numbers["rise"]) == ("error", "3.8")
    _, [b] = _run(slow + "{'train_runtime': 3330.1, 'train_loss': 2.5, 'epoch': 1.0}\n")
    assert b.severity == "warning"


def _sglang(rate_of, n=40):
    return "".join(f"[2026-05-24 03:5{i // 10}:{i % 10}0 TP0] Decode batch, #running-req: 4, #full token: 2600000, "
                   f"full token usage: 0.99, cuda graph: True, gen throughput (token/s): {rate_of(i):.2f}, #queue-req: 3\n"
                   for i in range(n))


def test_sglang_decode_rate_collapsing_and_staying_down_is_an_error():
    _, [a] = _run(_sglang(lambda i: 430.0 if i < 10 else 30.0), train_start=None)
    assert a.severity == "error" and a.numbers["decode_from"] == "107.5" and a.numbers["decode_to"] == "7.5"
    assert a.line == 1 and a.last_line == 40      # the decode lines are the evidence (a finding never has line 0)
    # a busy server whose rate wobbles is healthy
    rnd = random.Random(3)
    assert _run(_sglang(lambda i: 400.0 * (1 + rnd.uniform(-0.3, 0.3))), train_start=None)[1] == []


def test_per_request_decode_falling_as_more_requests_are_batched_is_healthy():
    """vLLM at 1, 3, 5, 30 then 256 running requests: each request decodes slower, the engine far faster."""
    rows = [(1, 55.0), (3, 98.0), (5, 134.0), (30, 249.0), (256, 1275.0)]
    text = "".join(f"INFO 06-15 09:13:{i % 60:02d} metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation "
                   f"throughput: {gen:.1f} tokens/s, Running: {run} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache "
                   f"usage: 2.0%, CPU KV cache usage: 0.0%.\n" for i, (run, gen) in enumerate(r for r in rows for _ in range(6)))
    assert _run(text, train_start=None)[1] == []


def test_noisy_steady_step_times_raise_nothing():
    rnd = random.Random(5)
    _, found = _run(_megatron(lambda i: 1000.0 * (1 + rnd.uniform(-0.35, 0.35))))
    assert found == []
    bars = "".join(f"  {i * 100 // 900}%|#    | {i}/900 [{i // 60:02d}:{i % 60:02d}<10:00, {1.6 + rnd.uniform(-0.4, 0.4):.2f}s/it]\n"
                   for i in range(1, 400))
    assert _run(bars)[1] == []


def test_time_limit_while_slow_is_an_error_ranked_above_the_cancellation():
    text = _megatron(lambda i: 1400.0 if i < 600 else 3600.0)
    text += "slurmstepd: error: *** JOB 81234 ON node-3 CANCELLED AT 2024-08-01T06:00:12 DUE TO TIME LIMIT ***\n"
    _, [a] = _run(text)
    assert a.severity == "error" and a.numbers["stop"] == "DUE TO TIME LIMIT" and a.priority == 40
    # a time limit without any slowdown is the scheduler's story alone
    _, found = _run(_megatron(lambda i: 1400.0) + "slurmstepd: error: *** JOB 1 ON n CANCELLED AT 2024-08-01T06:00:12 DUE TO TIME LIMIT ***\n")
    assert found == []


def test_periodic_long_steps_but_not_checkpoint_saves():
    rnd = random.Random(2)
    text = _megatron(lambda i: 900.0 * (1 + rnd.uniform(-0.1, 0.1)) + (4000.0 if i % 100 == 0 else 0.0))
    _, [a] = _run(text)
    assert a.numbers["period"] == 10 and a.numbers.get("pipeline")
    # the same slow iterations right after checkpoint saves are expected
    lines = []
    for ln in text.splitlines(keepends=True):
        lines.append(ln)
        i = int(ln.split("/")[0].split()[-1])
        if i % 100 == 90:
            lines.append(f"saving checkpoint at iteration {i + 10:7d} to /ckpt\n")
    assert _run("".join(lines))[1] == []


SMI = """+-----------------------------------------------------------------------------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |
| N/A   33C    P0             64W /  400W |   {m0}MiB /  81920MiB |     {u0}%      Default |
|   1  NVIDIA A100-SXM4-80GB          On  |   00000000:0B:00.0 Off |                    0 |
| N/A   34C    P0             66W /  400W |   {m1}MiB /  81920MiB |     {u1}%      Default |
+-----------------------------------------+------------------------+----------------------+
"""


def test_nvidia_smi_idle_during_training_is_an_error_but_not_before_it():
    rec = "{'loss': 1.9, 'grad_norm': 0.7, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    text = rec + SMI.format(m0=61000, m1=60500, u0=0, u1=0) + rec + SMI.format(m0=61000, m1=60500, u0=0, u1=0) + rec
    _, [a] = _run(text, train_start=1)
    assert a.severity == "error" and a.numbers["idle"] == 2 and a.numbers["idle_gpus"] == "2/2"
    assert "mem_pct" not in a.numbers        # 74% of memory in use: the batch is not the problem
    # the same snapshot printed before training started (or after it ended) is normal
    assert _run(SMI.format(m0=4, m1=4, u0=0, u1=0) + rec, train_start=9)[1] == []
    assert _run(rec + "{'train_runtime': 31.0, 'train_loss': 1.2}\n" + SMI.format(m0=4, m1=4, u0=0, u1=0), train_start=1)[1] == []
    # busy GPUs with low memory: batch too small (warning)
    _, [a] = _run(rec + SMI.format(m0=9000, m1=9100, u0=41, u1=38) + rec, train_start=1)
    assert a.severity == "warning" and a.numbers["mem_pct"] == "11"


NPU_SMI = """+===========================+===============+====================================================+
| 0     910B3               | OK            | 92.1        36                0    / 0             |
| 0                         | 0000:C1:00.0  | {u0:<3}         0    / 0          {m0}/ 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 91.4        37                0    / 0             |
| 0                         | 0000:C2:00.0  | {u1:<3}         0    / 0          {m1}/ 65536         |
+===========================+===============+====================================================+
"""


def test_npu_smi_chip_rows_are_snapshots_too():
    """Ascend's npu-smi prints AICore(%) and HBM used / total on each chip's second row: an idle AICore
    during training is an idle accelerator, read like nvidia-smi's utilisation column."""
    rec = "{'loss': 1.9, 'grad_norm': 0.7, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    t, [a] = _run(rec + NPU_SMI.format(m0=19120, m1=19088, u0=0, u1=3) + rec, train_start=1)
    assert a.severity == "error" and a.numbers["idle_gpus"] == "2/2" and a.numbers["mem_pct"] == "29"
    assert t.snaps == [[(0, 19120, 65536, 4), (3, 19088, 65536, 7)]]   # one snapshot, two chips
    # busy chips with most of their HBM in use: nothing to say
    assert _run(rec + NPU_SMI.format(m0=61000, m1=60500, u0=88, u1=91) + rec, train_start=1)[1] == []


def test_nvidia_smi_csv_rows_and_verl_generation_share():
    steps = "".join(f"(TaskRunner pid=1) step:{i} - actor/pg_loss:-0.01 - actor/grad_norm:0.2 - timing_s/gen:{131 + i * 0.1:.3f} - "
                    f"timing_s/update_actor:19.8 - timing_s/step:{165 + i * 0.1:.3f}\n" for i in range(1, 6))
    csv = "index, utilization.gpu [%], memory.used [MiB]\n" + "".join(f"{g}, 0 %, 52297 MiB\n" for g in range(4))
    t, [a] = _run(steps + csv + "".join(f"{g}, 0 %, 52297 MiB\n" for g in range(4)))   # two snapshots
    assert a.severity == "error" and a.numbers["gen_pct"] == "79" and a.numbers.get("rollout")
    assert len(t.snaps) == 2
    # generation at 45% of the step with busy GPUs is normal for GRPO
    ok = steps.replace("timing_s/gen:13", "timing_s/gen:7")
    assert _run(ok)[1] == []


def test_skyrl_timing_dict_generation_share():
    """SkyRL logs its phase timings as a dict ('timing/generate', 'timing/step'): the same generation share as verl's."""
    steps = "".join(f"skyrl_train.trainer:train:299 - {{'timing/generate': {480 + i:.2f}, 'timing/train_critic_and_policy': 71.2, "
                    f"'timing/step': {569 + i:.2f}, 'policy_loss': 0.01}}\n" for i in range(6))
    t, [a] = _run(steps)
    assert a.numbers["gen_pct"] == "84" and a.severity == "warning"
    assert _run(steps.replace("'timing/generate': 48", "'timing/generate': 18"))[1] == []


def test_vllm_slow_decode_interrupted_with_eager_mode():
    text = ("non-default args: {'model': '/m', 'enforce_eager': True}\n"
            + "".join(f"INFO 11-04 14:43:{i:02d} [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
                      f"Avg generation throughput: {180 + i:.1f} tokens/s, Running: 64 reqs, Waiting: 0 reqs, GPU KV cache usage: 52.9%\n"
                      for i in range(6))
            + "^C\n")
    _, [a] = _run(text, train_start=None)
    assert a.severity == "error" and a.numbers["eager"] and a.numbers["reqs"] == 64 and a.numbers["stop"] == "^C"
    healthy = text.replace("Running: 64", "Running: 4").replace("^C\n", "")
    assert _run(healthy, train_start=None)[1] == []


def test_finding_through_the_engine_en_and_zh(ruleset):
    from llmtriage import get_engine

    text = _megatron(lambda i: 1400.0 if i < 600 else 3600.0)
    text += "slurmstepd: error: *** JOB 81234 ON node-3 CANCELLED AT 2024-08-01T06:00:12 DUE TO TIME LIMIT ***\n"
    rep = scan_source(get_engine(ruleset), text)
    top = rep.findings[0]
    assert (top.rule_id, top.category, top.severity) == ("metric-throughput-low", "throughput-low", "error")
    assert "1.4s to 3.6s" in top.message and "TIME LIMIT" in top.message
    titles = [f["title"] for f in top.fixes]
    assert "Find what grows over time" in titles and "Feed the GPUs faster" not in titles   # conditional fixes
    zh = scan_source(get_engine(ruleset, lang="zh"), text).findings[0]
    assert "单步耗时" in zh.message and len(zh.fixes) == len(top.fixes)


def test_thresholds_from_the_project_config(tmp_path, monkeypatch):
    from llmtriage.cli.config import load_settings
    from llmtriage.errors import ConfigError

    monkeypatch.delenv("LLMTRIAGE_NO_CONFIG", raising=False)
    monkeypatch.delenv("LLMTRIAGE_CONFIG", raising=False)
    (tmp_path / ".git").mkdir()
    cfg = tmp_path / ".llmtriage.yaml"
    old = M.THRESHOLDS.rise_factor
    try:
        cfg.write_text("thresholds:\n  rise_factor: 3.5\n")
        assert load_settings(tmp_path)["thresholds"] == {"rise_factor": 3.5}
        assert M.THRESHOLDS.rise_factor == 3.5
        # 2.6x no longer counts as a rise
        assert _run(_megatron(lambda i: 1400.0 if i < 600 else 3600.0), rise_factor=M.THRESHOLDS.rise_factor)[1] == []
        cfg.write_text("thresholds:\n  nope: 1\n")
        with pytest.raises(ConfigError, match="unknown threshold 'nope'"):
            load_settings(tmp_path)
        cfg.write_text("thresholds:\n  rise_factor: -1\n")
        with pytest.raises(ConfigError, match="non-negative"):
            load_settings(tmp_path)
    finally:
        M.configure(rise_factor=old)


def test_big_log_is_sampled_in_bounded_memory_and_still_sees_the_rise():
    import tracemalloc

    n = 120_000
    text = "".join(f"[rank0]:  {i * 100 // n}%|#         | {i}/{n} [01:00<10:00, {1.0 if i < n // 2 else 2.6:.2f}s/it]\n"
                   f"[rank0]: {{'loss': 2.1, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': {i / n:.3f}}}\n"
                   for i in range(n))
    blocks = [match_view(chunk) for chunk, _ in iter_blocks(io.BytesIO(text.encode()))]
    t = ThroughputTracker(M.Thresholds())
    tracemalloc.start()
    base = 1
    for lines, view in blocks:
        t.feed(lines, view, base)
        base += lines.count(b"\n")
    [a] = t.detect(1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    series = t.steps[f"bar/{n}"]
    assert series.n < 20_000 and len(series.values()) <= 256 + 512
    assert a.numbers["rise"] == "2.6" and peak < 2 << 20


def test_utilisation_dropping_to_zero_between_busy_snapshots_is_a_pipeline_warning():
    rec = "{'loss': 1.9, 'grad_norm': 0.7, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    busy = SMI.format(m0=61000, m1=60500, u0=97, u1=95)
    idle = SMI.format(m0=61000, m1=60500, u0=0, u1=0)
    _, [a] = _run(rec + busy + rec + idle + rec + busy + rec + busy + rec, train_start=1)
    assert a.severity == "warning" and a.numbers["idle_some"] == 1 and a.numbers["snaps"] == 4 and a.numbers["pipeline"]
    assert _run(rec + busy + rec + busy + rec + busy + rec, train_start=1)[1] == []
    # one dip among a dozen busy readings is a step boundary sampled, not a starving pipeline
    assert _run(rec + (busy + rec) * 5 + idle + rec + (busy + rec) * 6, train_start=1)[1] == []


def test_report_carries_a_throughput_summary(engine):
    text = "".join(f"  {i}%|#    | {i}/100 [00:{i:02d}<01:00, {1.5:.2f}s/it]\n" for i in range(1, 60))
    text += "{'train_runtime': 88.5, 'train_samples_per_second': 9.04, 'train_steps_per_second': 0.678, 'train_loss': 1.2, 'epoch': 1.0}\n"
    rep = scan_source(engine, text)
    d = rep.to_dict()["throughput"]
    assert d["median_step_s"] == 1.5 and d["train_samples_per_second"] == 9.04 and d["train_steps_per_second"] == 0.678
    assert not [f for f in rep.findings if f.category == "throughput-low"]


def test_a_malformed_number_in_an_engine_stats_line_is_no_sample_and_no_crash():
    """The patterns admit "[0-9.]+": ".812.4" matches but is no float (found by the differential fuzzer)."""
    text = ("INFO 01-22 00:12:59 metrics.py:467] Avg prompt throughput: .812.4 tokens/s, Avg generation throughput: "
            "61.2 tokens/s, Running: 6 reqs, Swapped: 0 reqs, Pending: 0 reqs\n")
    t, found = _run(text, train_start=None)
    assert found == [] and not t.decode


def _bars(secs, label="lokr-run-test-2: "):
    return "".join(f"{label}{i * 100 // 3000:3d}%|#    | {i * 25}/3000 [{i:02d}:00<40:00, {s:.2f}s/it, lr: 2.0e-04 loss: 5.1e-01]\n"
                   for i, s in enumerate(secs, start=2))


def test_a_climb_to_several_times_the_median_is_found_and_an_evaluation_pause_is_not():
    """Step times rising record after record (VRAM spilling to host memory, throttling) are a climb: an
    error when it ends the log; a pause that jumps once and decays is not one. A bar whose label is a job
    name ("...-test-2") is the training bar when its postfix shows a learning rate."""
    normal = [1.6, 1.7, 1.6, 1.9, 1.6, 1.7]      # (a block keeps at most 24 bar redraws: under that, all count)
    _, [a] = _run(_bars(normal * 3 + [1.5, 2.8, 5.3, 7.4]))
    assert a.severity == "error" and a.numbers["climb_from"] == "1.5" and a.numbers["climb_to"] == "7.4"
    assert a.numbers["climb_n"] == 4 and "rise" not in a.numbers
    # mid-run climb that recovered: reported, a warning
    _, [b] = _run(_bars(normal + [2.0, 5.4, 10.1, 18.7, 28.1] + normal))
    assert b.severity == "warning" and b.numbers["climb_to"] == "28.1"
    # an evaluation pause: one long step, then the smoothed rate decays back
    assert _run(_bars(normal + [14.0, 7.5, 4.1, 2.6, 1.9] + normal))[1] == []


def test_a_loss_line_rate_in_hz_redrawn_with_carriage_returns_is_a_rate_series():
    """voxceleb_trainer redraws `Processing N of M:Loss ... - 312.50 Hz` with \\r on one physical line: every
    redraw is a sample (they share a line number) and a collapse from ~300 Hz to single digits is read;
    a "16000 Hz" without a loss on the line (an audio sample rate) is not a rate."""
    draws = [f"\rProcessing {i * 19200} of 1092009:Loss {14 - i * 0.1:.6f} TEER/TAcc 40.000% - "
             f"{310.0 if i < 28 else 6.5:.2f} Hz " for i in range(1, 40)]
    t, [a] = _run("Sampling rate 16000 Hz\n" + "".join(draws) + "\n^C\n")
    assert t.steps["rate"].n == 39
    assert (a.category, a.severity) == ("throughput-low", "error")
    assert a.numbers["rate_from"] == "310" and a.numbers["rate_to"] == "6.5"


def _verl_saves(save_s, n=24, every=10, done=False):
    rows = []
    for i in range(1, n + 1):
        sv = save_s if i % every == 0 else 0.0
        extra = f" - timing_s/save_checkpoint:{sv:.3f}" if sv else ""
        rows.append(f"(TaskRunner pid=7) step:{i} - actor/pg_loss:0.01 - actor/grad_norm:0.2 - timing_s/gen:300.0 - "
                    f"timing_s/update_actor:280.0{extra} - timing_s/step:{880.0 + sv:.3f}\n")
    return "".join(rows) + ("{'train_runtime': 1.0}\n" if done else "")


def test_checkpoint_saves_taking_half_the_run_are_an_error_and_a_short_save_is_nothing():
    # verl, Megatron dist checkpoint on slow shared storage: two saves of ~11,000 s against 880 s steps
    _, [a] = _run(_verl_saves(11000.0))
    assert a.severity == "error" and a.numbers["save_pct"] == "51" and a.numbers["save_s"] == "22000"
    # a quarter of the time saving: a warning
    _, [a] = _run(_verl_saves(3600.0))
    assert a.severity == "warning" and a.numbers["save_pct"] == "25"
    # a save of a minute every ten steps is normal
    assert _run(_verl_saves(60.0))[1] == []


def test_a_loops_own_step_time_in_seconds_is_a_step_time_series():
    # MONAI tutorials: "3/16, train_loss: 0.6612, step time: 0.2268"; the epochs slow down 2.6x
    text = "".join(f"{i}/16, train_loss: 0.41, step time: {3.0 * (1 + 0.03 * ep):.4f}\n"
                   for ep in range(60) for i in (1, 8, 16))
    _, [a] = _run(text)
    assert a.numbers["early"] and float(a.numbers["rise"]) >= 2.0
    # the same numbers in milliseconds are not seconds
    assert _run(text.replace("step time: ", "avg step time: ").replace("\n", " ms\n"))[0].steps == {}


def test_tensorflow_tutorial_sec_per_batch_is_a_step_time_series():
    # TF's cifar10/inception trainers: "step 3290, loss = 2.15 (71.1 examples/sec; 3.600 sec/batch)"
    text = "".join(f"2016-07-23 15:16:29.206475: step {s}, loss = 2.15 ({256 / t:.1f} examples/sec; {t:.3f} sec/batch)\n"
                   for s, t in ((s, 3.6 if s < 900 else 10.1) for s in range(0, 1200, 10)))
    _, [a] = _run(text)
    assert a.numbers["early"] == "3.6" and float(a.numbers["rise"]) >= 2.5
    # a steady run raises nothing
    assert _run(text.replace("10.100 sec/batch", "3.600 sec/batch"))[1] == []


def test_torchtune_tokens_per_second_per_gpu_is_a_rate_series():
    text = "".join(f"Step {i} | loss:2.2 lr:3e-05 tokens_per_second_per_gpu:{2500.0 / (1 + 0.05 * i):.4f} "
                   f"peak_memory_active:11.4 peak_memory_alloc:11.4 peak_memory_reserved:21.9 \n" for i in range(1, 60))
    t, [a] = _run(text)
    assert "rate" in t.steps and a.numbers.get("rate_from") and float(a.numbers["rise"]) >= 2.0


def test_per_epoch_bars_that_end_at_the_same_count_are_one_sample_each():
    """Lightning draws one bar per epoch ("Epoch 7: 100%| 469/469 [..., 31.2it/s, ...]"): every epoch ends at
    the same count, and each is a new bar (its label differs), so a rate that falls epoch after epoch is seen."""
    rates = [48.7 - 1.5 * e for e in range(26)]           # 48.7 -> 11.2 it/s
    text = "".join(f"Epoch {e}: 100%|##########| 469/469 [00:{9 + e:02d}<00:00, {r:.2f}it/s, v_num=7, train_loss_step=1.9]\n"
                   f"Epoch {e}, global step {469 * (e + 1)}: 'val_acc' reached 0.{10 + e} (best 0.{10 + e})\n"
                   for e, r in enumerate(rates))
    t, found = _run(text)
    assert t.steps["bar/469"].n >= 12      # (a block dense with bars is sampled evenly)
    assert [a.category for a in found] == ["throughput-low"]


def _dmon(sm_rows, gpus=1, header="# gpu    sm   mem   enc   dec    fb  bar1\n# Idx     %     %     %     %    MB    MB\n"):
    rows = "".join(f"{g:5d} {sm:4d}   40     0     0 41887     5\n" for sm in sm_rows for g in range(gpus))
    return header + rows


def test_nvidia_smi_dmon_rows_are_snapshots_grouped_by_interval():
    """`nvidia-smi dmon` prints a header naming its columns, then one row per GPU per interval: the `sm`
    column is read (any -s selection), a new snapshot starts when the GPU index does not increase, and
    the framebuffer column is memory used."""
    rec = "{'loss': 1.9, 'grad_norm': 0.7, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    # a busy burst then the GPU waiting several seconds, over and over: the input pipeline starves it
    t, [a] = _run(rec + _dmon([99, 100, 4, 0, 0, 1, 0, 97, 100, 3, 0, 0, 2, 0]) + rec, train_start=1)
    assert len(t.snaps) == 14 and t.snaps[0] == [(99, 41887, None, 4)]
    assert a.severity == "error" and a.numbers["idle"] == 10 and a.numbers.get("pipeline")
    # two GPUs: one snapshot per interval, two rows each
    t, _ = _run(rec + _dmon([95, 96, 97], gpus=2) + rec, train_start=1)
    assert [len(s) for s in t.snaps] == [2, 2, 2]
    assert _run(rec + _dmon([95, 96, 97, 99, 94], gpus=2) + rec, train_start=1)[1] == []   # busy: nothing
    # the -o DT layout (date and time columns first) and a selection without `fb`
    dt = "#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem\n#YYYYMMDD   HH:MM:SS    Idx      W      C      C      %      %\n"
    rows = "".join(f"20250301    10:00:{i:02d}      0     75     45      -      {sm}     40\n" for i, sm in enumerate([0, 0, 0, 98]))
    t, [a] = _run(rec + dt + rows + rec, train_start=1)
    assert [s[0][0] for s in t.snaps] == [0, 0, 0, 98] and t.snaps[0][0][1] is None and a.numbers["idle"] == 3
    # a header without an sm column, or a table before training started, reads as nothing
    assert _run(rec + "# gpu   pwr  gtemp\n# Idx     W      C\n    0    75     45\n" + rec, train_start=1)[0].snaps == []
    assert _run(_dmon([0, 0, 0, 0]) + rec, train_start=20)[1] == []


def test_a_dmon_table_behind_a_launcher_prefix_is_read():
    """srun/Ray/k8s put their prefix before each line of a dmon table, the header's `#` included: the rows are
    read without the header's prefix, or without a prefix of the same kind (a time stamp that changes)."""
    rec = "{'loss': 1.9, 'grad_norm': 0.7, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    table = _dmon([17, 15, 21, 20, 17, 21, 16, 13], gpus=2)
    for i, pfx in enumerate(("3: ", "(RayTrainWorker pid=4123) ", "[rank0]: ")):
        t, [a] = _run(rec + "".join(pfx + ln + "\n" for ln in table.splitlines()) + rec, train_start=1)
        assert a.numbers["low"] == 8 and len(t.snaps) == 8, pfx
    stamped = "".join(f"2025-11-18T09:02:{i:02d}.4028Z {ln}\n" for i, ln in enumerate(table.splitlines()))
    t, [a] = _run(rec + stamped + rec, train_start=1)
    assert [s[0][0] for s in t.snaps] == [17, 15, 21, 20, 17, 21, 16, 13]
    assert _run(rec + "3: # gpu memory is tight, see below\n3:     0    12\n" + rec, train_start=1)[0].snaps == []


def test_every_gpu_at_low_utilisation_for_most_snapshots_is_an_error():
    """Step after step every GPU at 12-21%: not idle, but starved (bandwidth-bound quantised kernels, a CPU-bound
    loader): most of at least four snapshots at or below low_util is an error; a minority is nothing."""
    rec = "{'loss': 1.9, 'grad_norm': 0.7, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    _, [a] = _run(rec + _dmon([17, 15, 21, 20, 17, 21, 16, 13], gpus=2) + rec, train_start=1)
    assert a.severity == "error" and a.numbers["low"] == 8 and a.numbers["low_util"] == "30" and "idle" not in a.numbers
    assert _run(rec + _dmon([17, 85, 90, 88, 21, 93], gpus=1) + rec, train_start=1)[1] == []
    assert _run(rec + _dmon([17, 18, 21], gpus=1) + rec, train_start=1)[1] == []          # too few to judge


def test_one_reading_for_all_gpus_from_a_training_callback_or_a_node_monitor():
    """`gpu_util=17%` (a Trainer callback) and `gpu_util_avg=9%` (a node monitor) carry no GPU index: each line is a
    reading of the job's GPUs. Three readings in a row at 14-19% after the first steps are a starved run (an error);
    the same readings at 85-95% are a busy one, and readings before any step are start-up."""
    def bar(i: int) -> str:
        return f"  0%|          | {i}/3250 [{4 * i:02d}:00<200:00:00, 240.00s/it]\n{{'loss': 1.5, 'grad_norm': 0.5, 'epoch': 0.001}}\n"
    def run(utils: list[int]) -> str:
        out = bar(2) + bar(3)
        for k, u in enumerate(utils):
            out += f"[GPUMonitorCallback] step {6 + 9 * k}: gpu_util={u}% mem_used=61.5GiB power=107.11 W\n" + bar(4 + 3 * k) + bar(5 + 3 * k) + bar(6 + 3 * k)
        return out
    t, [a] = _run(run([17, 19, 14]), train_start=2)
    assert [s[0][0] for s in t.snaps] == [17, 19, 14]
    assert a.severity == "error" and a.numbers["low"] == 3
    assert _run(run([85, 95, 90]), train_start=2)[1] == []
    node = "[monitor] node nid005312 gpu_util_avg=9% sm_active=0.09 host_cpu=98% dataloader_wait_frac=0.89\n"
    t, _ = _run(node)
    assert t.snaps == [[(9, None, None, 1)]]
    # a range a user read off a dashboard: its upper end is the reading
    gap = "{'loss': 1.5}\n" * 4
    t, _ = _run("### ray dashboard, node 10.2.1.122: GPU util 3-8% during train step, NIC eth0 rx 11.73 MB/s\n" + gap
                + "# nvidia-smi during rollout: GPU-Util 8-15%, NVLink busy\n" + gap + "# later: GPU util 85-100%\n")
    assert [s[0][0] for s in t.snaps] == [8, 15, 100]


def test_single_request_decode_rates_from_llama_cpp_ollama_fastchat_and_tgi():
    """One request's generation rate printed by llama.cpp, Ollama --verbose, FastChat's CLI and TGI's router;
    below 1 token/s more than once is an error (no GPU decodes an LLM that slowly), below 5 a warning, and
    prompt processing lines are not decoding."""
    llama = "".join(f"prompt eval time =     140.25 ms /    12 tokens (   11.69 ms per token,     0.10 tokens per second)\n"
                    f"       eval time =   {1000 / r * 64:.2f} ms /    64 tokens (  {1000 / r:.2f} ms per token,  {r:6.2f} tokens per second)\n"
                    for r in (0.6, 0.5, 0.7))
    t, [a] = _run(llama, train_start=None)
    assert a.severity == "error" and a.numbers["decode"] == "0.6" and [x for x, _ in t.decode] == [0.6, 0.5, 0.7]
    ollama = "prompt eval rate:     0.80 tokens/s\neval count:           212 token(s)\neval rate:            3.10 tokens/s\n" * 2
    _, [a] = _run(ollama, train_start=None)
    assert a.severity == "warning" and a.numbers["decode"] == "3.1"
    fastchat = "".join(f"{{'conv_template': 'vicuna_v1.1', 'outputs': '...', 'speed (token/s)': {r}}}\n" for r in (0.21, 0.34))
    assert _run(fastchat, train_start=None)[1][0].severity == "error"
    tgi = 'INFO generate{parameters=..} text_generation_router::server: Success total_time="9.1s" time_per_token="1.5s"\n' * 2
    assert _run(tgi, train_start=None)[1][0].numbers["decode"] == "0.6667"
    assert _run(tgi.replace('"1.5s"', '"25.3ms"'), train_start=None)[1] == []     # ~40 tokens/s
    assert _run(llama.replace("  0.", " 40.").replace(" 0.", " 4"), train_start=None)[1] == []
    # llama.cpp's sampler timing is not decoding: a 0.6 tokens/s eval stays the reading beside a fast sampler
    sampler = "".join(f"llama_print_timings:      sample time =    58.92 ms /    76 runs   (    0.78 ms per token,  1289.87 tokens per second)\n"
                      f"llama_print_timings:        eval time = 126666.67 ms /    76 runs   ( 1666.67 ms per token,     {r} tokens per second)\n"
                      for r in (0.6, 0.5))
    t, [a] = _run(sampler, train_start=None)
    assert [x for x, _ in t.decode] == [0.6, 0.5] and a.severity == "error"
    # requests running and nothing decoded is a stalled engine (a collective hung): not called slowness
    stalled = "".join(f"INFO 11-04 14:43:{i:02d} [loggers.py:127] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 "
                      f"tokens/s, Running: 212 reqs, Waiting: 0 reqs\n" for i in range(4))
    assert _run(stalled, train_start=None)[1][0].severity == "warning"
def test_nvidia_smi_csv_rows_with_a_name_column_are_snapshots():
    """`--query-gpu=index,name,utilization.gpu,memory.used`: the GPU name stands between the index and the
    utilisation; the row is still a snapshot (a flat 5-minute LoRA step with the GPUs at 9-17% is idle)."""
    rec = "{'loss': 1.7431, 'grad_norm': 0.8127, 'learning_rate': 9.0e-05, 'epoch': 0.29}\n"
    head = "index, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n"
    rows = "".join(f"{g}, NVIDIA A800-SXM4-80GB, {u} %, 41233 MiB, 81920 MiB\n" for g, u in enumerate((14, 17, 9, 12)))
    t, [a] = _run(rec + head + rows + rec, train_start=1)
    assert [r[0] for r in t.snaps[0]] == [14, 17, 9, 12]
    assert a.severity == "error" and a.numbers["idle_gpus"] == "3/4"
    # the same table with busy GPUs says nothing
    busy = rows.replace(" 14 %", " 94 %").replace(" 17 %", " 97 %").replace(" 9 %", " 91 %").replace(" 12 %", " 92 %")
    assert _run(rec + head + busy + rec, train_start=1)[1] == []

    # `--query-gpu=timestamp,name,...` with `-l 2`: one GPU, one row per sample; each new time is a new snapshot,
    # rows of one sample (several GPUs) share their time
    head = "timestamp, name, utilization.gpu [%], memory.used [MiB], memory.total [MiB]\n"
    rows = "".join(f"2023/05/15 14:21:{2 * i:02d}.512, NVIDIA GeForce RTX 3090, {u} %, 23870 MiB, 24576 MiB\n"
                   for i, u in enumerate((24, 27, 19, 31, 22)))
    t, [a] = _run(rec + head + rows + rec, train_start=1)
    assert [[r[0] for r in s] for s in t.snaps] == [[24], [27], [19], [31], [22]] and a.severity == "error"
    two = "".join(f"2023/05/15 14:21:00.{g}12, NVIDIA A100, {u} %, 23870 MiB, 81920 MiB\n" for g, u in enumerate((24, 27)))
    t, _ = _run(rec + head + two + rec, train_start=1)
    assert [[r[0] for r in s] for s in t.snaps] == [[24, 27]]


def test_one_line_gpu_monitor_rows_are_snapshots():
    """A monitor line ("[gpu-monitor] GPU0 NVIDIA L4 util=0% mem=...", "GPU 1: utilization: 12 %") is a snapshot
    row too: GPUs idle in them while training runs is the finding; busy ones say nothing."""
    rec = "{'loss': 1.7431, 'grad_norm': 0.8127, 'learning_rate': 9.0e-05, 'epoch': 0.29}\n"
    rows = "[gpu-monitor] GPU0 NVIDIA L4 util=1% mem=9.8GiB/23.0GiB (no optimizer step for 95s)\n"
    t, [a] = _run(rec + rows + rec + rows + rec, train_start=1)
    assert [r[0] for s in t.snaps for r in s] == [1, 1] and a.severity == "error"
    two = "GPU 0: utilization: 12 %\nGPU 1: utilization: 9 %\n"
    t, _ = _run(rec + two + rec, train_start=1)
    assert [[r[0] for r in s] for s in t.snaps] == [[12, 9]]
    assert _run(rec + rows.replace("util=1%", "util=97%") + rec, train_start=1)[1] == []
    # a percentage that is not a GPU's utilisation is no row
    t, _ = _run(rec + "CPU util=3% | GPU0 temp 40C\n" + rec, train_start=1)
    assert t.snaps == []


def test_averagemeter_time_per_rank_counts_once_and_half_the_time_in_stalls_is_an_error():
    lines = []
    for it in range(100, 300):
        t = 22.0 if it % 10 == 0 else 0.7
        for rank in (1, 0):     # every rank prints the same iteration: one sample
            lines.append(f"[GPU rank {rank}] Epoch: [1][{it}/34406]\tTime {t:.3f} (2.771)\tData 0.004 (0.4)\tLoss 55.1 (55.3)")
    t, found = _run("\n".join(lines) + "\n")
    assert t.steps["loop"].n == 200
    assert found and found[0].severity == "error" and found[0].numbers["period"] == 10


def test_per_epoch_time_taken_rising_is_read_as_its_own_source():
    text = "".join(f"End of epoch {e} / 200 \t Time Taken: {390 if e < 12 else 390 + (e - 11) * 60} sec\n" for e in range(1, 25))
    t, found = _run(text)
    assert t.steps["epoch"].n == 24
    assert found and "rise" in found[0].numbers


def test_alternating_training_and_evaluation_bars_are_sampled_alike():
    # a training bar then a validation bar per epoch (YOLO): a stride over all bars must not keep only one kind
    rows = []
    for ep in range(1, 41):
        r = 3.3 if ep < 20 else 0.8
        rows.append(f"      {ep}/60      6.21G      1.4283     1.7460      1.3365         45        640: 100%|##########| 500/500 [02:31<00:00,  {r:.2f}it/s]")
        rows.append(f"                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100%|##########| 63/63 [00:11<00:00,  4.11it/s]")
    t, found = _run("\n".join(rows) + "\n")
    assert t.steps["bar/500"].n >= 16
    assert found and "rise" in found[0].numbers


def test_time_per_interval_is_a_mean_step_and_a_rise_at_every_sample_to_the_end_is_an_error():
    text = "".join(f"[{k}K/600K] 30.49 30.80 31.11  loss: 0.06  time/1000 steps: {104.1 + 7 * k:.1f}s  (10:03:55)\n"
                   for k in range(1, 31))
    t, found = _run(text)
    assert t.steps["loop"].n == 30 and abs(t.steps["loop"].values()[0][1] - 0.1111) < 1e-3
    assert found and "rise" in found[0].numbers and found[0].severity == "error"


def _gen_bar(rates, total=3273, start=2):
    out, n = [], start
    for r in rates:
        n += max(2, int(r))
        out.append(f"Processed prompts:  {100 * n // total}%|███       | {min(n, total)}/{total} [00:{len(out):02d}<00:59, {r:.2f}it/s, "
                   f"est. speed input: 900.00 toks/s, output: 100.00 toks/s]\n")
    return "".join(out), n


def test_a_generation_bar_stopped_while_collapsing_is_an_error_and_a_finished_one_is_not():
    """vLLM's offline `Processed prompts` bar: with no training steps, an unfinished generation stopped from
    outside after its rate collapsed is the slowdown that made the user stop it; a bar that slows at its long
    tail and reaches its total, or one still running as the log ends, is no finding."""
    slow = [40.0] * 6 + [30.0, 12.0, 6.0, 3.0, 1.5, 0.9, 0.7, 0.6]
    bars, _ = _gen_bar(slow)
    _, [a] = _run(bars + "^CTraceback (most recent call last):\nKeyboardInterrupt\n")
    assert (a.category, a.severity, a.numbers["stop"]) == ("throughput-low", "error", "^C")
    assert a.numbers["gen_early"] == "0.025" and float(a.numbers["rise"]) > 30 and "early" not in a.numbers
    _, found = _run(bars)                                   # no stop: still running as the log ends
    assert found == []
    done, n = _gen_bar(slow, total=60)
    done += "Processed prompts: 100%|██████████| 60/60 [00:20<00:00, 0.50it/s, est. speed input: 9.00 toks/s, output: 1.00 toks/s]\n"
    _, found = _run(done + "^C\nKeyboardInterrupt\n")      # finished before the stop: generation was not the slow part
    assert found == []


def _rollout_bar(rate):
    return "".join(f"[rollout {n} / 128]:  {100 * n // 128}%|#| {n}/128 [{n // 2:02d}:00<10:00, {rate + i / 100:.2f}s/it]\n"
                   for i, n in enumerate(range(8, 72, 8)))


def test_a_generation_phase_longer_than_a_step_is_no_generation_share():
    """A finished generation bar's elapsed time (an eval sweep: 412 s) is a whole phase; compared with a bar's
    per-iteration time (27.8 s/it) it would read as 'generation takes 100% of each step (412s of 27.8s)'. Generation
    is part of a step, so a phase far longer than the step is not a share of it: no finding from it."""
    sweep = "[generation sweep 1/1 | eval batch 4/4]: 100%|##########| 4/4 [06:52<00:00, 103.0s/it]\n"
    assert _run(_rollout_bar(27.8) + sweep)[1] == []
    # the same generation inside a step of 480 s/it is still the share it is
    _, [a] = _run(_rollout_bar(480.0) + sweep)
    assert a.numbers["gen_pct"] == "86"


FULL_SMI_ROW = """|   {i}  NVIDIA A800-SXM4-80GB          On  |   00000000:{i}0:00.0 Off |                    0 |
| N/A   35C    P0             92W /  400W |   {m}MiB /  81920MiB |    {u:>3}%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
"""


def test_a_full_nvidia_smi_table_with_mig_lines_is_one_snapshot():
    # each GPU takes 4 lines in the table (name, utilisation, MIG mode, separator): its rows belong to one snapshot
    head = "|=========================================+========================+======================|\n"
    table = head + "".join(FULL_SMI_ROW.format(i=i, m=61233, u=100 if i else 0) for i in range(8))
    t, _ = _run("{'loss': 1.9, 'epoch': 0.1}\n" + table)
    assert len(t.snaps) == 1 and [r[0] for r in t.snaps[0]] == [0] + [100] * 7
    # two tables printed one after the other are two snapshots
    t, _ = _run(table + "$ nvidia-smi\nThu Mar 20 16:12:07 2025\n" + head + table)
    assert len(t.snaps) == 2


def test_without_loss_records_training_starts_at_the_first_step_sample():
    # a trainer that prints only its progress bar (YOLO, a custom loop): snapshots after the bar's first reading are
    # taken during training; the same snapshots printed before any step are start-up
    bar = "".join(f"      0/99     14.1G   0.05612   0.02873        91       640:  {p}%|#  | {n}/3750 [{n // 60:02d}:{n % 60:02d}<40:11,  1.{60 + p}s/it]\n"
                  for p, n in ((2, 88), (11, 412), (23, 870)))
    csv = "timestamp, utilization.gpu [%], memory.used [MiB]\n" + "".join(
        f"2024/07/31 10:22:{s:02d}.101, {u} %, 15102 MiB\n" for s, u in ((14, 0), (16, 0), (18, 64), (20, 0), (22, 0), (24, 51)))
    _, [a] = _run(bar + csv, train_start=None)
    assert a.severity == "error" and a.numbers["idle"] == 4 and a.numbers["snaps"] == 6
    assert _run(csv + bar, train_start=None)[1] == []
