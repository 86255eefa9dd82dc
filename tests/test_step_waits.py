"""metric-step-wait-dominates (detect/step_waits.py): a run slow from its first step, read from where its steps wait."""
from __future__ import annotations

from llmtriage.detect.step_waits import StepWaitTracker


def _feed(text: str) -> StepWaitTracker:
    t = StepWaitTracker()
    t.feed(text.encode(), 1)
    return t


def _lerobot(data: float, n: int = 12, first: float = 30.0) -> str:
    rows = [f"INFO ts/train.py:232 step:{i} smpl:{64 * i} loss:1.0 updt_s:0.300 data_s:{first if i == 1 else data:.3f}"
            for i in range(1, n + 1)]
    return "\n".join(rows) + "\n"


def test_data_wait_dominating_is_an_error():
    [a] = _feed(_lerobot(1.2)).detect(1)
    assert a.kind == "step_wait"
    assert a.severity == "error" and a.category == "throughput-low"
    assert a.numbers["data_pct"] == "80" and a.numbers["records"] == 11


def test_first_record_and_small_waits_do_not_count():
    # the first step waits 30 s for the workers to start; afterwards data is ready: healthy
    assert _feed(_lerobot(0.001)).detect(1) == []
    # too few records to judge
    assert _feed(_lerobot(1.2, n=5)).detect(1) == []


def test_mmcv_data_time_is_part_of_the_step():
    rows = "".join(f"mmdet - INFO - Epoch [1][{50 * i}/1000]\tlr: 2.0e-02, time: 0.500, data_time: 0.200, memory: 3874, loss: 1.0\n"
                   for i in range(1, 12))
    assert _feed(rows).detect(1) == []      # 40%: below the share
    rows = rows.replace("data_time: 0.200", "data_time: 0.400")
    [a] = _feed(rows).detect(1)
    assert a.numbers["data_pct"] == "80"


def test_mmengine_data_time_without_commas():
    # mmengine (mmdet 3.x, mmyolo) separates fields with two spaces, not ", "
    rows = "".join(f"05/25 11:{i:02d}:00 - mmengine - INFO - Epoch(train)  [1][{10 * i:4d}/1051]  base_lr: 1.0000e-03 "
                   "lr: 2.2634e-06  eta: 2 days, 1:32:11  time: 8.4471  data_time: 7.0512  memory: 20839  loss: 13.2021\n"
                   for i in range(1, 12))
    [a] = _feed(rows).detect(1)
    assert a.numbers["data_pct"] == "83" and a.numbers["records"] == 10
    # an iteration time of another field (YOLOX's "iter_time: 1.4s, data_time: 0.003s") is not mmengine's "time"
    assert _feed(rows.replace("  time: ", "  iter_time: ")).detect(1) == []


def test_metric_logger_time_and_data():
    # the torchvision references' MetricLogger (DeiT, DETR, D-FINE): "time: 1.0500  data: 0.9100  max mem: 2410"
    rows = "".join(f"Epoch: [36]  [{10 * i:4d}/1251]  eta: 0:21:12  lr: 0.000494  loss: 4.9 (4.9)  time: 1.0500  "
                   f"data: 0.9100  max mem: 2410\n" for i in range(12))
    [a] = _feed(rows).detect(1)
    assert a.numbers["data_pct"] == "87"
    assert _feed(rows.replace("data: 0.9100", "data: 0.0100")).detect(1) == []


def test_lightning_profiler_fetch_share():
    row = "|  [_TrainingEpochLoop].train_dataloader_next  |  {mean}  |  16  |  {tot}  |  {pct}  |\n"
    [a] = _feed(row.format(mean=5.29, tot=84.7, pct=84.9)).detect(None)
    assert a.numbers["fetch_pct"] == "85"
    assert _feed(row.format(mean=0.01, tot=0.2, pct=2.1)).detect(None) == []


