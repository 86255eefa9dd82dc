"""metric-slower-than-stated-speed: the run measures far slower than a speed the log itself states for the same job.

Users who find a job slow paste its log with a note of the speed they compare against: a `#` line they add
between the job's own lines ("# previous run with bitsandbytes 0.40.2: 250/250 [14:02<00:00, 3.37s/it]",
"# same config on a single node: approx flops per GPU: 148.9TFLOPS", "# expected ~3014 tokens/s per GPU",
"# 对比：同样数据的 7B LoRA 预计 30h（3.8s/it）"). The job prints the same quantity as it runs. When the run's
steady value is at least `FACTOR` times slower than the fastest stated one, the job runs far below what the same
job achieved (or is documented to achieve) elsewhere: a version, a setting or the hardware path regressed.

Quantities, read alike from notes and from the job's lines (a note's own numbers never count as the run's):
  step      seconds per step: `3.37s/it`, `0.28 it/s` (inverted), `43.69 s/step`, Megatron's `elapsed time per
            iteration (ms): 4635.1`; bars of loading, tokenising, evaluating or generating are not steps
  tokens    `4.98 tokens/s`, `tok/s`, `token/s`, `tokens/sec`, `gen throughput (token/s): 38.12`, `tokens_per_second=1781`
  samples   `27.6 samples/sec`, `samples/sec: 27.6`, `train_samples_per_second = 0.394`
  tflops    `44.8TFLOPS`, `TFLOPs: 44.8`
A per-device quantity (`tokens/s/gpu`, `per GPU`, `_per_gpu`) is compared only with a per-device one. The run's
value is the median of its readings after the first quarter (warm-up), at least `MIN_READINGS` of them (one
end-of-run average such as `train_samples_per_second` is a whole run's reading and counts alone). A note that
states a slower or equal speed, or one within `FACTOR` of the run's, raises nothing: the run is as fast as its
reference. An error: the user's own yardstick shows the job several times slower than it should be.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median
from llmtriage.engine.fastre import Gate

FACTOR = 2.0
MIN_READINGS = 3
KEEP = 4096            # readings kept per quantity (the first ones)
MAX_NOTES = 64
MAX_RUN_LINES = 20000  # job lines read for readings; after that only note lines are looked for (a long log's hot path)

# a note: a line the user added, starting with `#` (not a C preprocessor line, a shebang, an nvidia-smi dmon header)
_NOTE = re.compile(rb"^\s*#(?![!#])(?!\s*(?:include|define|if|endif|pragma|gpu\b|Date\b|idx\b))")
_GATE = re.compile(rb"s/it|it/s|s/step|iteration \(ms\)|(?i:tok(?:en)?s?(?:/s|_per_second|/sec))|(?i:token/s)|samples|TFLOP")
# the same text for RE2 (whose case folding is a superset of `re`'s on bytes): finds the lines `_GATE` may match
_LINE_GATE = Gate(_GATE.pattern)
_NUM = rb"([0-9][0-9,]*(?:\.[0-9]+)?)"
_STEP = re.compile(_NUM + rb"\s*(s/it|it/s|s/step|sec/it)\b|elapsed time per iteration \(ms\):\s*" + _NUM)
_TOK = re.compile(_NUM + rb"\s*(?i:tok(?:en)?s?)/s(?:ec)?\b|(?i:tok(?:en)?s?)(?:/s(?:ec)?|_per_second(?:_per_gpu)?)\)?\s*[:=]\s*" + _NUM)
_SAMPLES = re.compile(_NUM + rb"\s*samples/s(?:ec)?\b|samples(?:/sec|_per_second)\s*[:=]\s*" + _NUM)
_TFLOPS = re.compile(_NUM + rb"\s*TFLOPS|TFLOPs?(?:/s)?\s*[:=]\s*" + _NUM)
_PER_DEV = re.compile(rb"(?i)/gpu|per[ _-]?gpu|/device|per[ _-]device|/card|\(?[0-9.]+/gpu\)|\xe6\xaf\x8f\xe5\x8d\xa1")   # (每卡)
_NOT_STEP = re.compile(rb"(?i)checkpoint shards|tokeniz|map\b|filter|generat|eval|predict|download|processed prompts|loading|capturing|examples/s|shards")
_SUMMARY = re.compile(rb"train_(?:samples|steps)_per_second")
# a quantity's direction: True where a larger number is faster
_FASTER_UP = {"step": False, "tokens": True, "samples": True, "tflops": True}


def _readings(line: bytes) -> list[tuple[str, float]]:
    """(quantity, value) pairs read from one line (step quantities in seconds per step)."""
    out: list[tuple[str, float]] = []
    low = line.lower()       # the literals each quantity's pattern needs (ASCII case folding, as `re.I` on bytes)
    for m in (_STEP.finditer(line) if b"s/it" in line or b"it/s" in line or b"s/step" in line or b"sec/it" in line
              or b"elapsed time per iteration" in line else ()):
        if _NOT_STEP.search(line[max(0, m.start() - 80):m.start()]):
            continue
        try:
            if m.group(3):
                v = float(m.group(3).replace(b",", b"")) / 1000
            else:
                v = float(m.group(1).replace(b",", b""))
                v = 1 / v if m.group(2) == b"it/s" and v > 0 else v
        except ValueError:
            continue
        if v > 0:
            out.append(("step", v))
        break
    for name, rx in (("tokens", _TOK), ("samples", _SAMPLES), ("tflops", _TFLOPS)):
        if b"tok" not in low if rx is _TOK else b"samples" not in line if rx is _SAMPLES else b"TFLOP" not in line:
            continue
        m = rx.search(line)
        if m:
            try:
                v = float((m.group(1) or m.group(2)).replace(b",", b""))
            except ValueError:
                continue
            dev = name != "tflops" and _PER_DEV.search(line, m.start(), m.end() + 12) is not None
            if v > 0:
                out.append((name + ("/dev" if dev else ""), v))
    return out


class StatedSpeeds:
    """Speeds stated in notes and the speeds the job prints, block by block."""

    def __init__(self) -> None:
        self.notes: dict[str, list[tuple[float, int]]] = {}      # quantity -> [(value, line)]
        self.run: dict[str, list[tuple[float, int, bool]]] = {}  # quantity -> [(value, line, end-of-run summary)]
        self._run_lines = 0

    def feed(self, lines: bytes, line_base: int) -> None:
        if not _LINE_GATE(lines) or _GATE.search(lines) is None:
            return
        full = self._run_lines >= MAX_RUN_LINES
        if full and b"#" not in lines:
            return
        for i, raw in _LINE_GATE.lines(lines):     # the lines holding a `_GATE` match (and more: checked below)
            if len(raw) > 4096 or _GATE.search(raw) is None:
                continue
            note = _NOTE.match(raw) is not None
            if not note:
                if full:
                    continue
                self._run_lines += 1
            for q, v in _readings(raw):
                if note:
                    if sum(map(len, self.notes.values())) < MAX_NOTES:
                        self.notes.setdefault(q, []).append((v, line_base + i))
                else:
                    rows = self.run.setdefault(q, [])
                    if len(rows) < KEEP:
                        rows.append((v, line_base + i, _SUMMARY.search(raw) is not None))

    def detect(self) -> list[Anomaly]:
        """The anomaly for the quantity whose run value is the most times slower than its stated reference."""
        worst: Optional[tuple[float, str, float, float, int, int, int]] = None
        for q, stated in self.notes.items():
            rows = self.run.get(q)
            if not rows:
                continue
            if len(rows) < MIN_READINGS and not any(s for _, _, s in rows):
                continue
            steady = rows[len(rows) // 4:] if len(rows) >= MIN_READINGS else rows
            now = median([v for v, _, _ in steady])
            up = _FASTER_UP[q.split("/")[0]]
            ref, ref_line = (max if up else min)(stated)
            slower = ref / now if up else now / ref
            if now > 0 and slower >= FACTOR and (worst is None or slower > worst[0]):
                worst = (slower, q, ref, now, ref_line, rows[0][1], rows[-1][1])
        if worst is None:
            return []
        slower, q, ref, now, ref_line, first, last = worst
        base = q.split("/")[0]
        unit = {"step": "s/step", "tokens": "tokens/s", "samples": "samples/s", "tflops": "TFLOP/s"}[base]
        if q.endswith("/dev"):
            unit += " per GPU"
        nums: dict[str, Any] = {"stated": fmt(ref), "measured": fmt(now), "unit": unit, "slower": f"{slower:.1f}",
                                "note_line": ref_line, "readings": max(1, len(self.run[q]) - len(self.run[q]) // 4)}
        lo, hi = min(first, ref_line), max(last, ref_line)
        return [Anomaly("stated_speed", "throughput-low", "error", lo, hi, None, len(self.run[q]), nums)]
