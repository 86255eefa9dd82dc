"""metric-mfu-far-below-peak: a large model trained at a small fraction of its GPUs' peak, from the first step.

A run that is slow from its first step has no fast stretch to compare with; what it can be compared with is the
hardware. Two trainers print achieved model FLOPs in a form that can be checked against the GPU the log names:

  Megatron     `throughput per GPU (TFLOP/s/GPU): 20.1` (--log-throughput): model TFLOP/s per GPU, divided here by
               the dense bf16 peak of the GPU named in the log (`PEAKS`: nvidia-smi rows, environment dumps).
  torchtitan   `wps: 196  mfu: 8.61%` / `tps: ... mfu: ...%`: its own MFU, computed against the peak of the device it
               detected (a trainer that hard-codes one GPU's peak, nanoGPT's `mfu 104%` or nanochat's `mfu: 24.9`,
               is not read: on another GPU its number is off by the ratio of the peaks).
  tokens/GPU   a per-device token rate, lit-llama / lit-parrot `speed: 388 toks/s/device`: the model FLOPs are
               estimated as 6 x parameters x tokens/s (forward and backward of a dense model, attention left out),
               against the named GPU's peak like Megatron's. The estimate errs high (a LoRA run does about 4 x
               parameters per token, a mixture of experts far less than its total), so it can only stay silent
               where the MFU is low, never call a healthy run slow. A model-parallel shard's parameter count is
               not the model's: with it the estimate is not made.

  lit-gpt      its fine-tuning scripts (lora, adapter, full) print `| iter time: 30011.34 ms` per micro-batch, the
               `micro_batch_size=` of TrainArgs, `The longest sequence length in the train data is 1079` and the
               trainable and non-trainable parameter counts: micro-batch x longest sample / iteration time bounds the
               tokens each GPU processes from above, so the estimate (6 x parameters per token) errs high again. With
               no GPU named it is compared with a T4's 16-bit peak (`FLOOR_PEAK`), the slowest GPU that trains a
               model of a billion parameters: below a tenth of even that, the GPUs wait whatever they are.

Judged only for a model of at least `MIN_PARAMS` parameters (torchtitan's `Model ... size: N total parameters`,
Megatron's `number of parameters on (tensor, pipeline) model parallel rank (0, 0): N`, lit-gpt's `Total parameters
7,217,189,760`, PEFT's `trainable params: ... || all params: N`): a debug-size model cannot
fill a GPU and its MFU says nothing. The first `SKIP` records (compilation, warm-up) are left out; the median of at
least `MIN_RECORDS` later ones below `MFU_LOW`% is an error: a large model trains at 30-55% on a healthy setup,
and below a tenth of the peak the GPUs wait most of every step (exposed communication over a slow network,
offloading, recomputation on a too-small batch). With several GPU models named in one log the peak is unknown and
Megatron's numbers are not judged.
"""
from __future__ import annotations

import re
from typing import Any

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median

MFU_LOW = 10.0
MIN_PARAMS = 1e9
SKIP = 2
MIN_RECORDS = 3
KEEP = 4096

# dense bf16 (fp16 for V100) tensor-core peak, TFLOP/s; the literal each name's pattern needs comes first
PEAKS: list[tuple[str, bytes, re.Pattern[bytes], float]] = [(n, lit, re.compile(p), v) for n, lit, p, v in (
    ("GB200", b"GB200", rb"\bGB200\b", 2500.0), ("B200", b"B200", rb"\bB200\b", 2250.0),
    ("H200", b"H200", rb"\bH200\b", 989.0), ("H100 PCIe", b"H100", rb"\bH100[ -]PCIe", 756.0),
    ("H100", b"H100", rb"\bH100\b(?![ -]PCIe)", 989.0), ("H800", b"H800", rb"\bH800\b", 989.0),
    ("H20", b"H20", rb"\bH20\b", 148.0), ("A100", b"A100", rb"\bA100\b", 312.0), ("A800", b"A800", rb"\bA800\b", 312.0),
    ("L40S", b"L40S", rb"\bL40S\b", 362.0), ("RTX 4090", b"RTX 4090", rb"RTX 4090\b", 165.0),
    ("RTX 3090", b"RTX 3090", rb"RTX 3090\b", 71.0), ("MI300X", b"MI300X", rb"\bMI300X\b", 1307.0),
    ("V100", b"V100", rb"\bV100\b", 125.0))]
