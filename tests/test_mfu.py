"""metric-mfu-far-below-peak (detect/mfu.py): a large model far below its GPUs' peak, judged against the hardware."""
from __future__ import annotations

from llmtriage.detect.mfu import MfuTracker


def _meg(tflops: float, gpu: str = "GPU 0-7: NVIDIA A100-SXM4-80GB", params: int = 8_819_834_880, n: int = 8) -> MfuTracker:
    rows = [gpu, f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): {params}"]
    rows += [f" iteration {i:8d}/  500 | elapsed time per iteration (ms): 71940.2 | throughput per GPU (TFLOP/s/GPU): "
             f"{9.0 if i == 1 else tflops:.1f} | lm loss: 1.0E+01 |" for i in range(1, n + 1)]
    t = MfuTracker()
    t.feed(("\n".join(rows) + "\n").encode(), 1)
    return t


def test_megatron_tflops_far_below_the_named_gpus_peak():
    [a] = _meg(20.1).detect()
    assert a.severity == "error" and a.category == "throughput-low"
    assert a.numbers["gpu"] == "A100" and a.numbers["mfu"] == "6.4" and a.numbers["shard_params"] == "8.8"


def test_megatron_healthy_or_unjudgeable():
    assert _meg(140.0).detect() == []                                    # 45% of an A100
    assert _meg(20.1, params=125_000_000).detect() == []                 # a small model cannot fill the GPU
    assert _meg(20.1, gpu="training on the cluster").detect() == []     # no GPU named: no peak to compare with
    assert _meg(20.1, gpu="GPU 0: NVIDIA A100-SXM4-80GB\nGPU 1: NVIDIA H100 80GB HBM3").detect() == []   # two peaks
    assert _meg(20.1, n=4).detect() == []                                # too few records after warm-up


def test_torchtitan_own_mfu_needs_a_large_model():
    rows = ["Model llama3 {size} size: {params} total parameters"]
    rows += [f"step: {s:2d}  loss: 9.0  memory: 71.42GiB(51.08%)  wps: 196  mfu: {1.9 if s == 1 else 8.4:.2f}%" for s in range(1, 9)]
    big = MfuTracker()
    big.feed("\n".join(rows).format(size="70B", params="70,553,706,496").encode(), 1)
    [a] = big.detect()
    assert a.numbers["titan_mfu"] == "8.4" and a.numbers["params"] == "70.6"
    tiny = MfuTracker()
    tiny.feed("\n".join(rows).format(size="debugmodel", params="6,139,136").encode(), 1)
    assert tiny.detect() == []


def test_hard_coded_peaks_are_not_read():
    # nanoGPT's "mfu 104.20%" and nanochat's "mfu: 24.97" use one GPU's peak whatever the GPU: not read
    t = MfuTracker()
    t.feed(b"Model gpt2 xl size: 1,557,611,200 total parameters\n" + b"".join(
        b"iter %d: loss 3.1, time 128.40ms, mfu 4.20%%\nstep %05d | dt: 990ms | tok/sec: 529,520 | mfu: 4.97 |\n" % (i, i)
        for i in range(10)), 1)
    assert t.detect() == []


def _litgpt(speed: int, gpu: str = "You are using a CUDA device ('NVIDIA A100-SXM4-80GB') that has Tensor Cores.",
            params: str = "Total parameters 7,217,189,760", n: int = 8) -> MfuTracker:
    rows = [gpu, params] + [f"iter {i}: loss 11.0{i}, time: 26360.27ms, speed: {176 if i == 0 else speed} toks/s/device"
                            for i in range(n)]
    t = MfuTracker()
    t.feed(("\n".join(rows) + "\n").encode(), 1)
    return t


def test_per_device_token_rate_estimates_the_mfu():
    # 6 x 7.2B params x 388 tokens/s = 16.8 TFLOP/s: 5.4% of an A100
    [a] = _litgpt(388).detect()
    assert a.severity == "error" and a.numbers["mfu"] == "5.4" and a.numbers["tok_dev"] == "388"
    assert a.numbers["gpu"] == "A100" and a.numbers["params"] == "7.2"


def test_per_device_token_rate_healthy_or_unjudgeable():
    assert _litgpt(2700).detect() == []                                         # 37% of an A100
    assert _litgpt(388, params="Total parameters 124,439,808").detect() == []  # a small model
    assert _litgpt(388, gpu="training on the cluster").detect() == []          # no GPU named
    assert _litgpt(388, n=4).detect() == []                                     # too few records after warm-up
    # a model-parallel rank's shard count is not the model's size: no estimate from it
    shard = " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 1804468224"
    assert _litgpt(388, params=shard).detect() == []
    # PEFT's total is read as the model's size
    [a] = _litgpt(388, params="trainable params: 19,988,480 || all params: 6,758,404,096 || trainable%: 0.2958").detect()
    assert a.numbers["params"] == "6.8"


def _lit(ms: float, gpu: str = "", mb: int = 1, trainable: str = "3,506,176", frozen: str = "6,921,720,704") -> MfuTracker:
    rows = [gpu, f" 'train': TrainArgs(save_interval=1000, log_interval=1, global_batch_size=16, micro_batch_size={mb}, lr_warmup_steps=10)}}",
            f"Number of trainable parameters: {trainable}", f"Number of non-trainable parameters: {frozen}",
            "The longest sequence length in the train data is 1079, the model's maximum sequence length is 1079 and context length is 2048"]
    rows += [f"Epoch 1 | iter {i} step {i // 2} | loss train: 1.600, val: n/a | iter time: {ms:.2f} ms" for i in range(1, 12)]
    t = MfuTracker()
    t.feed(("\n".join(rows) + "\n").encode(), 1)
    return t


def test_lit_gpt_finetune_iterations_bound_the_token_rate():
    # 30 s per iteration of at most 1079 tokens: ~1.5 TFLOP/s for a 7B model, a few % of even a T4
    [a] = _lit(30011.0).detect()
    assert a.numbers["floor_gpu"] == "T4" and a.numbers["mfu"] == "2.3" and a.numbers["lit_tok"] == 1079
    [b] = _lit(30011.0, gpu="GPU 0: NVIDIA A100-SXM4-40GB").detect()
    assert b.numbers["gpu"] == "A100" and "floor_gpu" not in b.numbers
    # near misses: a healthy iteration time, a small model, a bigger micro-batch at the same time
    assert _lit(450.0).detect() == []
    assert _lit(30011.0, trainable="14,067,712", frozen="0").detect() == []
    assert _lit(30011.0, mb=16).detect() == []
