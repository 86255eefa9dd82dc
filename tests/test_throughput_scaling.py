"""metric-more-gpus-no-faster (detect/throughput_scaling.py) and lone underused snapshots (detect/throughput_util.py)."""
from __future__ import annotations

from llmtriage.detect.metrics import THRESHOLDS
from llmtriage.detect.throughput_scaling import ScalingTracker
from llmtriage.detect.throughput_util import underused, util_bound


def _feed(text: str) -> ScalingTracker:
    t = ScalingTracker()
    t.feed(text.encode(), 1)
    return t


def _hf(cmd: str, batch: int, secs: str, steps: int = 40) -> str:
    return (f"$ {cmd}\n"
            f"[INFO|trainer.py:2321] >>   Total train batch size (w. parallel, distributed & accumulation) = {batch}\n"
            f"  5%|▍         | {steps}/800 [{secs}<1:00:00,  9.99s/it]\n")


def test_more_gpus_no_more_samples_per_second_is_an_error():
    log = _hf("CUDA_VISIBLE_DEVICES=0 llamafactory-cli train sft.yaml", 16, "01:00") + \
        _hf("torchrun --nproc_per_node 4 --nnodes 1 src/train.py", 64, "04:10")
    [a] = _feed(log).detect()
    assert a.kind == "scaling" and a.severity == "error" and a.category == "throughput-low"
    assert a.numbers["gpus_few"] == 1 and a.numbers["gpus_many"] == 4 and a.numbers["unit"] == "samples"
    assert float(a.numbers["speedup"]) < 1


def test_larger_launch_that_scales_raises_nothing():
    # 4x the GPUs, 4x the batch, each step only a little slower: 3.6x the samples per second
    log = _hf("CUDA_VISIBLE_DEVICES=0 llamafactory-cli train sft.yaml", 16, "01:00") + \
        _hf("torchrun --nproc_per_node=4 src/train.py", 64, "01:07")
    assert _feed(log).detect() == []


def test_unknown_gpu_count_or_batch_takes_no_part():
    # a plain `python train.py` names no GPU count; a launch with no global batch cannot be compared
    log = _hf("python train.py", 16, "01:00") + _hf("torchrun --nproc_per_node 4 train.py", 64, "09:00")
    assert _feed(log).detect() == []
    log = "$ CUDA_VISIBLE_DEVICES=0 python train.py\n  5%| | 40/800 [01:00<1:00:00, 1.5s/it]\n" + \
        "$ torchrun --nproc_per_node 4 train.py\n  5%| | 40/800 [09:00<1:00:00, 13.5s/it]\n"
    assert _feed(log).detect() == []


def test_steps_per_sec_at_the_same_global_batch():
    one = "".join(f"(step={i:07d}) Train Loss: 8.0, Train Steps/Sec: 2.9{i % 3}\n" for i in range(1, 6))
    two = "".join(f"(step={i:07d}) Train Loss: 8.0, Train Steps/Sec: 2.3{i % 3}\n" for i in range(1, 6))
    log = ("$ torchrun --nnodes=1 --nproc_per_node=8 train.py --global-batch-size 256\n" + one +
           "$ torchrun --nnodes=2 --nproc_per_node=8 train.py --global-batch-size 256\n" + two)
    [a] = _feed(log).detect()
    assert a.numbers["gpus_few"] == 8 and a.numbers["gpus_many"] == 16


def test_tokens_per_second_per_gpu_against_a_single_device_run():
    dist = "".join(f"Step {i} | loss:2.4 tokens_per_second_per_gpu:{590 + i}.5\n" for i in range(1, 8))
    single = "".join(f"Step {i} | loss:2.4 tokens_per_second_per_gpu:{2500 + i}.5\n" for i in range(1, 8))
    log = ("$ tune run --nproc_per_node 4 lora_finetune_distributed --config x\n" + dist +
           "$ tune run lora_finetune_single_device --config y\n" + single)
    [a] = _feed(log).detect()
    assert a.numbers["unit"] == "tokens" and a.numbers["gpus_many"] == 4
    # per GPU a little lower, in total far more: healthy scaling
    dist = "".join(f"Step {i} | loss:2.4 tokens_per_second_per_gpu:{2300 + i}.5\n" for i in range(1, 8))
    log = ("$ tune run --nproc_per_node 4 lora_finetune_distributed --config x\n" + dist +
           "$ tune run lora_finetune_single_device --config y\n" + single)
    assert _feed(log).detect() == []


