"""throughput-low from inference benchmarks in one log: a run that warned of a slow fallback kernel generates far
slower than a sibling run of the same log.

Users compare configurations by running a benchmark script twice in one terminal (a quantized checkpoint, then the
fp16 one) and paste both. Each run prints its generation speed (`tok/s=2.82`, `-> 2.94 tok/s`, `tokens/s: 21.7`).
When the slow run printed, before its speeds, that a kernel it needs did not load (auto-gptq's "CUDA extension not
installed.", exllama kernels not installed, "import flash_attn fail", Mamba's "fast path is not available ...
Falling back to the naive implementation"), the library ran its slow reference path: the run works and is many
times slower than it should be, and nothing fails.

Runs: the lines after each shell command line (`$ python ...`, `# torchrun ...`). A run counts when it printed at least
`min_values` speeds; its speed is their median. The finding needs a run with a fallback warning whose median is at
least `factor` x below another run's of the same log, and no error finding. Data: rules/verdict.yaml
`decode_speed_gap` (the warnings are regexes there); texts: rules/detectors.yaml `decode_speed_gap`.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import fmt, median
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.rl_divergence import EndJudged
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_KEEP_RUNS = 64
_KEEP_VALUES = 512
# candidate lines read at most: a benchmark pasted run after run prints a few hundred; a log with more (a training or
# serving log printing tokens/s on every step) is not one, and the tracker stops reading it (bounded cost)
_MAX_LINES = 4096
# a shell prompt before a command that starts a run
_COMMAND = re.compile(rb"(?:^|[\s)~/\w])[$#>] +(?:[A-Z_]+=\S+ +)*(?:python[0-9.]*|torchrun|accelerate|deepspeed|bash|sh|"
                      rb"vllm|llama-bench|llama-cli|\./\S+)\s")
# a generation speed: `tok/s=2.82`, `tokens/s: 21.7`, `tokens per second = 3.1`, `-> 2.94 tok/s`, `21.7 tokens/sec`
_SPEED = re.compile(rb"(?i)(?:\btok(?:en)?s?/s(?:ec)?|\btokens? per second)\s*[=:]\s*([0-9]+(?:\.[0-9]+)?)"
                    rb"|(?<![\w.])([0-9]+(?:\.[0-9]+)?) ?tok(?:en)?s?/s(?:ec)?\b")
# a server's periodic scheduler metrics are load, not one configuration's speed (detect/throughput_serving.py)
_SERVING = (b"Avg prompt throughput", b"gen throughput", b"Avg generation throughput")


class _Run:
    __slots__ = ("line", "values", "warnings")

    def __init__(self, line: int) -> None:
        self.line = line
        self.values: list[float] = []
        # the fallback warnings printed before the run's first speed: {pattern index: (line, text)}, first of each
        self.warnings: dict[int, tuple[int, str]] = {}


class DecodeSpeedGapTracker(EndJudged):
    """Runs of one log, their speeds and their fallback warnings; judged at the end."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.runs: list[_Run] = [_Run(1)]
        self._fallback: Optional[list["re.Pattern[bytes]"]] = None
        self._any: Optional["re.Pattern[bytes]"] = None
        self.read = 0           # candidate lines read; past _MAX_LINES the log is not a benchmark

    def _warning_rxs(self) -> list["re.Pattern[bytes]"]:
        if self._fallback is None:
            spec = verdict_spec().get("decode_speed_gap") or {}
            self._fallback = [re.compile(p.encode()) for p in spec.get("fallback") or ()]
        return self._fallback

    def _gate(self) -> "re.Pattern[bytes]":
        if self._any is None:
            parts = [rb"[$#>] +(?:[A-Z_]+=\S+ +)*(?:python|torchrun|accelerate|deepspeed|bash|sh|vllm|llama-|\./)", rb"tok"]
            self._any = re.compile(b"|".join(parts + [rx.pattern for rx in self._warning_rxs()]))
        return self._any

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if self.read > _MAX_LINES:
            return
        rxs = self._warning_rxs()
        pos, line_no, end = 0, line_base, -1
        for g in self._gate().finditer(view):
            if g.start() <= end:            # (a line is read once, at its first candidate)
                continue
            start = view.rfind(b"\n", 0, g.start()) + 1
            end = view.find(b"\n", g.start())
            end = len(view) if end < 0 else end
            line_no += view.count(b"\n", pos, start)
            pos = start
            self.read += 1
            if self.read > _MAX_LINES:
                return
            self._line(view[start:end], line_no, rxs)

    def _line(self, line: bytes, line_no: int, rxs: list["re.Pattern[bytes]"]) -> None:
        if _COMMAND.search(line) is not None:
            if len(self.runs) < _KEEP_RUNS:
                self.runs.append(_Run(line_no))
            return
        run = self.runs[-1]
        if not run.values:
            hit = next(((k, m) for k, rx in enumerate(rxs) if (m := rx.search(line)) is not None), None)
            if hit is not None:
                run.warnings.setdefault(hit[0], (line_no, hit[1].group(0).decode("utf-8", "replace")[:120]))
                return
        if b"tok" not in line or any(s in line for s in _SERVING):
            return
        m = _SPEED.search(line)
        if m is not None and len(run.values) < _KEEP_VALUES:
            value = float(m.group(1) or m.group(2))
            if value > 0:
                run.values.append(value)

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("decode_speed_gap")
        if not spec or self.read > _MAX_LINES or any(f.severity == "error" for f in findings):
            return None
        least, factor = int(spec["min_values"]), float(spec["factor"])
        runs = [(r, median(r.values)) for r in self.runs if len(r.values) >= least]
        # the slow run warned of a fallback the fast one did not print (both may share an unrelated one)
        pairs = [(f_speed / s_speed, s, f, min(set(s.warnings) - set(f.warnings)))
                 for s, s_speed in runs for f, f_speed in runs
                 if s is not f and set(s.warnings) - set(f.warnings) and f_speed >= factor * s_speed]
        if not pairs:
            return None
        ratio, s, fast, kind = max(pairs, key=lambda p: p[0])
        line, warning = s.warnings[kind]
        entry = detector_texts()["decode_speed_gap"]
        values = {"slow": fmt(median(s.values)), "fast": fmt(median(fast.values)), "ratio": f"{ratio:.1f}",
                  "warning": warning, "warning_line": str(line), "slow_line": str(s.line),
                  "fast_line": str(fast.line), "slow_n": str(len(s.values)), "fast_n": str(len(fast.values))}
        return detector_finding(entry, detector_text(entry, self.lang), values, line=line,
                                last_line=None, count=len(s.values), default_priority=45)
