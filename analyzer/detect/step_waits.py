"""metric-step-wait-dominates: a run that is slow from its first step, read from where its steps spend their time.

The throughput detector (throughput.py) sees a slowdown against the run's own early speed; a run that is slow from
the start has no fast baseline. These sources say how slow it is on their own, because they split each step into the
part that does the work and the part that waits:

  data wait      the loop's own data time beside its step time: LeRobot `updt_s:0.302 data_s:13.330` (the step is
                 their sum), mmcv `time: 0.430, data_time: 0.006` (mmengine: `time: 7.2980  data_time: 6.0183`; the torchvision references' MetricLogger, also DeiT, DETR and
                 their forks: `time: 0.8312  data: 0.5123  max mem: 2410`) and the PyTorch examples' AverageMeter
                 `Time 0.783 (2.771)  Data 0.512 (0.601)` (data time is part of the step time), open_clip
                 `Data (t): 1.557 Batch (t): 2.078` (the same: the batch time includes the data wait), Megatron-LM and GPT-NeoX
                 interval timers `time (ms) | forward: 162.3 | backward: 298.6 | optimizer: 41.1 | batch generator: 8899.5`
                 (the step is the sum of the top-level timers, `timer_split`). Loops that print the two parts
                 apart (the step is their sum): EDSR and its forks `[1600/16000]\t[L1: 35.2]\t30.1+480.3s` (model + data),
                 a user's timer fields `data 10.8s | fwd+bwd 0.41s`. The first record is
                 left out (workers start); at least `MIN_RECORDS` later ones, and the finding when the data wait is
                 `DATA_SHARE` of all step time (the GPUs wait for the input pipeline most of the run).
  profiler       Lightning's simple profiler report: `[_TrainingEpochLoop].train_dataloader_next | mean | calls |
                 total | percentage`: fetching batches took `DATA_SHARE` of the fit time or more.
  optimizer      DeepSpeed's `wall_clock_breakdown`: `time (ms) | forward: 376.60 | backward: 864.56 | ... | step:
                 22880.87` (newer releases: `fwd:` / `bwd:`; the per-micro-step line `fwd_microstep: ... | step_microstep:`
                 is read when the log has no global one): the optimizer step takes `STEP_RATIO` x forward + backward on
                 the median of at least `MIN_BREAKDOWNS` iterations, and at least `STEP_MIN_MS` (ZeRO-Offload's CPU Adam
                 starved of cores, NVMe offload): the GPUs wait for the host. Where the log shows the optimizer offloaded
                 to the host (`offload_optimizer` / `offload_param` on cpu or nvme, `"cpu_offload": true`,
                 DeepSpeedCPUAdam), `OFFLOAD_RATIO` x is enough (the step is two thirds of every iteration: the GPUs
                 idle most of the run while the host updates the weights) at `OFFLOAD_MIN_MS` or more. With gradient
                 accumulation the micro-step lines show the step on one micro-step in k: their median stays low, so
                 they can only err toward silence.
  power          nvidia-smi tables taken during training (or a monitor's line of readings, `gpu=0 util=100%
                 mem=61234MiB power=81.2W/300W | gpu=1 ...`): every GPU of a multi-GPU job at `BUSY_UTIL`% or more
                 while drawing at most `POWER_SHARE` of its power cap. A kernel occupies the GPU but does no math:
                 NCCL kernels spinning while they wait for a slow or misconfigured network (the volatile
                 utilisation counts a waiting kernel as busy). A training step's matrix work draws well over half.

  pcie link      `nvidia-smi --query-gpu=...,pcie.link.gen.current,pcie.link.gen.max,...,utilization.gpu --format=csv`
                 rows taken during training: a GPU at `PCIE_BUSY`% or more whose link runs below the generation that
                 the GPU and host support (`pcie.link.gen.max` is the GPU-and-system maximum). An idle GPU
                 lowers its link generation to save power, so only a busy one counts: a link that trained down
                 (reseat, retimer, a speed lock applied before the link trained) moves every host transfer and P2P
                 copy at a fraction of the speed, and a data-parallel job runs at the pace of that GPU.

Each is an error: the job does not fail, but most of its time is spent waiting (docs/METRICS.md, "When a slowdown
is an error"). Warm-up (the first record), a compile step, an evaluation pause or a save never make up most of a run.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median
from llmtriage.engine.fastre import Gate

DATA_SHARE = 0.5
MIN_RECORDS = 8
STEP_RATIO = 8.0
STEP_MIN_MS = 2000.0
OFFLOAD_RATIO = 2.0
OFFLOAD_MIN_MS = 100.0
MIN_BREAKDOWNS = 3
BUSY_UTIL = 90
POWER_SHARE = 0.3
PCIE_BUSY = 50
KEEP = 4096

_GATE = re.compile(rb"data_s:|data_time: |\s data: [0-9]|\bData +[0-9]|train_dataloader_next|\| step: [0-9]|W\s*/\s*[0-9]+W\s*\||[Pp]ower\s*[=:]\s*[0-9.]+ ?W ?/"
                   rb"|\bdata(?:[ _]time)?[ :=]+[0-9.]+ ?s\b|\][ \t]+[0-9.]+\+[0-9.]+s\s*$|\| batch[ -]generator: [0-9]|\| step_microstep: [0-9]"
                   rb"|\bData \(t\)")
# what every `_GATE` match holds (`data` is in data_s / data_time / data: / train_dataloader_next; `[0-9]W` in the
# nvidia-smi power column; `[0-9.]+[0-9.]` in EDSR's split): a block without any is skipped at RE2 speed
_PREGATE = Gate(rb"data|Data |\| step|generator: |[0-9]W|[0-9.]\+[0-9.]")
_LEROBOT = re.compile(rb"\bupdt_s:([0-9]+(?:\.[0-9]+)?) data_s:([0-9]+(?:\.[0-9]+)?)")
_MMCV = re.compile(rb"(?:^|[\s,])time: ([0-9]+(?:\.[0-9]+)?),?\s+data(?:_time)?: ([0-9]+(?:\.[0-9]+)?)")
# a loop's own split of each step into compute and data time, summed to the step: EDSR and its forks (RCAN, HAN, ...)
# `[1600/16000]\t[L1: 35.2015]\t30.1+480.3s` (model time + data time of the interval), or a user's timer fields
# `data 10.8s | fwd+bwd 0.41s` (`compute`, `model`, `train`, `gpu`, `fwd_bwd` name the compute part, either order)
_EDSR = re.compile(rb"(?:^|\s)\[[0-9]+/[0-9]+\][ \t]+\[[^\]]*\][ \t]+([0-9]+(?:\.[0-9]+)?)\+([0-9]+(?:\.[0-9]+)?)s\s*$")
_SPLIT_DATA = re.compile(rb"\bdata(?:[ _]time)?[ :=]+([0-9]+(?:\.[0-9]+)?) ?s\b")
_SPLIT_WORK = re.compile(rb"\b(?:fwd\+bwd|fwd_bwd|fwd/bwd|compute|model|train|gpu)(?:[ _]time)?[ :=]+([0-9]+(?:\.[0-9]+)?) ?s\b")
# open_clip and its forks: `Data (t): 1.557 Batch (t): 2.078, 1970.8/s` (2021 releases: `Data (t) 0.482\tBatch (t) 0.712`),
# the averages over the logging interval; the batch time includes the wait for data
_OPENCLIP = re.compile(rb"\bData \(t\):? ([0-9]+(?:\.[0-9]+)?)\s+Batch \(t\):? ([0-9]+(?:\.[0-9]+)?)")
_METER = re.compile(rb"\bTime +([0-9]+(?:\.[0-9]+)?) +\( *[0-9.]+\)\s+Data +([0-9]+(?:\.[0-9]+)?) +\( *[0-9.]+\)")
_PROFILER = re.compile(rb"train_dataloader_next\s*\|?\s*([0-9.]+)\s*\|?\s*([0-9]+)\s*\|?\s*([0-9.]+)\s*\|?\s*([0-9.]+)")
_DS = re.compile(rb"time \(ms\) \| (?:forward|fwd)(_microstep)?: ([0-9.]+) \| (?:backward|bwd)(?:_microstep)?: ([0-9.]+) \|"
                 rb"[^\n]*?\| step(?:_microstep)?: ([0-9.]+)")
# the optimizer runs on the host: DeepSpeed's config dump or ds_config (`offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(
# device='cpu'`, `device=<OffloadDeviceEnum.cpu: 'cpu'>`, `"offload_optimizer": {"device": "cpu"`), the 2021 `"cpu_offload": true`,
# or the CPU Adam it builds
_OFFLOAD = re.compile(rb"offload_(?:optimizer|param)\W{1,8}(?:[A-Za-z]+\()?[\"']?device[\"']?\W{1,4}(?:OffloadDeviceEnum\.)?(?:cpu|nvme)\b"
                      rb"|\"cpu_offload\": ?true|\bcpu_offload[=:] ?True\b|\bDeepSpeedCPUAdam\b")
# Megatron-LM / GPT-NeoX interval timers: `time (ms) | forward-compute: 193.77 | ... | batch-generator: 25.27` (NeoX:
# `forward: 162.31 | backward: 298.64 | backward-backward: 298.58 | optimizer: 41.12 | batch generator: 8899.47`)
_TIMERS = re.compile(rb"time \(ms\) \|[^\n]*\| batch[ -]generator: [0-9]")
_TIMER_FIELD = re.compile(rb"\|\s*([A-Za-z][A-Za-z0-9 _/-]*?):\s*([0-9]+(?:\.[0-9]+)?)")
# the column list, in the query (`--query-gpu=index,pcie.link.gen.current,...`) or the CSV header it prints
# (`index, pcie.link.gen.current, ..., utilization.gpu [%]`)
_PCIE_HEAD = re.compile(rb"((?:[a-z_.]+(?: \[[^\]]*\])?,\s*)*pcie\.link\.gen\.current(?: \[[^\]]*\])?(?:,\s*[a-z_.]+(?: \[[^\]]*\])?)*)")
_PCIE_COLS = (b"pcie.link.gen.current", b"pcie.link.gen.max", b"utilization.gpu")
_SMI = re.compile(rb"([0-9]+)W\s*/\s*([0-9]+)W\s*\|\s*[0-9]+MiB\s*/\s*[0-9]+MiB\s*\|\s*([0-9]+)%")
# a monitor line's readings, one GPU or several a line: `gpu=0 util=100% mem=61234MiB power=81.2W/300W | gpu=1 util=100% ...`
_MON_POWER = re.compile(rb"\b[Uu]til(?:ization)?\s*[=:]\s*([0-9]{1,3})%[^|\n]{0,80}?\b[Pp]ower\s*[=:]\s*([0-9]+(?:\.[0-9]+)?) ?W ?/ ?([0-9]+(?:\.[0-9]+)?) ?W")


def timer_split(raw: bytes) -> Optional[tuple[float, float]]:
    """(step, data wait) in ms from a Megatron / GPT-NeoX timer line: the data wait is the batch generator's time, the
    step the sum of the top-level timers (a field `backward-backward` or `optimizer-copy-to-main-grad` is a part of the
    `backward` / `optimizer` field printed beside it and is not added again)."""
    fields = {k.strip(): float(v) for k, v in _TIMER_FIELD.findall(raw)}
    data = fields.get(b"batch generator", fields.get(b"batch-generator"))
    if data is None:
        return None
    step = sum(v for k, v in fields.items() if k.split(b"-")[0] == k or k.split(b"-")[0] not in fields)
    return (step, data) if step > 0 else None


class StepWaitTracker:
    """Reads data-wait, profiler, optimizer-breakdown and power readings block by block; `detect()` gives the anomaly."""

    def __init__(self) -> None:
        self.data: list[tuple[int, float, float]] = []      # (line, step seconds, data seconds)
        self.data_src = ""
        self.profiler: Optional[tuple[int, float, float, int]] = None   # (line, percentage, mean seconds, calls)
        self.ds: list[tuple[int, float, float]] = []        # (line, forward + backward ms, step ms)
        self.ds_micro: list[tuple[int, float, float]] = []  # the same from the per-micro-step lines
        self.offload = False                                # the log shows the optimizer offloaded to the host
        self.power: list[list[tuple[int, int, int, int]]] = []   # snapshots: [(line, watts, cap, util)]
        self.pcie_cols: Optional[tuple[int, list[Optional[int]]]] = None   # the query header: (fields, column indexes)
        self.pcie: list[tuple[int, int, list[Optional[int]]]] = []   # (line, GPU row in its table, values)
        self.pcie_row = 0

    def feed(self, lines: bytes, line_base: int) -> None:
        if not self.offload and (b"offload" in lines or b"CPUAdam" in lines) and _OFFLOAD.search(lines):
            self.offload = True
        if self.pcie_cols is not None or b"pcie.link.gen.current" in lines:
            self._pcie(lines, line_base)
        if not _PREGATE(lines) or _GATE.search(lines) is None:
            return
        last_power = -10
        for i, raw in _PREGATE.lines(lines):      # a line without the pre-gate's text has no `_GATE` match
            if len(raw) > 4096 or _GATE.search(raw) is None:
                continue
            ln = line_base + i
            m = _LEROBOT.search(raw)
            if m:
                self._data(ln, float(m.group(1)) + float(m.group(2)), float(m.group(2)), "lerobot")
                continue
            m = _EDSR.search(raw)
            if m:
                self._data(ln, float(m.group(1)) + float(m.group(2)), float(m.group(2)), "split")
                continue
            m, w = _SPLIT_DATA.search(raw), _SPLIT_WORK.search(raw)
            if m and w:
                self._data(ln, float(m.group(1)) + float(w.group(1)), float(m.group(1)), "split")
                continue
            m = _OPENCLIP.search(raw)
            if m:
                self._data(ln, float(m.group(2)), float(m.group(1)), "openclip")
                continue
            m = _MMCV.search(raw) or _METER.search(raw)
            if m:
                self._data(ln, float(m.group(1)), float(m.group(2)), "mmcv" if m.re is _MMCV else "meter")
                continue
            m = _PROFILER.search(raw)
            if m:
                self.profiler = (ln, float(m.group(4)), float(m.group(1)), int(m.group(2)))
                continue
            if _TIMERS.search(raw):
                split = timer_split(raw)
                if split is not None:
                    self._data(ln, split[0] / 1000, split[1] / 1000, "timers")     # (ms)
                continue
            m = _DS.search(raw)
            if m:
                into = self.ds_micro if m.group(1) else self.ds
                if len(into) < KEEP:
                    into.append((ln, float(m.group(2)) + float(m.group(3)), float(m.group(4))))
                continue
            m = _SMI.search(raw)
            rows = [(int(m.group(1)), int(m.group(2)), int(m.group(3)))] if m else \
                [(int(float(p.group(2))), int(float(p.group(3))), int(p.group(1))) for p in _MON_POWER.finditer(raw)]
            rows = [r for r in rows if r[1] > 0]
            if rows and len(self.power) < KEEP:
                if ln - last_power > 4 or not self.power:
                    self.power.append([])
                last_power = ln
                self.power[-1].extend((ln, w, cap, u) for w, cap, u in rows)

    def _pcie(self, lines: bytes, line_base: int) -> None:
        """nvidia-smi CSV query tables with the PCIe link columns: the header maps the columns, the rows after it
        (the same number of comma-separated fields) are the GPUs."""
        for i, raw in enumerate(lines.split(b"\n")):
            if len(raw) > 4096:
                continue
            fields = raw.split(b",")
            head = _PCIE_HEAD.search(raw)
            if head:
                names = [f.strip().split(b" ")[0] for f in head.group(1).split(b",")]
                self.pcie_cols = (len(names), [names.index(c) if c in names else None for c in _PCIE_COLS])
                self.pcie_row = 0
            elif self.pcie_cols is not None and len(fields) == self.pcie_cols[0] and len(self.pcie) < KEEP:
                vals: list[Optional[int]] = []
                for idx in self.pcie_cols[1]:
                    m = re.match(rb"\s*([0-9]+)", fields[idx]) if idx is not None else None
                    vals.append(int(m.group(1)) if m else None)
                self.pcie.append((line_base + i, self.pcie_row, vals))
                self.pcie_row += 1
            elif self.pcie_cols is not None and raw.strip():
                self.pcie_cols = None       # the table ended

    def _data(self, ln: int, step: float, data: float, src: str) -> None:
        if len(self.data) < KEEP and step > 0:
            self.data.append((ln, step, min(data, step)))
            self.data_src = self.data_src or src

    def detect(self, train_start: Optional[int]) -> list[Anomaly]:
        """The anomaly when the readings show the run waiting most of its time."""
        nums: dict[str, Any] = {}
        first = last = 0
        recs = self.data[1:]
        if len(recs) >= MIN_RECORDS:
            step, data = sum(r[1] for r in recs), sum(r[2] for r in recs)
            if data >= DATA_SHARE * step:
                nums.update(data_pct=f"{100 * data / step:.0f}", data_s=fmt(data / len(recs)), step_s=fmt(step / len(recs)),
                            records=len(recs), pipeline=True)
                first, last = recs[0][0], recs[-1][0]
        if self.profiler is not None and self.profiler[1] >= 100 * DATA_SHARE:
            ln, pct, mean, calls = self.profiler
            nums.update(fetch_pct=f"{pct:.0f}", fetch_s=fmt(mean), fetch_calls=calls, pipeline=True)
            first, last = first or ln, max(last, ln)
        ds = self.ds if len(self.ds) >= MIN_BREAKDOWNS else self.ds_micro
        if len(ds) >= MIN_BREAKDOWNS:
            fb, st = median([r[1] for r in ds]), median([r[2] for r in ds])
            if fb > 0 and ((st >= STEP_MIN_MS and st >= STEP_RATIO * fb)
                           or (self.offload and st >= OFFLOAD_MIN_MS and st >= OFFLOAD_RATIO * fb)):
                nums.update(opt_ms=f"{st:.0f}", fb_ms=f"{fb:.0f}", opt_ratio=f"{st / fb:.1f}", offload=True)
                first, last = first or ds[0][0], max(last, ds[-1][0])
        if train_start is not None:
            spin = [s for s in self.power if len(s) >= 2 and s[0][0] > train_start
                    and all(u >= BUSY_UTIL and w <= POWER_SHARE * cap for _, w, cap, u in s)]
            if spin:
                worst = max(spin, key=lambda s: max(w / cap for _, w, cap, _ in s))
                nums.update(spin_gpus=len(worst), spin_w=max(w for _, w, _, _ in worst), spin_cap=worst[0][2],
                            spin_snaps=len(spin), comm=True)
                first, last = first or spin[0][0][0], max(last, spin[-1][-1][0])
        if self.pcie:       # a busy GPU is at work, training records or not (a server, a loop printing no metrics)
            slow = [(ln, g, v) for ln, g, v in self.pcie if ln > (train_start or 0) and v[2] is not None
                    and v[2] >= PCIE_BUSY and v[0] is not None and v[1] is not None and v[0] < v[1]]
            if slow:
                ln, g, v = slow[0]
                nums.update(pcie_gpu=g, pcie_util=v[2], pcie_gen=v[0], pcie_gmax=v[1], pcie_reads=len(slow), pcie=True)
                first, last = first or ln, max(last, slow[-1][0])
        if not nums:
            return []
        return [Anomaly("step_wait", "throughput-low", "error", first, max(first, last), None, 1, nums)]