def test_deepspeed_optimizer_step_many_times_forward_backward():
    row = "[Rank 0] rank=0 time (ms) | forward: 376.60 | backward: 864.56 | backward_inner: 806.87 | backward_allreduce: 57.62 | step: {step}\n"
    [a] = _feed(row.format(step=22880.87) * 3).detect(None)
    assert a.numbers["opt_ratio"] == "18.4" and a.numbers["offload"]
    # a step a few times forward + backward, with nothing in the log saying where the optimizer runs: not judged
    assert _feed(row.format(step=3000.0) * 3).detect(None) == []


def test_offloaded_optimizer_step_two_thirds_of_every_iteration():
    # ZeRO-2 with the optimizer offloaded to the CPU; only the per-micro-step rows (gradient accumulation 1)
    config = 'json = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}\n'
    micro = "[Rank 0] time (ms) | fwd_microstep: 22.63 | bwd_microstep: 38.35 | bwd_inner_microstep: 36.35 | step_microstep: {step}\n"
    [a] = _feed(config + micro.format(step=223.27) * 5).detect(None)
    assert a.numbers["opt_ratio"] == "3.7" and a.numbers["opt_ms"] == "223"
    # the config dump of newer releases names the device through an enum
    dump = "zero_config .... offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device=<OffloadDeviceEnum.cpu: 'cpu'>, pin_memory=True)\n"
    assert len(_feed(dump + micro.format(step=223.27) * 5).detect(None)) == 1
    # near misses: the same step without any sign of offloading, an offloaded step under twice forward + backward,
    # the offload switched off, and a step too short to matter
    assert _feed(micro.format(step=223.27) * 5).detect(None) == []
    assert _feed(config + micro.format(step=90.0) * 5).detect(None) == []
    off = 'json = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}}\n'
    assert _feed(off + micro.format(step=223.27) * 5).detect(None) == []
    tiny = "[Rank 0] time (ms) | fwd_microstep: 2.1 | bwd_microstep: 3.4 | step_microstep: 60.0\n"
    assert _feed(config + tiny * 5).detect(None) == []


def test_deepspeed_breakdown_with_the_short_timer_names_of_newer_releases():
    # newer DeepSpeed names its global timers fwd / bwd / step (and prints a *_microstep row beside them)
    micro = "[Rank 0] time (ms) | fwd_microstep: 371.20 | bwd_microstep: 850.02 | step_microstep: {step}\n"
    row = "[Rank 0] time (ms) | fwd: 371.20 | bwd: 850.02 | bwd_inner: 801.40 | bwd_allreduce: 48.61 | step: {step}\n"
    [a] = _feed((micro + row).format(step=22880.87) * 3).detect(None)
    assert a.numbers["opt_ratio"] == "18.7"
    assert _feed((micro + row).format(step=3000.0) * 3).detect(None) == []


def _smi(watts: int, util: int, gpus: int = 4) -> str:
    return "".join(f"|   {g}  NVIDIA A100-SXM4-80GB  On  | 00000000:0{g}:00.0 Off |  0 |\n"
                   f"| N/A   40C    P0   {watts}W / 400W |  41237MiB / 81920MiB |    {util}%      Default |\n" for g in range(gpus))


def test_full_utilisation_at_low_power_during_training():
    text = "{'loss': 1.8}\n" + _smi(88, 100)
    [a] = _feed(text).detect(1)
    assert a.numbers["spin_gpus"] == 4 and a.numbers["comm"]


def test_power_readings_that_do_not_mean_a_spinning_collective():
    assert _feed("{'loss': 1.8}\n" + _smi(320, 100)).detect(1) == []      # busy and drawing power: computing
    assert _feed("{'loss': 1.8}\n" + _smi(60, 0)).detect(1) == []         # idle: the idle-GPU detector's business
    assert _feed("{'loss': 1.8}\n" + _smi(88, 100, gpus=1)).detect(1) == []   # one GPU: no collective to wait on
    assert _feed(_smi(88, 100) + "{'loss': 1.8}\n").detect(20) == []      # before training started (loading)
    assert _feed(_smi(88, 100)).detect(None) == []                        # no training records at all