_GATE = re.compile(rb"TFLOP/s/GPU\)|mfu: [0-9]|total parameters|model parallel rank \(|Total parameters|all params: |toks/s/device"
                   rb"|\| iter time: |micro_batch_size=|longest sequence length|trainable parameters: ")
_NAME_TRIES = 4     # occurrences of a name's literal checked per block (a name inside a longer word does not count)
_MEG = re.compile(rb"throughput per GPU \(TFLOP/s/GPU\): ([0-9]+(?:\.[0-9]+)?)")
_TITAN = re.compile(rb"\b(?:wps|tps): [0-9][0-9,]*\b.*?\bmfu: ([0-9]+(?:\.[0-9]+)?)%")
_PARAMS = re.compile(rb"Model \S+ \S+ size: ([0-9][0-9,]*) total parameters|"
                     rb"number of parameters on \(tensor, pipeline\) model parallel rank \(0, 0\): ([0-9]+)|"
                     rb"(?:\bTotal parameters:? |\|\| all params: )([0-9][0-9,]*)\b")
_LIT_ITER = re.compile(rb"\| iter [0-9]+ step [0-9]+ \|[^\n]*\| iter time: ([0-9]+(?:\.[0-9]+)?) ?ms\b")
_LIT_MB = re.compile(rb"\bmicro_batch_size=([0-9]+)\b")
_LIT_LEN = re.compile(rb"The longest sequence length in the train data is ([0-9]+)\b")
_LIT_PARAMS = re.compile(rb"^Number of (?:non-)?trainable parameters: ([0-9][0-9,]*)\s*$")
FLOOR = ("T4", 65.0)     # the slowest GPU that trains a model of MIN_PARAMS (16-bit tensor-core peak, TFLOP/s)
_TOKDEV = re.compile(rb"\bspeed: ([0-9]+(?:\.[0-9]+)?) toks/s/device\b")
FLOPS_PER_TOKEN = 6.0    # x parameters: forward (2) and backward (4) of a dense model


