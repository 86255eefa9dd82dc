"""Sources of the throughput detector (throughput.py) that are parsed on their own: bounded series,
`nvidia-smi dmon` tables, and per-request decode rates printed by single-request servers and CLIs.

  nvidia-smi dmon   a header `# gpu   pwr gtemp ...  sm   mem ...` (any `-s` selection, `-o DT` adds date and
                    time columns), then one row of numbers per GPU per interval; the `sm` column is the share
                    of time a kernel ran. Rows are grouped into snapshots: a new one starts when the GPU
                    index does not increase.
  decode rates      llama.cpp `eval time = ... ( 24.80 ms per token,  40.32 tokens per second)` (not its
                    `prompt eval` line), Ollama `--verbose` `eval rate: 45.1 tokens/s` (not `prompt eval
                    rate`), FastChat's CLI `'speed (token/s)': 0.21`, TGI's router `time_per_token="25.3ms"`.
                    Each is one request's generation rate (tokens per second).
  loop timers       a training loop's own step time (`loop_step_time`): the PyTorch examples' AverageMeter
                    `Epoch: [1][30786/34406]  Time 0.783 (2.771)  Data ...` (the value, not the running
                    average; a line repeated per rank for the same iteration counts once), mmcv's `time: 0.430,
                    data_time: 0.006` (mmengine's without the comma), TensorFlow's tutorial trainers `(71.1 examples/sec;
                    3.600 sec/batch)`, Keras `938/938 [====] - 5s 5ms/step`, an interval's time `time/1000 steps: 104.1s`
                    (its mean step), pix2pix/CycleGAN's `(epoch: 3, iters: 400, time: 0.125, data: 0.003)` (compute
                    time per image), py-faster-rcnn's `speed: 0.412s / iter` (its timer's average so far), a loop's own
                    per-step timer field `step_time 1.187s` / `iter_time=212ms` / `batch_time: 0.4s`; and per-epoch wall times
                    (`End of epoch 29 / 200 \t Time Taken: 890 sec`, pix2pix/CycleGAN; CycleGAN-VC's `Time Elapsed for This
                    Epoch: 00:02:11`, a loop's `Epoch 12 took 131.4 seconds`), a separate source whose
                    samples are epochs: with a fixed epoch size a longer epoch is slower steps.
                    A report interval's wall time (pythia/mmf `iter: 300 train_loss: 2.7410 ... time(s): 282.1 s`, the
                    seconds since the last report: a fixed number of iterations, so its rise is the step time's), and
                    Composer's SpeedMonitor `Train throughput/samples_per_sec: 1194.0` (a rate, kept as the `rate` source; not
                    its `batches_per_sec`, which falls by design while a batch-size warm-up grows the batch).
"""
from __future__ import annotations

import re
from collections import deque
from typing import Optional

from llmtriage.detect.metric_anomaly import median as _median

HEAD, TAIL = 256, 512
DMON_ROWS = 512        # rows read after one dmon header

_DMON_HEAD = re.compile(rb"^#\s*(?:Date\s+Time\s+)?gpu\s+([A-Za-z0-9 \t]+?)\s*$", re.M)
_ROW = re.compile(rb"^\s*(?:[0-9]{8}\s+[0-9:]{8}\s+)?([0-9]+)((?:\s+(?:-|[0-9]+))+)\s*$")
DECODE_SRC = rb"tokens per second\)|eval rate: |speed \(token/s\)|time_per_token=\x22"
_DECODE = re.compile(rb"""(?:([0-9.]+) tokens per second\)|eval rate: +([0-9.]+) tokens/s|['\x22]speed \(token/s\)['\x22]: ([0-9.]+)"""
                     rb"""|time_per_token=\x22([0-9.]+)(ms|s|\xc2\xb5s|us)\x22)""")


