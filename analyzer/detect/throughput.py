"""throughput-low: step time and GPU use read from progress, timer and nvidia-smi lines.

Sources (one compiled bytes regex finds them in a block; tqdm bars are sampled, at most
`BARS_PER_BLOCK` per block, and every series is bounded to a head and a tail):
  tqdm              `| 120/5000 [10:01<6:47:12, 5.01s/it]` (`it/s` inverted), labelled bars only when the
                    label reads as training; `Processed prompts: ... [04:02<00:00` is generation time
  Megatron          `elapsed time per iteration (ms): 1234.5`
  DeepSpeed         `CurrSamplesPerSec=12.3` (its throughput timer; step time ~ 1/rate)
  verl, SkyRL       `timing_s/step:165.3 - ... timing_s/gen:131.5` (`timing_s/save_checkpoint:`), `'timing/step': 569.7`
  a loop's own      `3/16, train_loss: 0.6612, step time: 0.2268` (MONAI tutorials; seconds)
  vLLM              `Avg generation throughput: 243.2 tokens/s, Running: 64 reqs`
  nvidia-smi        table rows `51230MiB /  81920MiB |      0%` and CSV rows `0, 0 %, 52311 MiB`
                    (`0, NVIDIA A800-SXM4-80GB, 0 %, 52311 MiB` with text columns between)
  nvidia-smi dmon   its `sm` column, rows grouped per interval (throughput_sources.py)
  a monitor         one reading without a GPU index: `[GPUMonitorCallback] step 6: gpu_util=17%`, `gpu_util_avg=9%`,
                    a range read off a dashboard (`GPU util 3-8% during train step`: the upper end)
  one request       llama.cpp `eval time = ... tokens per second)`, Ollama `eval rate:`, FastChat `'speed (token/s)'`,
                    TGI `time_per_token="..."` (throughput_sources.py)
  npu-smi           chip rows `| 0  | 0000:C1:00.0  | 0   0    / 0   19120/ 65536  |` (AICore %, HBM MB)
Context: the end of training (`train_runtime`), a stop from outside while running (Slurm `DUE TO TIME LIMIT`, `^C`,
`KeyboardInterrupt`), `--enforce-eager`. Training starts at the first loss record, else at the first step sample.

Detections (thresholds in `metrics.Thresholds`, documented in docs/METRICS.md): step time rising
mid-run, periodic long steps, GPUs idle at 0% in snapshots taken during training, GPU memory far below capacity,
generation dominating RL steps, checkpoint saves taking a large share of the run's time, slow decode per running
request. One finding gathers them. Severity (docs/METRICS.md, "When a slowdown is an error"): a warning, because the job
did not fail; an error when the job was stopped from outside (time limit, interrupt) while slow, or
when most snapshots taken during training show the GPUs idle (the job makes almost no use of them) or
every GPU at low utilisation, or when one request decodes below 1 token/s. This module reads the lines; the
judgement of what was read is throughput_judge.py.
"""
from __future__ import annotations

import re
from collections import Counter, deque
from typing import Any, Optional

from llmtriage.engine.fastre import Lazy, compile_bytes, raw_of, search_raw, spans
from llmtriage.detect.metric_anomaly import Anomaly, median as _median
from llmtriage.detect.metrics import THRESHOLDS, Thresholds
from llmtriage.detect.phase import classify_bar, lr_postfix
from llmtriage.detect.notebook_bar import notebook_sample
from llmtriage.detect.throughput_serving import ServeSeries
from llmtriage.detect.throughput_util import new_snapshot, search_unprefixed
from llmtriage.detect.throughput_sources import (AGG_SRC, DECODE_SRC, LOOP_SRC, MON_ANCHOR, MON_SRC, Series, bar_total as _bar_total, dmon_snapshots,
                                                   decode_rate, loop_step_time, secs)
from llmtriage.detect.throughput_columns import COLS_SRC, column_sample

BARS_PER_BLOCK = 24
_STOP_KEYS = (b"DUE TO TIME LIMIT", b"^C", b"KeyboardInterrupt")
_BAR_ENDS = (b"s/it,", b"s/it]", b"it/s,", b"it/s]")
TAIL = 512

# frequent lines (progress, timers, engine stats) and rare ones (snapshots, context), found apart: after
# FULL_ENTRIES parsed entries only the last 2 KiB of every SAMPLE_EVERY-th block is read for the frequent ones
_FREQ_SRC = (rb"s/it[\],]|it/s[\],]|elapsed time per iteration|SamplesPerSec=|timing_s/step:|timing/step['\x22]:|Avg generation throughput:"
             rb"|gen throughput \(token/s\):|samples/sec|tokens_per_second(?:_per_gpu)?[=:]|tps: |\| tps [0-9]|Tokens/sec |[0-9] Hz\b|step time: [0-9]|" + DECODE_SRC + b"|" + LOOP_SRC + b"|" + COLS_SRC)