class MfuTracker:
    """Reads achieved model FLOPs, the model size and the GPU's name block by block; `detect()` gives the anomaly."""

    def __init__(self) -> None:
        self.meg: list[tuple[int, float]] = []
        self.titan: list[tuple[int, float]] = []
        self.tokdev: list[tuple[int, float]] = []
        self.params = 0.0           # the whole model's (torchtitan), or one model-parallel rank's shard (Megatron)
        self.shard = False
        self.gpus: dict[str, float] = {}
        self.lit_iter: list[tuple[int, float]] = []     # lit-gpt fine-tuning: (line, iteration seconds)
        self.lit_mb = self.lit_len = 0
        self.lit_params = 0.0

    def feed(self, lines: bytes, line_base: int) -> None:
        self._names(lines)
        if _GATE.search(lines) is None:
            return
        for i, raw in enumerate(lines.split(b"\n")):
            if len(raw) > 4096 or _GATE.search(raw) is None:
                continue
            ln = line_base + i
            m = _MEG.search(raw)
            if m:
                if len(self.meg) < KEEP:
                    self.meg.append((ln, float(m.group(1))))
                continue
            m = _TITAN.search(raw)
            if m:
                if len(self.titan) < KEEP:
                    self.titan.append((ln, float(m.group(1))))
                continue
            m = _TOKDEV.search(raw)
            if m:
                if len(self.tokdev) < KEEP:
                    self.tokdev.append((ln, float(m.group(1))))
                continue
            m = _LIT_ITER.search(raw)
            if m:
                if len(self.lit_iter) < KEEP:
                    self.lit_iter.append((ln, float(m.group(1)) / 1000))
                continue
            m = _LIT_MB.search(raw) or _LIT_LEN.search(raw) or _LIT_PARAMS.search(raw)
            if m:
                v = int(m.group(1).replace(b",", b""))
                if m.re is _LIT_PARAMS:
                    self.lit_params += v
                elif m.re is _LIT_MB:
                    self.lit_mb = self.lit_mb or v
                else:
                    self.lit_len = max(self.lit_len, v)
                continue
            m = _PARAMS.search(raw)
            if m:
                self.params = max(self.params, float((m.group(1) or m.group(2) or m.group(3)).replace(b",", b"")))
                self.shard = self.shard or m.group(2) is not None

    def _names(self, lines: bytes) -> None:
        """The GPU models named in a block, found by their literals (a substring search in C), not by a regex run on
        every line that says "GPU" (most lines of many logs: this is the triage path). Two models named: the peak is
        unknown, and nothing more needs reading."""
        for name, lit, rx, peak in PEAKS:
            if name in self.gpus or len(set(self.gpus.values())) >= 2:
                continue
            pos = lines.find(lit)
            for _ in range(_NAME_TRIES):
                if pos < 0:
                    break
                a, b = lines.rfind(b"\n", 0, pos) + 1, lines.find(b"\n", pos)
                if rx.search(lines, a, b if b >= 0 else len(lines)):
                    self.gpus[name] = peak
                    break
                pos = lines.find(lit, pos + 1)

    def detect(self) -> list[Anomaly]:
        """The anomaly when a large model's MFU stays below `MFU_LOW`% after warm-up."""
        if self.params < MIN_PARAMS:
            return self._lit()
        nums: dict[str, Any] = {"shard_params" if self.shard else "params": f"{self.params / 1e9:.1f}"}
        recs = self.titan[SKIP:]
        if len(recs) >= MIN_RECORDS:
            mfu = median([v for _, v in recs])
            nums.update(titan_mfu=f"{mfu:.1f}")
        else:
            recs = self.meg[SKIP:]
            tok = len(recs) < MIN_RECORDS
            if tok:     # no Megatron throughput: a per-device token rate of a whole (unsharded) model
                recs = [] if self.shard else self.tokdev[SKIP:]
            if len(recs) < MIN_RECORDS or len(set(self.gpus.values())) != 1:
                return []
            [(gpu, peak)] = list(self.gpus.items())[:1]
            if tok:
                rate = median([v for _, v in recs])
                tf = FLOPS_PER_TOKEN * self.params * rate / 1e12
                nums.update(tok_dev=f"{rate:.0f}", est_tflops=fmt(tf), gpu=gpu, peak=f"{peak:g}")
            else:
                tf = median([v for _, v in recs])
                nums.update(tflops=fmt(tf), gpu=gpu, peak=f"{peak:g}")
            mfu = 100 * tf / peak
        if mfu >= MFU_LOW:
            return []
        nums.update(mfu=f"{mfu:.1f}", records=len(recs), comm=True)
        return [Anomaly("mfu_low", "throughput-low", "error", recs[0][0], recs[-1][0], None, len(recs), nums)]

    def _lit(self) -> list[Anomaly]:
        """lit-gpt fine-tuning: an upper bound of the tokens per GPU per second against the named GPU's peak (a T4's
        when none is named)."""
        recs = self.lit_iter[SKIP:]
        if self.lit_params < MIN_PARAMS or not (self.lit_mb and self.lit_len) or len(recs) < MIN_RECORDS:
            return []
        if len(set(self.gpus.values())) > 1:
            return []
        gpu, peak = next(iter(self.gpus.items())) if self.gpus else FLOOR
        it = median([v for _, v in recs])
        rate = self.lit_mb * self.lit_len / it if it > 0 else 0.0
        tf = FLOPS_PER_TOKEN * self.lit_params * rate / 1e12
        mfu = 100 * tf / peak
        if rate <= 0 or mfu >= MFU_LOW:
            return []
        nums: dict[str, Any] = {"params": f"{self.lit_params / 1e9:.1f}", "iter_s": fmt(it), "lit_tok": self.lit_mb * self.lit_len,
                                "lit_mb": self.lit_mb, "lit_len": self.lit_len, "est_tflops": fmt(tf), "gpu": gpu,
                                "peak": f"{peak:g}", "mfu": f"{mfu:.1f}", "records": len(recs), "comm": True}
        if not self.gpus:
            nums["floor_gpu"] = gpu
        return [Anomaly("mfu_low", "throughput-low", "error", recs[0][0], recs[-1][0], None, len(recs), nums)]