LOOP_SRC = (rb"\bTime +[0-9.]+ +\( *[0-9.]+\)|[\s,]time: [0-9.]+,?\s+data_time: |[0-9](?:ms|us|s)/step\b|Time Taken: [0-9]|time/[0-9]+ ?steps: [0-9]"
            rb"|; [0-9.]+ sec/batch\)|\b(?:step|iter|batch)_time[ :=]+[0-9.]+ ?m?s\b|Train throughput/samples_per_sec: [0-9]|\btime\(s\): [0-9]|\bms/batch +[0-9]"
            rb"|iters: [0-9]+, time: [0-9]|Time Elapsed for This Epoch: [0-9]|speed: [0-9.]+s / iter|[Ee]poch [0-9]+ took [0-9]")
_LOOP = re.compile(rb"\bTime +([0-9.]+) +\( *[0-9.]+\)|[\s,]time: ([0-9.]+),?\s+data_time: |\b([0-9.]+)(ms|us|s)/step\b"
                   rb"|Time Taken: ([0-9.]+) ?s(?:ec)?\b|time/([0-9]+) ?steps: ([0-9.]+) ?s\b|; ([0-9.]+) sec/batch\)"
                   rb"|\b(?:step|iter|batch)_time[ :=]+([0-9.]+) ?(ms|s)\b|Train throughput/samples_per_sec: ([0-9.]+)"
                   rb"|\biter(?:ation)?:? +[0-9]+\b[^\n]*?\btime\(s\): ([0-9.]+) ?s\b|\bms/batch +([0-9.]+)"
                   rb"|\(epoch: [0-9]+, iters: [0-9]+, time: ([0-9.]+), data: [0-9.]+\)|Time Elapsed for This Epoch: ([0-9]+:[0-9]{2}:[0-9]{2})\b"
                   rb"|\bspeed: ([0-9.]+)s / iter\b|\b[Ee]poch [0-9]+ took ([0-9.]+) ?s(?:ec(?:ond)?s?)?\b")
_ITER = re.compile(rb"\[ *([0-9]+)\]\[ *([0-9]+)/[0-9]+\]")
_UNIT = {b"ms": 1e-3, b"us": 1e-6, b"s": 1.0}


# a one-line GPU monitor printed by a training script, wrapper or sidecar: "[gpu-monitor] GPU0 NVIDIA L4 util=0%
# mem=9.8GiB/23.0GiB", "[nvidia-smi] GPU0 RTX 3090 util 23%", "GPU 1: utilization: 97 %" - the GPU index, then
# (within 60 characters, no other percentage between) the utilisation. A snapshot row like nvidia-smi's.
MON_SRC = rb"\bGPU ?#?([0-9]{1,2})\b[^\n%|]{0,60}?\b(?:[Uu]til(?:ization|isation)?|GPU-Util)\s*[=:]?\s*([0-9]{1,3}) ?%"
# one reading for a process's or a node's GPUs, no index: `[GPUMonitorCallback] step 6: gpu_util=17% mem_used=61.5GiB`,
# `[monitor] node nid005312 gpu_util_avg=9% sm_active=0.09`, or the range a user read off nvidia-smi or a dashboard
# (`GPU-Util 8-15%`, `GPU util 3-8% during train step`: its upper end is the reading)
AGG_SRC = (rb"\bgpu_util(?:_avg)?\s*[=:]\s*([0-9]{1,3})(?:\.[0-9]+)? ?%"
           rb"|\bGPU[- _]?[Uu]til(?:ization|isation)?:?\s+[0-9]{1,3}\s*-\s*([0-9]{1,3}) ?%")
MON_ANCHOR = rb"\b[Uu]til(?:ization|isation)?\s*[=:]?\s*[0-9]{1,3} ?%"