_RARE_SRC = (rb"MiB\s*/\s*[0-9]+MiB\s*\|\s*[0-9]+%|[0-9] ?%, +[0-9]+ ?MiB|0000:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9] +\||"
             rb"#\s*(?:Date\s+Time\s+)?gpu\s|train_runtime|Running training|DUE TO TIME LIMIT|\^C|KeyboardInterrupt|enforce.eager|[Ss]aving (?:model )?checkpoint|" + MON_ANCHOR + b"|" + AGG_SRC)
_ANCHOR_SRC = _FREQ_SRC + b"|" + _RARE_SRC
FULL_ENTRIES = 2000
SAMPLE_EVERY = 4
_BAR = rb"([^\n|]{0,80}?)\s*[0-9]{1,3}%\|[^|\n]*\|\s*([0-9]+)/([0-9]+) \[([0-9:]+)<([0-9:?]+),\s*([0-9.]+)(s/it|it/s)"
_MEG = rb"elapsed time per iteration \(ms\):\s*([0-9.]+)"
_DS = rb"(?:CurrSamplesPerSec|[^A-Za-z]SamplesPerSec)=([0-9.]+)"
_VERL = rb"""(?:timing_s/step:|['"]timing/step['"]:\s*)([0-9.]+)"""
# a training loop's own rate: "Speed 521.79 samples/sec", "tokens_per_second=1,781" (torchtune's
# "tokens_per_second_per_gpu:576.6"), torchtitan's "tps: 6,452", NeMo Automodel's "| tps 6484.78(405.30/gpu) |",
# mlx-lm's "Iter 10: ... Tokens/sec 192.224", a loss line's samples per second in Hz (voxceleb_trainer:
# "Processing 19200 of 1092009:Loss 13.9 TEER/TAcc 21.1% - 312.50 Hz"; a loss on the line keeps "16000 Hz" out)
_RATE = (rb"([0-9][0-9,]*(?:\.[0-9]+)?) ?samples/sec|(?:tokens_per_second(?:_per_gpu)?[=:]|tps:|\| tps(?= [0-9])|Tokens/sec) *([0-9][0-9,]*(?:\.[0-9]+)?)"
         rb"|[Ll]oss\b[^\n]*? ([0-9][0-9,]*(?:\.[0-9]+)?) Hz\b")
_VERL_GEN = rb"""(?:timing_s/gen:|['"]timing/generate['"]:\s*)([0-9.]+)"""
# a loop's own step time in seconds (MONAI tutorials: "3/16, train_loss: 0.6612, step time: 0.2268")
_STEPT = rb"step time: ([0-9.]+)(?![0-9.])(?!\s*ms\b)"
_VERL_SAVE = rb"timing_s/save_checkpoint:([0-9.]+)"
_VLLM = rb"Avg prompt throughput: ([0-9.]+) tokens/s, Avg generation throughput: ([0-9.]+) tokens/s, Running: ([0-9]+) req"
# SGLang's scheduler: "Decode batch, #running-req: 4, ..., gen throughput (token/s): 429.62, #queue-req: 3"
_SGL = rb"Decode batch[.,] #running-req: ([0-9]+),[^\n]*?gen throughput \(token/s\): ([0-9.]+)"
_SMI = rb"([0-9]+)MiB\s*/\s*([0-9]+)MiB\s*\|\s*([0-9]+)%"
# `--query-gpu=index,utilization.gpu,memory.used`; text columns (name, pci.bus_id) may stand between the
# index and the utilisation: `0, NVIDIA A800-SXM4-80GB, 14 %, 41233 MiB`; no index, utilization.memory: `9 %, 6 %, 5123 MiB`
_SMI_CSV = rb"^\s*(?:([0-9]{4}/[0-9]{2}/[0-9]{2} [0-9:.]+), +)?(?:([0-9]+), +)?(?:[^,\n]*[A-Za-z][^,\n]*, +){0,3}([0-9]+) ?%, +(?:[0-9]+ ?%, +)?([0-9]+) ?MiB"
_NPU_SMI = rb"\|\s*[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9]\s+\|\s*([0-9]+)\s+[0-9]+\s*/\s*[0-9]+\s+([0-9]+)\s*/\s*([0-9]+)\s*\|"
_STOP = rb"DUE TO TIME LIMIT|\^C|KeyboardInterrupt"
_LABEL_PREFIX = re.compile(r"^(?:\d{4}-\d\d-\d\dT[0-9:.,]+Z?\s*)?(?:\S+:(?:\s+|$))?(?:[\[(][^\])]*[\])]:?\s*)*")
_EAGER = re.compile(rb"""enforce_eager['"]?\s*[:=]\s*True|--enforce-eager(?:\s|$)|enforce_eager=true""")