def _snap(*utils: int, line: int = 50) -> list[tuple[int, int, int, int]]:
    return [(u, 9000, 24000, line + i) for i, u in enumerate(utils)]


def test_lone_snapshot_with_every_gpu_underused_counts_after_steady_training():
    assert underused([_snap(24, 19, 27, 22)], THRESHOLDS, steps_before=3)
    # too early (fewer training records before it), or one GPU busy: no evidence
    assert underused([_snap(24, 19, 27, 22)], THRESHOLDS, steps_before=1) == []
    assert underused([_snap(24, 97, 27, 22)], THRESHOLDS, steps_before=10) == []
    # four or more snapshots: the share rule as before
    assert underused([_snap(20)] * 3 + [_snap(95)], THRESHOLDS) == [_snap(20)] * 3
    assert underused([_snap(20)] * 2 + [_snap(95)] * 2, THRESHOLDS) == []


def test_readings_hovering_around_the_bound_with_none_busy_count_by_their_median():
    # a run slow from its first step (bnb int8 LoRA): 24%, 31%, 24%, 31% - half just above 30%, none busy
    snaps = [_snap(24), _snap(31), _snap(24), _snap(31)]
    assert underused(snaps, THRESHOLDS) == snaps
    assert util_bound(snaps, THRESHOLDS) == THRESHOLDS.low_ceiling
    assert util_bound([_snap(24)] * 4, THRESHOLDS) == THRESHOLDS.low_util
    # 4-bit QLoRA of a MoE on one GPU: 34%, 31%, 38%, 29%, 36% - most above 30%, none busy
    assert underused([_snap(u) for u in (34, 31, 38, 29, 36)], THRESHOLDS)
    # one busy reading (> low_ceiling), or too few readings above low_util: no evidence
    assert underused([_snap(24), _snap(31), _snap(24), _snap(45)], THRESHOLDS) == []
    # one to three readings of a steadily training job, none above low_ceiling: 38% or 31% is as starved as 30%
    assert underused([_snap(35), _snap(33), _snap(31)], THRESHOLDS, steps_before=10)
    assert underused([_snap(38)], THRESHOLDS, steps_before=10)
    assert underused([_snap(45), _snap(33), _snap(31)], THRESHOLDS, steps_before=10) == []
    assert underused([_snap(38, 92)], THRESHOLDS, steps_before=10) == []


def test_vllm_throughput_benchmark_with_more_tensor_parallel_gpus_no_faster():
    # two runs of vLLM's offline benchmark pasted in one log: the launch's GPU count from CUDA_VISIBLE_DEVICES or
    # --tensor-parallel-size, its speed from the benchmark's request rate
    def bench(prefix: str, tp: int, reqs: float) -> str:
        return (f"$ {prefix}python3 benchmarks/benchmark_throughput.py --backend vllm --model m --num-prompts 1000 "
                f"--tensor-parallel-size {tp}\nINFO llm_engine.py:72] Initializing an LLM engine\n"
                f"Throughput: {reqs} requests/s, 2207.85 tokens/s\n")
    [a] = _feed(bench("CUDA_VISIBLE_DEVICES=0 ", 1, 4.93) + bench("", 4, 4.61)).detect()
    assert a.numbers["gpus_few"] == 1 and a.numbers["gpus_many"] == 4 and a.numbers["unit"] == "requests"
    # tensor parallelism that pays off (1.9x the requests on 4 GPUs) raises nothing
    assert _feed(bench("", 1, 4.93) + bench("", 4, 9.40)).detect() == []


def test_vllm_generate_runs_timed_by_their_finished_prompt_bars():
    def run(tp: int, clock: str) -> str:
        return (f"$ python offline_infer.py --model m --tensor-parallel-size {tp} --num-prompts 200\n"
                f"Processed prompts:  50%|█████     | 100/200 [01:00<01:00,  1.65it/s]\n"
                f"Processed prompts: 100%|██████████| 200/200 [{clock}<00:00,  1.20s/it]\n")
    [a] = _feed(run(2, "06:52") + run(1, "03:58")).detect()
    assert a.numbers["gpus_many"] == 2 and a.numbers["unit"] == "requests" and a.numbers["speedup"] == "0.58"
    assert _feed(run(2, "02:10") + run(1, "03:58")).detect() == []     # twice the GPUs, faster: nothing