def loop_step_time(seg: bytes) -> Optional[tuple[str, float, Optional[bytes]]]:
    """(source, seconds, iteration) from a training loop's own timer line, or None. The source is
    `loop` for one step's time, `epoch` for a whole epoch's; the iteration (`[30786/34406]`) lets a
    line printed once per rank count once."""
    m = _LOOP.search(seg)
    if m is None:
        return None
    if m.group(5) is not None:
        return "epoch", float(m.group(5)), None
    if m.group(6) is not None:      # an interval's time ("time/1000 steps: 104.1s"): its mean step
        return ("loop", float(m.group(7)) / int(m.group(6)), None) if int(m.group(6)) else None
    if m.group(8) is not None:      # TensorFlow's tutorial trainers: "(71.1 examples/sec; 3.600 sec/batch)"
        return "loop", float(m.group(8)), None
    if m.group(9) is not None:      # a loop's own per-step timer field: "step_time 1.187s", "iter_time=212ms"
        return "loop", float(m.group(9)) * _UNIT[m.group(10)], None
    if m.group(11) is not None:     # Composer's SpeedMonitor: "Train throughput/samples_per_sec: 1194.0", a rate
        r = float(m.group(11))
        return ("rate", 1.0 / r, None) if r > 0 else None
    if m.group(12) is not None:     # a report interval's wall time: "iter: 300 train_loss: 2.74 ... time(s): 282.1 s"
        return "loop", float(m.group(12)), None
    if m.group(13) is not None:     # PyTorch's example loops: "| step    100 | lr 0.10000 | ms/batch 3637.69 | train loss"
        return "loop", float(m.group(13)) * 1e-3, None
    if m.group(14) is not None:     # pytorch-CycleGAN-and-pix2pix: "(epoch: 3, iters: 400, time: 0.125, data: 0.003)"
        return "loop", float(m.group(14)), None
    if m.group(15) is not None:     # an epoch's wall clock: "Time Elapsed for This Epoch: 00:02:11" (CycleGAN-VC)
        sec = secs(m.group(15))
        return ("epoch", sec, None) if sec else None
    if m.group(16) is not None:     # py-faster-rcnn / Faster-RCNN_TF: "speed: 0.412s / iter" (the timer's average so far)
        return "loop", float(m.group(16)), None
    if m.group(17) is not None:     # an epoch's wall time: "Epoch 12 took 131.4 seconds"
        return "epoch", float(m.group(17)), None
    it = _ITER.search(seg, 0, m.start())
    key = it.group(1) + b":" + it.group(2) if it else None
    if m.group(3) is not None:
        return "loop", float(m.group(3)) * _UNIT[m.group(4)], key
    return "loop", float(m.group(1) or m.group(2)), key


def secs(clock: bytes) -> Optional[float]:
    """`1:02:03` -> 3723.0 (None when a part is not a number)."""
    try:
        parts = [int(x) for x in clock.split(b":")]
    except ValueError:
        return None
    s = 0
    for p in parts:
        s = s * 60 + p
    return float(s)


class Series:
    """A bounded series of (line, value): the first HEAD and the last TAIL values, and a count."""

    def __init__(self) -> None:
        self.head: list[tuple[int, float]] = []
        self.tail: deque[tuple[int, float]] = deque(maxlen=TAIL)
        self.n = 0

    def add(self, line: int, v: float) -> None:
        self.n += 1
        if len(self.head) < HEAD:
            self.head.append((line, v))
        else:
            self.tail.append((line, v))

    def values(self) -> list[tuple[int, float]]:
        return self.head + list(self.tail)


def decode_rate(seg: bytes) -> Optional[float]:
    """One request's generation rate in tokens/s read from a server's or CLI's timing line, or None
    (a prompt-processing line, llama.cpp's sampler timing, or no rate)."""
    m = _DECODE.search(seg)
    if m is None or b"prompt eval" in seg[:m.end()] or b"sample time" in seg[:m.end()]:
        return None
    if m.group(4) is not None:
        per = float(m.group(4)) * {b"ms": 1e-3, b"s": 1.0}.get(m.group(5), 1e-6)
        return 1.0 / per if per > 0 else None
    return float(m.group(1) or m.group(2) or m.group(3))


