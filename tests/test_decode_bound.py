"""decode_bound: one request decoding far below what the named GPU's memory bandwidth allows for the model's weights."""
from __future__ import annotations

from llmtriage.detect.decode_bound import DecodeBound, decode_bound
from llmtriage.detect.metric_anomaly import Anomaly

_LLAMA = (b"ggml_cuda_init: found 1 CUDA devices:\n"
          b"  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes\n"
          b"print_info: file size   = 4.68 GiB (4.91 BPW) \n"
          b"load_tensors: offloaded {on}/37 layers to GPU\n")
_VLLM = (b"INFO 09-26 11:31:09 llm_engine.py:223] Initializing an LLM engine (v0.6.1) with config: model='m', "
         b"tensor_parallel_size=1, pipeline_parallel_size=1, device_config=cuda, seed=0\n"
         b"INFO 09-26 11:31:17 model_runner.py:1008] Loading model weights took 14.9595 GB\n")


def _judge(text: bytes, rates: list[tuple[float, int]], existing: list[Anomaly] | None = None) -> list[Anomaly]:
    b = DecodeBound()
    b.feed(text, 1)
    out = list(existing or [])
    decode_bound(b, rates, (10, 20), out)
    return out


def test_all_layers_on_cpu_with_a_4090_is_an_error() -> None:
    [a] = _judge(_LLAMA.replace(b"{on}", b"0"), [(5.4, 1), (5.3, 1), (5.4, 1)])
    assert a.kind == "throughput" and a.severity == "error"
    n = a.numbers
    assert n["bound_gpu"] == "RTX 4090" and n["cpu_layers"] == 37 and n["all_layers"] == 37
    assert float(n["bound_max"]) > 4 * 5.4      # 5.0 GB through 1008 GB/s plus the fixed cost: ~77 tokens/s


def test_a_few_layers_pushed_out_is_an_error_a_deliberate_split_a_warning() -> None:
    [few] = _judge(_LLAMA.replace(b"{on}", b"34"), [(7.0, 1)])
    assert few.severity == "error" and few.numbers["cpu_layers"] == 3
    [split] = _judge(_LLAMA.replace(b"{on}", b"12"), [(7.0, 1)])
    assert split.severity == "warning"


def test_healthy_decode_on_the_gpu_raises_nothing() -> None:
    assert _judge(_LLAMA.replace(b"{on}", b"37"), [(128.0, 1), (131.0, 1)]) == []


def test_vllm_without_a_named_gpu_uses_the_floor_and_large_batches_do_not_count() -> None:
    # 15 GB per token at 300 GB/s: ~17 tokens/s at the least; 0.8 tokens/s for one request is a GPU not working
    [a] = _judge(_VLLM, [(0.8, 1), (0.9, 1), (0.8, 1)])
    assert a.severity == "error" and "L4" in a.numbers["bound_gpu"]
    # 300 requests sharing each weight read: 1.5 tokens/s each is a busy server, not a slow one
    assert _judge(_VLLM, [(1.5, 300), (1.4, 310)]) == []
    # a CPU build of vLLM says nothing about a GPU: no reference
    assert _judge(_VLLM.replace(b"device_config=cuda", b"device_config=cpu"), [(0.8, 1), (0.9, 1)]) == []


def test_an_existing_decode_warning_is_raised_and_reworded() -> None:
    warn = Anomaly("throughput", "throughput-low", "warning", 30, 40, None, 1, {"decode": "3.7", "reqs": 1})
    [a] = _judge(_LLAMA.replace(b"{on}", b"0"), [(3.7, 1)], [warn])
    assert a is warn and a.severity == "error" and "decode" not in a.numbers and a.line == 10


def test_toy_model_is_not_judged() -> None:
    tiny = _LLAMA.replace(b"4.68 GiB", b"0.35 GiB").replace(b"{on}", b"0")
    assert _judge(tiny, [(20.0, 1)]) == []


def test_llama_bench_token_generation_rows_are_read() -> None:
    bench = ("ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) (radv) | uma: 0 | fp16: dot2\n"
             "| qwen38 27B Q4_K - Medium       |  16.41 GiB |    27.14 B | Vulkan     |  99 | Vulkan0      |           pp512 |        842.17 ± 3.12 |\n"
             "| qwen38 27B Q4_K - Medium       |  16.41 GiB |    27.14 B | Vulkan     |  99 | Vulkan0      |           tg128 |          {tg} ± 0.02 |\n")
    [slow] = _judge(bench.format(tg="6.84").encode(), [])
    assert slow.severity == "error" and slow.numbers["bound_gpu"] == "RX 7900 XTX" and slow.numbers["bound_rate"] == "6.84"
    assert _judge(bench.format(tg="31.20").encode(), []) == []


def test_a_split_is_an_error_when_the_weights_would_fit_the_gpu() -> None:
    ollama = (b'time=2024-11-16T21:03:00.733+08:00 level=INFO source=types.go:123 msg="inference compute" id=GPU-1a2b '
              b'library=cuda variant=v12 compute=8.6 driver=12.6 name="NVIDIA GeForce RTX 3060" total="{total} GiB" available="11.0 GiB"\n'
              b"llm_load_print_meta: model size       = 8.37 GiB (4.87 BPW)\n"
              b"llm_load_tensors: offloaded 36/49 layers to GPU\n")
    [fits] = _judge(ollama.replace(b"{total}", b"12.0"), [(4.5, 1)])
    assert fits.severity == "error" and fits.numbers["vram_gb"] == "12.9"
    # 8.4 GiB of weights on a 6 GiB card: the split is forced, the CPU's speed is expected
    [forced] = _judge(ollama.replace(b"{total}", b"6.0"), [(4.5, 1)])
    assert forced.severity == "warning" and "vram_gb" not in forced.numbers
