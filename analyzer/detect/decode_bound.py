"""Decoding far below what the GPU's memory bandwidth allows for the model's weights (throughput-low).

Generating one token for one request reads every weight once, so on a GPU the time per token is at least the bytes
of weights each GPU holds divided by its memory bandwidth, plus a fixed cost per token (kernel launches, sampling,
the server loop: `OVERHEAD_S`, generous). With the GPU named in the log (an nvidia-smi row, llama.cpp's `Device 0:
NVIDIA GeForce RTX 3090`, Ollama's `name="..."` / `description="..."`) and the weights' size printed, that gives the
speed a healthy setup decodes one request at; a measured rate below `SHARE` of it is the evidence an engineer reads
from the log alone: the GPU is not doing the work (layers left on the CPU, a build without GPU support, a GPU in a
bad state, eager mode on a large model).

  GPU             `BANDWIDTH`: GB/s per model name; several different GPUs named: the slowest one's. A vLLM or
                  SGLang server runs on some GPU even when none is named: `FLOOR` (an L4 / T4-class card) then.
  weights         llama.cpp `model size = 4.58 GiB` / `file size = ...`, the sum of its `... model buffer size = N MiB`
                  lines, old llama.cpp `mem required = 4017.34 MB`, Ollama `msg="model weights" device=CUDA0
                  size="13.9 GiB"` (summed over devices) and `memory.weights.total="4.7 GiB"`, vLLM `Loading model
                  weights took 14.96 GB` / `Model loading took 7.06 GiB` (one worker's share: per GPU under tensor
                  parallelism; times `pipeline_parallel_size`, whose stages run one after the other for each token).
                  A mixture of experts reads only its active experts: taken as dense, the expected speed errs low,
                  so the check can only stay silent, never call a healthy MoE slow.
  rates           llama-bench's `tg128` rows (with its size column as the weights), and the per-request decode rates ThroughputTracker reads (llama.cpp / Ollama timings, vLLM and SGLang
                  metrics with prompt throughput 0), only those with at most `MAX_RUNNING` requests running: a large
                  batch shares each weight read among its requests and lowers each one's rate by design.
  CPU share       llama.cpp's `offloaded N/M layers to GPU` with N < M, Ollama's `ollama ps` `42%/58% CPU/GPU`: the
                  layers left on the CPU are what bounds the speed; said in the message.

The median rate below `SHARE` of the bound is an error when the GPU does, or should do, all the work: nothing says
layers sit on the CPU (vLLM, a full offload), at most `CPU_SHARE` of the model was pushed out to the CPU (a context
or parallel setting that leaves no room for the last layers), or all of it runs on the CPU while a GPU is there (no
`-ngl`, a build without GPU support), or the weights fit in `FIT` of the GPUs' memory (Ollama's `total="12.0 GiB"`,
llama.cpp's `- 23675 MiB free` at load) yet layers sit on the CPU (a context or parallel setting took the room). A model split between CPU and GPU on purpose (a larger share on the CPU) decodes
at the CPU's speed by design: a warning that says so. A model below `MIN_GB` (toy models: the fixed cost dominates)
is not judged.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median

SHARE = 0.25
OVERHEAD_S = 0.008       # per token, on top of the weight reads (launches, sampling, the server loop)
MAX_RUNNING = 4
MIN_GB = 1.0
CPU_SHARE = 0.15         # at most this share of the model on the CPU: a few layers pushed out, not a split on purpose
FIT = 0.9                # weights at most this share of the GPUs' memory: the model fits, with room for its KV cache
FLOOR = ("an L4 / T4-class GPU (the slowest that serves a model this size)", 300.0)
_GIB = 1.073741824

# memory bandwidth, GB/s; the literal each name's pattern needs comes first; the more specific names first
BANDWIDTH: list[tuple[str, bytes, re.Pattern[bytes], float]] = [(n, lit, re.compile(p), v) for n, lit, p, v in (
    ("H200", b"H200", rb"\bH200\b", 4800.0), ("H100 PCIe", b"H100", rb"\bH100[ -]PCIe", 2000.0),
    ("H100", b"H100", rb"\bH100\b", 3350.0), ("H800", b"H800", rb"\bH800\b", 3350.0), ("H20", b"H20", rb"\bH20\b", 4000.0),
    ("A100 80GB", b"A100", rb"\bA100[ -](?:SXM4?[ -])?80GB|\bA100 80GB PCIe", 1935.0), ("A100", b"A100", rb"\bA100\b", 1555.0),
    ("A800", b"A800", rb"\bA800\b", 1555.0), ("L40S", b"L40", rb"\bL40S?\b", 864.0), ("A10G", b"A10", rb"\bA10G?\b", 600.0),
    ("L4", b"L4", rb"\bNVIDIA L4\b|\bTesla L4\b", 300.0), ("T4", b"T4", rb"\bTesla T4\b|\bNVIDIA T4\b", 320.0),
    ("V100", b"V100", rb"\bV100", 900.0), ("RTX A6000", b"A6000", rb"\bRTX A6000\b", 768.0),
    ("RTX 6000 Ada", b"6000 Ada", rb"\bRTX 6000 Ada\b", 960.0),
    ("RTX 5090", b"RTX 5090", rb"RTX 5090\b(?! Laptop)", 1792.0), ("RTX 5080", b"RTX 5080", rb"RTX 5080\b(?! Laptop)", 960.0),
    ("RTX 5070 Ti", b"RTX 5070", rb"RTX 5070 Ti\b(?! Laptop)", 896.0), ("RTX 5070", b"RTX 5070", rb"RTX 5070\b(?! (?:Ti|Laptop))", 672.0),
    ("RTX 5060", b"RTX 5060", rb"RTX 5060(?: Ti)?\b(?! Laptop)", 448.0),
    ("RTX 4090 Laptop", b"RTX 4090", rb"RTX 4090 Laptop", 576.0), ("RTX 4090", b"RTX 4090", rb"RTX 4090\b(?! Laptop)", 1008.0),
    ("RTX 4080", b"RTX 4080", rb"RTX 4080(?: SUPER)?\b(?! Laptop)", 716.0), ("RTX 4070 Ti", b"RTX 4070", rb"RTX 4070 Ti\b", 504.0),
    ("RTX 4070", b"RTX 4070", rb"RTX 4070\b(?! (?:Ti|Laptop))", 504.0), ("RTX 4060 Laptop", b"RTX 4060", rb"RTX 4060 Laptop", 256.0),
    ("RTX 4060", b"RTX 4060", rb"RTX 4060(?: Ti)?\b(?! Laptop)", 272.0),
    ("RTX 3090", b"RTX 3090", rb"RTX 3090\b", 936.0), ("RTX 3080", b"RTX 3080", rb"RTX 3080\b(?! Laptop)", 760.0),
    ("RTX 3070", b"RTX 3070", rb"RTX 3070\b(?! Laptop)", 448.0), ("RTX 3060 Laptop", b"RTX 3060", rb"RTX 3060 Laptop", 336.0),
    ("RTX 3060", b"RTX 3060", rb"RTX 3060\b(?! (?:Laptop|Ti))", 360.0), ("RTX 2080 Ti", b"RTX 2080 Ti", rb"RTX 2080 Ti\b", 616.0),
    ("RX 7900 XTX", b"7900 XTX", rb"\bRX 7900 XTX\b", 960.0), ("RX 7900 XT", b"7900 XT", rb"\bRX 7900 XT\b(?!X)", 800.0),
    ("GTX 1660 SUPER", b"GTX 1660", rb"GTX 1660 SUPER\b", 336.0), ("GTX 1660", b"GTX 1660", rb"GTX 1660\b(?! (?:SUPER|Ti))", 192.0),
    ("MI300X", b"MI300X", rb"\bMI300X\b", 5300.0), ("MI250", b"MI250", rb"\bMI250X?\b", 1600.0))]
_NAME_TRIES = 8         # lines per vendor word checked per block
_ANCHORS = (b"NVIDIA", b"Tesla", b"GeForce", b"Radeon", b"Instinct")
# the literals one of which a block needs before its lines are read (`in` tests: a regex alternation over a block is slow)
_GATE_LITS = (b"model size", b"file size", b"buffer size", b"mem required", b"weights", b"Model loading took",
              b"layers to GPU", b"CPU/GPU", b"pipeline_parallel_size", b"device_config=cuda", b"inference compute",
              b"MiB free", b"\xc2\xb1")      # (the last: llama-bench's "6.84 ± 0.02")
_GATE = re.compile(rb"model size|file size|mem required|weights\.total|model weights|Model loading took|buffer size"
                   rb"|layers to GPU|CPU/GPU|pipeline_parallel_size|device_config=cuda|inference compute|MiB free"
                   rb"|\| +tg[0-9]")
_SIZE = re.compile(rb"\b(?:model|file) size += +([0-9.]+) (GiB|MiB|GB)\b|mem required += +([0-9.]+) MB\b"
                   rb"|memory\.weights\.total=\x22([0-9.]+) (GiB|MiB)\x22|Loading model weights took ([0-9.]+) (GB|GiB)\b"
                   rb"|Model loading took ([0-9.]+) (GiB|GB)\b")
_DEV_WEIGHTS = re.compile(rb"msg=\x22model weights\x22 device=(\S+) size=\x22([0-9.]+) (GiB|MiB)\x22")
_BUFFER = re.compile(rb"\b(\S+) model buffer size = +([0-9.]+) MiB")
_OFFLOAD = re.compile(rb"offloaded ([0-9]+)/([0-9]+) layers to GPU")
_PS = re.compile(rb"\b([0-9]+)%/([0-9]+)% CPU/GPU\b")
_PP = re.compile(rb"pipeline_parallel_size=([0-9]+)")
# llama-bench: `| qwen3 27B Q4_K - Medium |  16.41 GiB |  27.14 B | Vulkan |  99 | ... |  tg128 |  6.84 ± 0.02 |`
_BENCH = re.compile(rb"^\|[^|\n]+\| +([0-9.]+) (GiB|MiB) +\|.*\| +tg[0-9]+(?: @ d[0-9]+)? +\| +([0-9.]+) \xc2\xb1 [0-9.]+ +\|")
# a GPU's memory: Ollama `msg="inference compute" id=GPU-... total="12.0 GiB"`, llama.cpp `using device CUDA0 (...) - 23675 MiB free`
_VRAM = re.compile(rb"msg=\x22inference compute\x22 id=(\S+) .*?\btotal=\x22([0-9.]+) (GiB|MiB)\x22"
                   rb"|using device (\w+) \([^)\n]*\)(?: \([0-9a-f:.]+\))? - ([0-9]+) MiB free")


def _gb(v: bytes, unit: bytes) -> float:
    x = float(v)
    return x * _GIB if unit == b"GiB" else x / 1024 * _GIB if unit == b"MiB" else x if unit == b"GB" else x / 1000


class DecodeBound:
    """The GPUs named, the weights' size, the pipeline depth and the layers left on the CPU, block by block."""

    def __init__(self) -> None:
        self.gpus: dict[str, float] = {}
        self.size = 0.0                          # GB of weights one GPU (one pipeline stage) reads per token
        self.buffers: dict[bytes, float] = {}    # llama.cpp / Ollama device -> GB of weights there
        self.server = False                      # the size came from vLLM (a GPU server)
        self.cuda = False                        # vLLM's engine config says device_config=cuda
        self.pp = 1
        self.offload: Optional[tuple[int, int]] = None
        self.cpu_pct: Optional[int] = None
        self.vram: dict[bytes, float] = {}       # GPU -> GB of memory (Ollama's total, llama.cpp's free at load)
        self.bench: list[float] = []             # llama-bench token generation rates (tokens/s)

    def feed(self, lines: bytes, line_base: int) -> None:
        self._names(lines)
        if not any(lit in lines for lit in _GATE_LITS):
            return
        for raw in lines.split(b"\n"):
            if len(raw) > 8192 or _GATE.search(raw) is None:
                continue
            for m in _SIZE.finditer(raw):
                g = m.groups()
                if g[0]:
                    v = _gb(g[0], g[1])
                elif g[2]:
                    v = _gb(g[2], b"MB")
                elif g[3]:
                    v = _gb(g[3], g[4])
                else:
                    v = _gb(g[5] or g[7], g[6] or g[8])
                    self.server = True
                self.size = max(self.size, v)
            for m in _DEV_WEIGHTS.finditer(raw):
                self.buffers[m.group(1)] = max(self.buffers.get(m.group(1), 0.0), _gb(m.group(2), m.group(3)))
            for m in _BUFFER.finditer(raw):
                dev = m.group(1)
                self.buffers[dev] = max(self.buffers.get(dev, 0.0), _gb(m.group(2), b"MiB"))
            m = _OFFLOAD.search(raw)
            if m and int(m.group(2)) > 0:
                self.offload = (int(m.group(1)), int(m.group(2)))
            m = _PS.search(raw)
            if m:
                self.cpu_pct = int(m.group(1))
            self.cuda = self.cuda or b"device_config=cuda" in raw
            m = _VRAM.search(raw)
            if m:
                dev, gb = (m.group(1), _gb(m.group(2), m.group(3))) if m.group(1) else (m.group(4), _gb(m.group(5), b"MiB"))
                self.vram[dev] = max(self.vram.get(dev, 0.0), gb)
            m = _BENCH.search(raw)
            if m and len(self.bench) < 64:
                self.size = max(self.size, _gb(m.group(1), m.group(2)))
                self.bench.append(float(m.group(3)))
            m = _PP.search(raw)
            if m:
                self.pp = max(self.pp, int(m.group(1)))

    def _names(self, lines: bytes) -> None:
        """The GPU models named in a block: only the lines holding a vendor word (`NVIDIA`, `Tesla`, `Radeon`,
        `Instinct`, `GeForce`) are matched against the table, a few per block (this runs on every block of every log)."""
        for anchor in _ANCHORS:
            pos, tries = lines.find(anchor), 0
            while pos >= 0 and tries < _NAME_TRIES:
                a, b = lines.rfind(b"\n", 0, pos) + 1, lines.find(b"\n", pos)
                line = lines[a:b if b >= 0 else len(lines)]
                for name, lit, rx, bw in BANDWIDTH:
                    if name not in self.gpus and lit in line and rx.search(line):
                        self.gpus[name] = bw
                pos, tries = (lines.find(anchor, b) if b >= 0 else -1), tries + 1

    def expected(self) -> Optional[tuple[str, float, float, float]]:
        """(GPU, GB/s, GB read per token, tokens/s a healthy setup decodes one request at), or None."""
        size = max(self.size, sum(self.buffers.values()))
        if size < MIN_GB:
            return None
        # a GPU named in a model name or a comparison is still a GPU of this log's machine or a faster one: the
        # slowest named is the reference (the expected speed errs low)
        named = [(bw, n) for n, bw in self.gpus.items() if not (n == "A100" and "A100 80GB" in self.gpus)]
        if named:
            bw, gpu = min(named)
        elif self.server and self.cuda:
            gpu, bw = FLOOR
        else:
            return None
        per_token = size * (self.pp if self.server else 1)
        return gpu, bw, per_token, 1.0 / (per_token / bw + OVERHEAD_S)


