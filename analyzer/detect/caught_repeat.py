"""metric-caught-exception-repeats (unknown): one exception caught and logged again at every evaluation or step,
while the metric it feeds reads exactly 0.

A program that wraps a call in a broad `except` and logs the exception's repr goes on running:

    W0610 04:35:41 evaluate_rl.py:118] [eval-reward] reward_fn failed on row 3: KeyError('question')
    I0610 04:35:53 evaluate_rl.py:204] eval: num_samples=128 mean_reward=0.0 accuracy=0.0

One such line is a handled sample. The same exception (type and arguments, with the same message around it once
its numbers are masked) in BURSTS or more separate bursts - training records logged between them - each followed
within ZERO_WINDOW lines by a line whose rewards, accuracies, scores or pass rates all read exactly 0, is a code path that fails every
time it runs and whose failure is scored as nothing: the run finishes and every evaluation is 0 because of a bug,
not because the model is bad. No taxonomy category names a bug in the job's own reward or evaluation code, so the
finding is `unknown`, with the exception in its message.

Healthy look-alikes left alone: an exception logged in one burst only (a few bad rows at start-up), repeated
warnings without an exception repr, and repeated caught exceptions whose metrics are not 0 (a flaky remote call
that is retried, some samples skipped while the rest still score).
"""
from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly

BURSTS = 3
ZERO_WINDOW = 12          # lines after a burst's last exception line where the zero metric is printed
KEEP = 512                # exception lines kept per kind
KINDS = 64

_GATES = (b"Error(", b"Exception(")
# a logged message that names a failure, then the exception's repr at the end of the line: "...failed on row 3: KeyError('question')"
_CAUGHT = re.compile(rb"(?m)^(.{0,240}?\b(?i:failed|error|exception)\b[^\n]{0,160}?):\s*([A-Z][A-Za-z0-9_]*(?:Error|Exception))\(([^\n]{0,120})\)[ \t\r]*$")
# a reward / accuracy / score / pass-rate value; a line whose values of these are all exactly 0 is a zero metric
_METRIC = re.compile(rb"(?i)\b[a-z_/]*(?:reward|acc(?:uracy)?|score|pass@[0-9]+|success(?:_rate)?)[a-z_/]*\s*[=:]\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)")
_DIGITS = re.compile(rb"[0-9]+")
_PREFIX = re.compile(rb"^.*?\]\s*")       # a logger's own prefix ("W0610 04:35:41.88 evaluate_rl.py:118] ")


class CaughtExceptions:
    """Exception reprs logged by a handler, and metric values of exactly 0, block by block."""

    def __init__(self) -> None:
        self.kinds: dict[bytes, list[int]] = {}       # masked message + exception -> lines
        self.text: dict[bytes, bytes] = {}            # the first line of each kind, as printed (trimmed)
        self.zeros: list[int] = []

    def feed(self, lines: bytes, line_base: int) -> None:
        if not any(g in lines for g in _GATES):
            return
        for m in _CAUGHT.finditer(lines):
            msg = _PREFIX.sub(b"", m.group(1), count=1)
            key = _DIGITS.sub(b"N", msg) + b"|" + m.group(2) + b"(" + m.group(3) + b")"
            seen = self.kinds.get(key)
            if seen is None:
                if len(self.kinds) >= KINDS:
                    continue
                seen = self.kinds[key] = []
                self.text[key] = (msg + b": " + m.group(2) + b"(" + m.group(3) + b")")[-200:]
            ln = line_base + lines.count(b"\n", 0, m.start())
            if len(seen) < KEEP:
                seen.append(ln)
            pos = m.end() + 1
            for k in range(1, ZERO_WINDOW + 1):      # the lines after it in this block
                if pos >= len(lines):
                    break
                eol = lines.find(b"\n", pos)
                eol = len(lines) if eol < 0 else eol
                vals = [float(v) for v in _METRIC.findall(lines, pos, eol)]
                if vals and all(v == 0 for v in vals) and (not self.zeros or self.zeros[-1] != ln + k):
                    self.zeros.append(ln + k)
                pos = eol + 1


def caught_repeats(ce: CaughtExceptions, recs: list[Any], found: list[Anomaly]) -> list[Anomaly]:
    """The anomaly for the exception kind caught in the most bursts, each followed by a metric of exactly 0."""
    if not ce.kinds or any(a.severity == "error" for a in found):
        return []
    rec_lines = sorted(r.line for r in recs)
    best: Optional[tuple[int, bytes, list[list[int]]]] = None
    for key, lns in ce.kinds.items():
        bursts: list[list[int]] = []
        for ln in lns:
            # a new burst when a training record was logged since the last exception line
            if not bursts or bisect_left(rec_lines, ln) != bisect_left(rec_lines, bursts[-1][-1]):
                bursts.append([ln])
            else:
                bursts[-1].append(ln)
        zeroed = [b for b in bursts if _zero_after(ce.zeros, b[-1])]
        if len(zeroed) >= BURSTS and len(zeroed) * 4 >= len(bursts) * 3 and (best is None or len(zeroed) > best[0]):
            best = (len(zeroed), key, bursts)
    if best is None:
        return []
    n, key, bursts = best
    text = ce.text[key].decode("utf-8", "replace").strip()
    return [Anomaly("caught_repeat", "unknown", "error", bursts[0][0], bursts[-1][-1], None, sum(map(len, bursts)),
                    {"exception": text, "bursts": len(bursts), "zeroed": n})]


def _zero_after(zeros: list[int], line: int) -> bool:
    i = bisect_left(zeros, line)
    return i < len(zeros) and zeros[i] - line <= ZERO_WINDOW
