"""metric-more-gpus-no-faster: two launches pasted in one log, the one with more GPUs no faster per sample.

Users who find a multi-GPU job slow often paste the same job run twice: once on fewer GPUs (one GPU, one node) and
once on more. Each launch is a shell command line (`$ torchrun --nproc_per_node 4 ...`, `+ accelerate launch
--num_processes 8 ...`, `$ CUDA_VISIBLE_DEVICES=0 llamafactory-cli train ...`) that names its GPU count:
  world      `--nproc_per_node` x `--nnodes` (torchrun, its first number), `--num_processes` (accelerate),
             `--num_gpus` x `--num_nodes` (deepspeed), else the devices listed in `CUDA_VISIBLE_DEVICES=` before it
  batch      the global batch of each step: the HF Trainer's `Total train batch size (w. parallel, distributed &
             accumulation) = 64`, or the command's `--global-batch-size 256` / `--global_batch_size=256`
  speed      the training bar's average (`70/782 [07:21<1:14:53, 6.31s/it]`: elapsed / steps of its last reading,
             at least `MIN_BAR_STEPS` steps), or the median of at least `MIN_RATES` `Steps/Sec: 2.94` readings
The seconds each sample takes (step seconds / global batch) are compared: when the launch with at least twice the
GPUs takes as long per sample as the smaller one, or longer, the extra GPUs add nothing: the job is bound by
communication (no InfiniBand, NCCL over sockets or PCIe), by the input pipeline, or by a setting that serialises the
ranks. An error: the user's own pair of runs is the yardstick. A launch whose GPU count, batch or speed cannot be
read takes no part; a larger job that is faster per sample (even far below linear scaling) raises nothing.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median
from llmtriage.engine.logparse import split_prefix

MIN_BAR_STEPS = 10
MIN_RATES = 3
MIN_RATIO = 2          # the larger launch has at least this many times the GPUs
KEEP = 16              # launches read

_GATE = re.compile(rb"(?m)^\s*(?:\(\S+\)\s*)?(?:\S*[$#] |\+ )|Total train batch size|s/it[\],]|it/s[\],]|Steps/Sec: |requests/s, |Processed prompts: +100%")
_LAUNCH = re.compile(rb"^\s*(?:\(\S+\)\s*)?(?:\S*\$ |\+ )(.*(?:torchrun|torch\.distributed\.(?:run|launch)|accelerate launch|deepspeed"
                     rb"|llamafactory-cli train|tune run|python3? \S+\.py).*)")
_LAUNCH_GATE = re.compile(rb"[$+] [^\n]*(?:torchrun|torch\.distributed\.|accelerate launch|deepspeed|llamafactory-cli train"
                          rb"|tune run|python)")
_NPROC = re.compile(rb"--nproc[_-]per[_-]node[= ]+([0-9]+)")
_NNODES = re.compile(rb"--nnodes[= ]+([0-9]+)")
_NUMPROC = re.compile(rb"--num[_-]processes[= ]+([0-9]+)")
_NUMGPU = re.compile(rb"--num[_-]gpus[= ]+([0-9]+)")
_NUMNODE = re.compile(rb"--num[_-]nodes[= ]+([0-9]+)")
_DEVICES = re.compile(rb"--devices[= ]+([0-9]+)")
_CVD = re.compile(rb"CUDA_VISIBLE_DEVICES=([0-9]+(?:,[0-9]+)*)\b")
_GBS_ARG = re.compile(rb"--global[_-]batch[_-]size[= ]+([0-9]+)")
_GBS_HF = re.compile(rb"Total train batch size \(w\. parallel, distributed & accumulation\) = ([0-9,]+)")
_BAR = re.compile(rb"(?<![A-Za-z])([0-9]+)/[0-9]+ \[([0-9:]+)<[0-9:?]+,\s*[0-9.]+(?:s/it|it/s)")
_RATE = re.compile(rb"Steps/Sec: ([0-9.]+)")
_TOK_GPU = re.compile(rb"tokens_per_second_per_gpu[:=]\s*([0-9.]+)")
_TOK = re.compile(rb"[0-9.]+ sec total, ([0-9.]+) tokens/sec")
_TP = re.compile(rb"--tensor[_-]parallel[_-]size[= ]+([0-9]+)")
# vLLM's offline benchmark (benchmark_throughput.py, `vllm bench throughput`): the whole launch's request rate
_REQS = re.compile(rb"Throughput: ([0-9.]+) requests/s, [0-9.]+ (?:total )?tokens/s")
# vLLM's LLM.generate bar run to its end, `Processed prompts: 100%|...| 200/200 [06:52<00:00, 2.06s/it]`: prompts / elapsed
_PROMPTS = re.compile(rb"Processed prompts: +100%[^\n]*?\| ?([0-9]+)/\1 \[([0-9:]+)<")
_NOT_TRAIN = re.compile(rb"(?i)checkpoint shards|tokeniz|map\b|filter|generat|eval|predict|download|processed prompts|loading")



def _unprefixed(line: bytes) -> bytes:
    return split_prefix(line.decode("utf-8", "replace")).text.encode("utf-8")


def _world(cmd: bytes) -> Optional[int]:
    m = _NPROC.search(cmd)
    if m:
        n = _NNODES.search(cmd)
        return int(m.group(1)) * (int(n.group(1)) if n else 1)
    m = _NUMPROC.search(cmd)
    if m:
        return int(m.group(1))
    m = _NUMGPU.search(cmd)
    if m:
        n = _NUMNODE.search(cmd)
        return int(m.group(1)) * (int(n.group(1)) if n else 1)
    m = _DEVICES.search(cmd)
    if m:
        return int(m.group(1))
    m = _CVD.search(cmd) or _TP.search(cmd)
    if m:
        return len(m.group(1).split(b",")) if m.re is _CVD else int(m.group(1))
    return 1 if b"_single_device" in cmd else None


def _secs(clock: bytes) -> float:
    t = 0.0
    for part in clock.split(b":"):
        t = t * 60 + int(part)
    return t


class ScalingTracker:
    """Reads launches, their global batch and their training speed; `detect()` compares the launches."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []     # {line, world, batch, bar: (steps, secs), rates: [..]}

    def feed(self, lines: bytes, line_base: int) -> None:
        if _GATE.search(lines) is None or (not self.runs and _LAUNCH_GATE.search(lines) is None):
            return      # (no launch read yet and none in this block: nothing to attribute speeds to, skip the line loop)
        for i, raw in enumerate(lines.split(b"\n")):
            if len(raw) > 4096:
                continue
            m = _LAUNCH.match(raw)
            if m is None and (b"$ " in raw or b"+ " in raw):
                m = _LAUNCH.match(_unprefixed(raw))    # the same command under a launcher's or logger's prefix
            if m:
                if len(self.runs) < KEEP:
                    g = _GBS_ARG.search(m.group(1))
                    self.runs.append({"line": line_base + i, "world": _world(m.group(1)), "batch": int(g.group(1)) if g else None,
                                      "bar": None, "rates": [], "toks": [], "reqs": [], "last": line_base + i})
                continue
            if not self.runs:
                continue
            run = self.runs[-1]
            m = _GBS_HF.search(raw)
            if m:
                run["batch"] = int(m.group(1).replace(b",", b""))
                continue
            m = _TOK_GPU.search(raw) or _TOK.search(raw)
            if m and float(m.group(1)) > 0 and len(run["toks"]) < 4096:
                run["toks"].append(float(m.group(1)) * (run["world"] or 0 if m.re is _TOK_GPU else 1))
                run["last"] = line_base + i
                continue
            m = _REQS.search(raw) or _PROMPTS.search(raw)
            if m and float(m.group(1)) > 0 and len(run["reqs"]) < 4096 and (m.re is _REQS or _secs(m.group(2)) > 0):
                run["reqs"].append(float(m.group(1)) / (_secs(m.group(2)) if m.re is _PROMPTS else 1))
                run["last"] = line_base + i
                continue
            m = _RATE.search(raw)
            if m and float(m.group(1)) > 0 and len(run["rates"]) < 4096:
                run["rates"].append(float(m.group(1)))
                run["last"] = line_base + i
                continue
            for m in _BAR.finditer(raw):
                if _NOT_TRAIN.search(raw[max(0, m.start() - 60):m.start()]) is None and int(m.group(1)) >= MIN_BAR_STEPS:
                    run["bar"] = (int(m.group(1)), _secs(m.group(2)))
                    run["last"] = line_base + i

    @staticmethod
    def _rate(run: dict[str, Any]) -> Optional[tuple[float, str]]:
        """(throughput of the whole launch, unit): samples/s from step time and global batch, or tokens/s."""
        if not run["world"]:
            return None
        if run["reqs"]:         # an inference benchmark's requests per second, whole launch
            return median(run["reqs"]), "requests"
        toks = [t for t in run["toks"] if t > 0]
        if toks and (len(toks) >= MIN_RATES or not run["batch"]):
            return median(toks[1:] if len(toks) >= MIN_RATES else toks), "tokens"
        if not run["batch"]:
            return None
        if len(run["rates"]) >= MIN_RATES:
            step = 1 / median(run["rates"][1:])
        elif run["bar"] is not None and run["bar"][1] > 0:
            step = run["bar"][1] / run["bar"][0]
        else:
            return None
        return run["batch"] / step, "samples"

    def detect(self) -> list[Anomaly]:
        """The anomaly when a launch with >= MIN_RATIO x the GPUs has no more throughput than a smaller one."""
        read = [(r, x) for r in self.runs if (x := self._rate(r)) is not None]
        worst = None
        for small, (rs, us) in read:
            for big, (rb, ub) in read:
                if us == ub and big["world"] >= MIN_RATIO * small["world"] and rb <= rs:
                    if worst is None or rb / rs < worst[4]:
                        worst = (small, rs, big, rb, rb / rs, us)
        if worst is None:
            return []
        small, rs, big, rb, ratio, unit = worst
        nums = {"gpus_few": small["world"], "gpus_many": big["world"], "rate_few": fmt(rs), "rate_many": fmt(rb),
                "unit": unit, "speedup": f"{ratio:.2f}", "comm": True}
        first, last = min(small["line"], big["line"]), max(small["last"], big["last"])
        return [Anomaly("scaling", "throughput-low", "error", first, max(first, last), None, 1, nums)]