class _Rx(Lazy):
    def _make_anchor(self) -> Any:
        return compile_bytes(_ANCHOR_SRC)

    def _make_anchor_raw(self) -> Any:
        return raw_of(self.anchor)

    def _make_freq(self) -> Any:
        return compile_bytes(_FREQ_SRC)

    def _make_freq_raw(self) -> Any:
        return raw_of(self.freq)

    def _make_rare(self) -> Any:
        return compile_bytes(_RARE_SRC)

    def _make_rare_raw(self) -> Any:
        return raw_of(self.rare)

    def _make_gates(self) -> Any:
        # one literal each: RE2 skips to a literal's first byte (memchr), an alternation of them cannot
        return [(c, raw_of(c)) for c in map(compile_bytes, (rb"MiB", rb"0000:", rb"train_runtime", rb"TIME LIMIT", rb"\^C",
                                                             rb"KeyboardInterrupt", rb"enforce.eager", rb"aving",
                                                             rb"Running training", rb"# gpu", rb"#Date", rb"gpu_util", rb"til "))]

    def _make_parts(self) -> Any:
        return {k: re.compile(v) for k, v in (("bar", _BAR), ("meg", _MEG), ("ds", _DS), ("rate", _RATE), ("verl", _VERL),
                                               ("gen", _VERL_GEN), ("save", _VERL_SAVE), ("stept", _STEPT), ("vllm", _VLLM), ("sgl", _SGL), ("smi", _SMI),
                                               ("csv", _SMI_CSV), ("npu", _NPU_SMI), ("mon", MON_SRC), ("agg", AGG_SRC), ("stop", _STOP))}


_RX = _Rx()