def test_open_clip_data_time_is_part_of_the_batch_time():
    row = ("2023-10-22,19:{m:02d}:10 | INFO | Train Epoch: 0 [{n:>9d}/2912768 (1%)] Data (t): {d:.3f} Batch (t): {b:.3f}, "
           "1970.815/s, 123.176/s/gpu LR: 0.000278 Logit Scale: 14.566 Contrastive_loss: 6.7200 (6.9000) Loss: 6.7200 (6.9000)\n")
    slow = "".join(row.format(m=i, n=i * 409600, d=1.55, b=2.08) for i in range(12))
    [a] = _feed(slow).detect(1)
    assert a.numbers["data_pct"] == "75" and a.numbers["records"] == 11
    # the loader keeps up: a small data time inside the batch time
    assert _feed(slow.replace("Data (t): 1.550", "Data (t): 0.110")).detect(1) == []
    # the 2021 releases print the same fields without colons, tab-separated
    old = "".join(f"2021-09-06,10:{i:02d}:09 | INFO | Train Epoch: 0 [{i * 12800:>7d}/3318333 (0%)]\tLoss: 7.1\t"
                  f"Data (t) 0.480\tBatch (t) 0.720\tLR: 0.000100\tlogit_scale 4.605\n" for i in range(12))
    [b] = _feed(old).detect(1)
    assert b.numbers["data_pct"] == "67"


def test_busy_gpu_whose_pcie_link_trained_down():
    query = "$ nvidia-smi --query-gpu=index,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,utilization.gpu --format=csv,noheader\n"
    rows = "".join(f"{g}, {2 if g == 5 else 5}, 5, 16, 100 %\n" for g in range(8))
    [a] = _feed(query + rows).detect(None)
    assert (a.numbers["pcie_gpu"], a.numbers["pcie_gen"], a.numbers["pcie_gmax"], a.numbers["pcie_util"]) == (5, 2, 5, 100)
    # the CSV header nvidia-smi prints (units in brackets), a prefix before every row
    head = "[mon] index, name, pcie.link.gen.current, pcie.link.gen.max, utilization.gpu [%]\n"
    table = "".join(f"[mon] {g}, NVIDIA A100-SXM4-80GB, {3 if g == 1 else 4}, 4, 97 %\n" for g in range(4))
    assert _feed(head + table).detect(None)[0].numbers["pcie_gpu"] == 1
    # near misses: an idle GPU lowers its link generation to save power; busy GPUs at their maximum
    idle = "".join(f"{g}, GeForce GTX 1080 Ti, {1 if g else 3}, 3, 0 %\n" for g in range(2))
    busy = "".join(f"{g}, GeForce GTX 1080 Ti, 3, 3, 96 %\n" for g in range(2))
    hdr = "index, name, pcie.link.gen.current, pcie.link.gen.max, utilization.gpu [%]\n"
    assert _feed(hdr + idle + "Epoch: [0][   0/5005]\tTime 3.100\n" + hdr + busy).detect(None) == []


def test_a_monitor_line_of_busy_gpus_at_low_power_is_read_like_the_table():
    """A training script's own monitor prints utilisation and power per GPU on one line: four GPUs at 100% drawing
    80 W of 300 W, snapshot after snapshot, wait in their collectives; the same GPUs at 280 W are computing."""
    def mon(w: float) -> str:
        return "[gpu-mon] 2023-03-15 21:04:10 " + " | ".join(f"gpu={g} util=100% mem=61234MiB power={w}W/300W" for g in range(4)) + "\n"
    rec = "{'loss': 1.8, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    [a] = _feed(rec + mon(81.2) + rec * 6 + mon(79.8)).detect(1)
    assert a.numbers["spin_gpus"] == 4 and a.numbers["spin_w"] == 81 and a.numbers["spin_cap"] == 300 and a.numbers["spin_snaps"] == 2
    assert _feed(rec + mon(281.2) + rec * 6 + mon(279.8)).detect(1) == []
    assert _feed(rec + mon(81.2).replace(" | gpu=1", " ; gpu=1").split(" ; ")[0] + "\n").detect(1) == []   # one GPU