def dmon_snapshots(view: bytes, start: int, line: int, head: int = -1) -> list[list[tuple[int, Optional[int], Optional[int], int]]]:
    """The snapshots of an `nvidia-smi dmon` table whose header line starts at `view[start]` (on `line`)
    and whose `#` is at `head` (past a launcher's line prefix, `3: # gpu ...`; the line start when -1):
    [(sm %, framebuffer MB used or None, None, line)] per GPU, grouped by interval. Empty when the
    header has no `sm` column. Rows carrying the header's prefix are read without it."""
    head = start if head < 0 else head
    eol = view.find(b"\n", head)
    m = _DMON_HEAD.match(view[head:eol if eol >= 0 else len(view)])
    if m is None:
        return []
    prefix = view[start:head]
    cols = m.group(1).split()
    if b"sm" not in cols:
        return []
    sm, fb = cols.index(b"sm"), (cols.index(b"fb") if b"fb" in cols else None)
    snaps: list[list[tuple[int, Optional[int], Optional[int], int]]] = []
    pos, ln, last_gpu, rows = head + m.end() + 1, line, None, 0
    while pos < len(view) and rows < DMON_ROWS:
        end = view.find(b"\n", pos)
        end = len(view) if end < 0 else end
        text = view[pos:end]
        if prefix.strip():
            text = _unprefix(text, prefix.rstrip())
        ln += 1
        pos = end + 1
        if text.lstrip().startswith(b"#"):
            continue                        # the units line, or the header printed again
        r = _ROW.match(text)
        if r is None:
            if text.strip():
                break                       # the table ended
            continue
        vals = r.group(2).split()
        if len(vals) != len(cols) or vals[sm] == b"-":
            continue
        gpu = int(r.group(1))
        if last_gpu is None or gpu <= last_gpu:
            snaps.append([])
        last_gpu = gpu
        used = int(vals[fb]) if fb is not None and vals[fb] != b"-" else None
        snaps[-1].append((int(vals[sm]), used, None, ln))
        rows += 1
    return snaps


def _unprefix(text: bytes, prefix: bytes) -> bytes:
    """A dmon row without the header's line prefix: the same bytes, or a prefix of the same kind with
    other values (a per-line time stamp)."""
    if text.startswith(prefix):
        return text[len(prefix):]
    from llmtriage.engine.logparse import split_prefix   # deferred: only rows under a prefixed header
    return split_prefix(text.decode("utf-8", "replace")).text.encode("utf-8")


def bar_total(view: bytes, end: int) -> bytes:
    """The total of the tqdm bar whose rate ends at `end` (`| 120/500 [...` -> b"500")."""
    j = view.rfind(b" [", max(0, end - 64), end)
    i = view.rfind(b"/", max(0, j - 16), j) if j >= 0 else -1
    return view[i + 1:j] if i >= 0 else b""


def climb(vals: list[tuple[int, float]], factor: float) -> Optional[tuple[int, int, float]]:
    """(first, last, median) of a climb: >= 4 records in a row, each >= 10% slower than the one before,
    from a normal step time (<= 1.5x the median) to >= climb_factor x the median (memory spilling
    to host, throttling, a leak). An evaluation or save pause jumps once and decays: no climb. The
    climb that ends the log wins, else the steepest."""
    xs = [v for _, v in vals]
    med = _median(xs)
    best: Optional[tuple[int, int]] = None
    i = 0
    for j in range(1, len(xs) + 1):
        if j < len(xs) and xs[j] >= 1.1 * xs[j - 1]:
            continue
        end = j - 1            # xs[i..end] rises at every record
        if (end - i + 1 >= 4 and xs[i] <= 1.5 * med and xs[end] >= factor * med
                and (best is None or end == len(xs) - 1 or xs[end] > xs[best[1]])):
            best = (i, end)
        i = j
    return None if best is None or med <= 0 else (best[0], best[1], med)


SHORT_MIN = 8          # records: a rise read on fewer than rise_min_samples ...


def short_rise(vals: list[tuple[int, float]], error: float) -> bool:
    """A step-time series shorter than `rise_min_samples` whose slowdown is beyond doubt: >= SHORT_MIN records,
    the last quarter's median >= `error` x the first quarter's (rise_error), and slower again at each of the last
    three records (it persists to the end, not an evaluation or save pause that passed). GPT-NeoX / Megatron print
    one `elapsed time per iteration` per log interval (100 iterations): eight of them are 800 iterations."""
    if len(vals) < SHORT_MIN:
        return False
    xs = [v for _, v in vals]
    k = max(4, len(xs) // 4)
    e, late = _median(xs[:k]), _median(xs[-k:])
    return e > 0 and late >= error * e and xs[-1] > xs[-2] > xs[-3] > xs[-4]