class ThroughputTracker:
    def __init__(self, th: Optional[Thresholds] = None):
        self.th = th or THRESHOLDS
        self.steps: dict[str, Series] = {}          # source -> step time (s)
        self.gen: deque[float] = deque(maxlen=TAIL)         # generation seconds per step (verl) / rollout (vLLM bar)
        self.gen_step: deque[float] = deque(maxlen=TAIL)    # verl step seconds that go with `gen`
        # seconds per prompt of generation bars not yet at 100%, and whether the last bar drawn was unfinished
        self.gen_bar = Series()
        self.gen_open = False
        self.decode: deque[tuple[float, int]] = deque(maxlen=TAIL)   # (tokens/s, running requests), decode only
        self.decode_lines = (0, 0)         # the first and the last line a decode rate was read from
        self.serve = ServeSeries()         # a server's periodic metrics: rate, running, queued, KV cache (stalls)
        self.last_entry_line = 0
        self.snaps: list[list[tuple[int, Optional[int], Optional[int], int]]] = []   # [(util, used, total, line)]
        self._snap_line, self._snap_table = -10, False     # the last row's line, a table row? (4 lines apart with a MIG line)
        self._snap_stamp: Optional[bytes] = None     # the timestamp column of the last `--query-gpu` row
        self._last_bar: dict[tuple[int, int], tuple[int, str]] = {}
        self.finished_line = 0
        self.stop: Optional[tuple[str, int]] = None
        self.eager = False
        self.entries = 0
        self.speeds: dict[str, float] = {}          # the Trainer's end-of-run train_samples/steps_per_second
        self.saves: list[int] = []                  # lines of checkpoint saves (their steps are slow by design)
        self.save_time = [0.0, 0.0, 0, 0]           # verl: seconds saving, seconds of all steps, first/last save line
        self._blocks = 0
        self.reruns = 0                             # runs started after an earlier run of the log finished
        self._loop_iter: Optional[bytes] = None     # the iteration of the last loop-timer line (ranks repeat it)

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        R = _RX
        if self.entries < FULL_ENTRIES:
            hits = spans(R.anchor, R.anchor_raw, view)
        else:
            hits = spans(R.rare, R.rare_raw, view) if any(search_raw(r, c, view) for c, r in R.gates) else []
            self._blocks += 1
            if self._blocks % SAMPLE_EVERY == 0:
                hits += spans(R.freq, R.freq_raw, view, max(0, len(view) - 2048))
                hits.sort()
        if not hits:
            return
        P = R.parts
        last_ls = -1
        # a block dense with bar redraws: an even sample of each bar's redraws (bars told apart by their
        # total: a training and an evaluation bar drawn in turn are sampled alike), its last one included
        is_bar = [_bar_total(view, s) if view[s:e].endswith(_BAR_ENDS) else None for s, e in hits]
        nbars = Counter(b for b in is_bar if b is not None)
        seen: Counter[bytes] = Counter()
        nl = counted = 0
        for (start, end), bar in zip(hits, is_bar):
            key = view[start:end]
            if bar is not None:
                seen[bar] += 1
                stride = -(-nbars[bar] // BARS_PER_BLOCK)
                if stride > 1 and seen[bar] % stride and seen[bar] != nbars[bar]:
                    continue
            ls = view.rfind(b"\n", 0, start) + 1
            if ls == last_ls and key not in _STOP_KEYS:     # a ^C drawn over a bar still counts
                continue
            last_ls = ls
            le = view.find(b"\n", end)
            nl += lines.count(b"\n", counted, ls)
            counted = ls
            self.entries += 1
            if key.startswith(b"#"):        # an nvidia-smi dmon table: its rows follow the header
                self._add_snaps(dmon_snapshots(view, ls, line_base + nl, start))
                continue
            try:
                self._line(P, view[ls:le if le >= 0 else len(view)], key, line_base + nl)
            except ValueError:      # a number the patterns admit but float() does not (".812.4"): no sample
                pass

    def _add_snaps(self, snaps: list[list[tuple[int, Optional[int], Optional[int], int]]]) -> None:
        for snap in snaps:
            if len(self.snaps) <= 256:
                self.snaps.append(snap)
        if snaps:
            self._snap_line = snaps[-1][-1][3] + 10     # (a later table row is not a separate snapshot's start)

    def _add(self, source: str, line: int, v: float) -> None:
        s = self.steps.get(source)
        if s is None:
            s = self.steps[source] = Series()
        s.add(line, v)

    def _line(self, P: dict[str, Any], seg: bytes, key: bytes, line: int) -> None:
        self.last_entry_line = line
        if key.startswith(b"enforce"):
            self.eager = self.eager or (_EAGER.search(seg) is not None and b"eager mode, set" not in seg)   # (vLLM's hint)
            return
        if key.endswith(b"heckpoint"):
            if len(self.saves) < 4096:
                self.saves.append(line)
            return
        if key == b"Running training":
            if self.finished_line:      # a new run after an earlier one finished: the log has not finished
                self.finished_line = 0
                self.reruns += 1
            return
        if key == b"train_runtime":
            self.finished_line = line
            for name in ("train_samples_per_second", "train_steps_per_second"):
                m = re.search(name.encode() + rb"""['"]?\s*:\s*['"]?([0-9.]+)""", seg)
                if m:
                    self.speeds[name] = float(m.group(1))
            return
        if key in _STOP_KEYS:
            if self.stop is None:
                self.stop = (key.decode(), line)
            return
        if key.endswith((b"s/it,", b"s/it]", b"it/s,", b"it/s]")):
            m = P["bar"].search(seg)
            if m is None:
                if nb := notebook_sample(seg, self._last_bar):     # the Trainer's notebook bar
                    self._add(nb[0], line, nb[1])
                return
            label = _LABEL_PREFIX.sub("", m.group(1).decode("utf-8", "replace")).strip()   # rank / host prefixes
            rate = float(m.group(6))
            sec = rate if m.group(7) == b"s/it" else (1.0 / rate if rate else None)
            if b"Processed prompts" in seg or b"generat" in seg.lower():
                el = secs(m.group(4))
                if m.group(2) == m.group(3) and el:
                    self.gen.append(el)
                elif sec is not None and int(m.group(2)) >= 2:
                    self.gen_bar.add(line, sec)
                self.gen_open = m.group(2) != m.group(3)
                return
            kind = classify_bar(label) if label else "training"
            if kind != "training" and lr_postfix().search(seg, m.end(1)):
                kind = "training"   # the postfix names a learning rate: the training loop's bar (label = a job name)
            if kind != "training" or sec is None:
                return
            n, total = int(m.group(2)), int(m.group(3))
            if n < 2 or self._last_bar.get((total, 0)) == (n, label):
                return      # the first steps include start-up; a redraw of the same step adds nothing
            if len(self._last_bar) > 256:    # (a per-epoch bar, "Epoch 3: 469/469", is a new bar at each epoch)
                self._last_bar.clear()
            self._last_bar[(total, 0)] = (n, label)
            self._add(f"bar/{total}", line, sec)
            return
        for src, scale in (("meg", 1e-3), ("verl", 1.0), ("stept", 1.0)):
            m = P[src].search(seg)
            if m:
                self._add(src, line, float(m.group(1)) * scale)
                if src == "verl":
                    self.save_time[1] += float(m.group(1))
                    sv = P["save"].search(seg)
                    if sv:
                        self.save_time[0] += float(sv.group(1))
                        self.save_time[2] = self.save_time[2] or line
                        self.save_time[3] = line
                    g = P["gen"].search(seg)
                    if g:
                        self.gen.append(float(g.group(1)))
                        self.gen_step.append(float(m.group(1)))
                return
        m = P["ds"].search(seg)
        if m:
            r = float(m.group(1))
            if r > 0:
                self._add("ds", line, 1.0 / r)
            return
        m = P["rate"].search(seg)
        if m:
            r = float((m.group(1) or m.group(2) or m.group(3)).replace(b",", b""))
            if r > 0:
                self._add("rate", line, 1.0 / r)
            return
        m = P["vllm"].search(seg)
        if m:
            prompt, gen, running = float(m.group(1)), float(m.group(2)), int(m.group(3))
            self.serve.add_vllm(seg, line, gen, running)
            if running and prompt == 0:
                self.decode.append((gen / running, running))
                self.decode_lines = (self.decode_lines[0] or line, line)
            return
        lt = loop_step_time(seg) or column_sample(seg)      # (columns: throughput_columns.py)
        if lt is not None:          # a loop's own timer (AverageMeter, mmcv, Keras) or an epoch's wall time
            if lt[2] is None or lt[2] != self._loop_iter:
                self._add(lt[0], line, lt[1])
            self._loop_iter = lt[2]
            return
        r = decode_rate(seg)
        if r is not None:           # one request's rate (llama.cpp, Ollama, FastChat, TGI)
            self.decode.append((r, 1))
            self.decode_lines = (self.decode_lines[0] or line, line)
            return
        m = P["sgl"].search(seg)
        if m:
            running, gen = int(m.group(1)), float(m.group(2))
            self.serve.add_sglang(seg, line, gen, running)
            if running:
                self.decode.append((gen / running, running))
                self.decode_lines = (self.decode_lines[0] or line, line)
            return
        m = P["smi"].search(seg)
        if m:
            row: tuple[int, Optional[int], Optional[int], int] = (int(m.group(3)), int(m.group(1)), int(m.group(2)), line)
        elif m := P["npu"].search(seg):     # npu-smi: AICore(%) then HBM used / total
            row = (int(m.group(1)), int(m.group(2)), int(m.group(3)), line)
        elif m := search_unprefixed(P["csv"], seg):
            row = (int(m.group(3)), int(m.group(4)), None, line)
        elif m := P["mon"].search(seg):     # a one-line monitor: GPU index and utilisation only
            row = (int(m.group(2)), None, None, line)
        elif m := P["agg"].search(seg):     # a training callback's or a node monitor's one reading for all its GPUs
            row = (int(m.group(1) or m.group(2)), None, None, line)
        else:
            return
        if line - self._snap_line > (4 if m.re is P["smi"] and self._snap_table else 3) or not self.snaps or new_snapshot(m, _SMI_CSV, MON_SRC, self._snap_stamp):
            self.snaps.append([])
        self._snap_stamp, self._snap_table = (m.group(1) if m.re.pattern == _SMI_CSV else None), m.re is P["smi"]
        self._snap_line = line
        if len(self.snaps) <= 256:
            self.snaps[-1].append(row)

    def summary(self) -> dict[str, Any]:
        """report.extra["throughput"]: what was read (empty when nothing was)."""
        d: dict[str, Any] = {}
        series = max(self.steps.items(), key=lambda kv: kv[1].n, default=None)
        if series is not None:
            vals = [v for _, v in series[1].values()]
            d.update(source=series[0].split("/")[0], step_samples=series[1].n,
                     median_step_s=round(_median(vals), 4), last_step_s=round(vals[-1], 4))
        if self.snaps:
            d["gpu_snapshots"] = len(self.snaps)
        if self.decode:
            d["decode_tok_s_per_request"] = round(_median([x for x, _ in self.decode]), 3)
        d.update(self.speeds)
        return d

    def detect(self, train_start: Optional[int]) -> list[Anomaly]:
        from llmtriage.detect.throughput_judge import judge   # (the judgement lives apart: throughput_judge.py)
        return judge(self, train_start)