def decode_bound(bound: DecodeBound, decode: Any, lines: tuple[int, int], anomalies: list[Anomaly]) -> None:
    """Make or raise the throughput finding when one request decodes below `SHARE` of what the GPU's bandwidth allows."""
    rates = [r for r, n in decode if 0 < n <= MAX_RUNNING and r > 0] + [r for r in bound.bench if r > 0]
    exp = bound.expected() if rates else None
    if exp is None:
        return
    gpu, bw, gb, speed = exp
    rate = median(rates)
    if rate >= SHARE * speed:
        return
    nums: dict[str, Any] = {"bound_rate": fmt(rate), "bound_pct": f"{100 * rate / speed:.0f}", "bound_max": f"{speed:.0f}",
                            "bound_gpu": gpu, "bound_bw": f"{bw:g}", "bound_gb": f"{gb:.1f}"}
    size = max(bound.size, sum(bound.buffers.values()))
    cpu = sum(bound.buffers.get(d, 0.0) for d in (b"CPU", b"CPU_Mapped", b"CUDA_Host"))
    share: Optional[float] = None           # the share of the model left on the CPU, when the log says
    if bound.offload:
        on_gpu, layers = bound.offload
        share = 1.0 - on_gpu / layers
        if on_gpu < layers:
            nums.update(cpu_layers=layers - on_gpu, all_layers=layers)
    elif bound.cpu_pct is not None:
        share = bound.cpu_pct / 100
        if bound.cpu_pct:
            nums["cpu_pct"] = bound.cpu_pct
    elif bound.buffers and size > 0:
        share = min(1.0, cpu / size)
        if share >= CPU_SHARE:
            nums["cpu_gb"] = f"{cpu:.1f}"
    # the GPU does all the work (or should: a model on the GPU but for a few layers, or on the CPU with a GPU there):
    # its memory's speed is the reference, an error; a model split between the two on purpose (a large share on
    # the CPU) decodes at the CPU's speed by design: a warning
    # (the weights fit in FIT of the GPUs' memory: what pushed layers out is a context, parallel or layer setting)
    vram = sum(bound.vram.values())
    fits = vram > 0 and size <= FIT * vram
    if fits and share:
        nums.update(fit_gb=f"{size:.1f}", vram_gb=f"{vram:.1f}")
    sev = "error" if share is None or share <= CPU_SHARE or share >= 1.0 or fits else "warning"
    first, last = lines
    for a in anomalies:
        if a.kind == "throughput":
            a.numbers.pop("decode", None)
            a.numbers.pop("reqs", None)
            a.numbers.update(nums)
            a.severity = "error" if sev == "error" else a.severity
            a.line, a.last_line = min(a.line, first or a.line), max(a.last_line, last)
            return
    anomalies.append(Anomaly("throughput", "throughput-low", sev, first or last or 1, max(first, last, 1), None,
                             len(rates), nums))
