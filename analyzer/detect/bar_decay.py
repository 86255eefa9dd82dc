"""throughput-low from a progress bar whose own rate keeps falling until the log ends (`metric-progress-rate-collapsing`).

A tqdm bar prints its rate with every update ("Running tokenizer on dataset: 52%|...| 2748495/5213866
[03:40:00<34:50:00, 19.66 examples/s]"). Work of the same kind (tokenising, mapping, generating, training steps)
runs at roughly the same rate from start to end; a rate that falls step after step to a small share of its own
best, in a bar that never completes, is a job that grinds to a halt: a preprocessing function whose cost grows
with what it has already processed, a worker pool that loses its workers, a cache or queue that fills. Nothing
raises: the user waits for hours and kills the job.

Evidence, per bar description: at least MIN_READINGS readings with increasing elapsed time; after the best rate,
the rate falls between at least FALL_SHARE of consecutive readings, ends at most 1/DECAY of the best, and the bar
ran at least SPAN times as long after the best reading as before it (a slow tail, not a burst at the start); the
last reading is under 100%. Not when a throughput-low error is already found.
"""
from __future__ import annotations

import re
from typing import Any

from llmtriage.detect.metric_anomaly import Anomaly, fmt

MIN_READINGS = 8
FALL_SHARE = 0.75
DECAY = 20.0
SPAN = 2.0
KEEP = 4096         # readings kept per log (the first ones; a bar that slows down is seen well before)
MAX_BARS = 64       # distinct descriptions tracked

# "<desc>: 52%|█████     | 2748495/5213866 [03:40:00<34:50:00, 19.66 examples/s]" (also s/it, it/s, ba/s); tried only
# at line starts (and after a tqdm `\r`), so a block costs one pass whatever its length
_BAR = re.compile(rb"(?m)(?:^|\r)(?P<desc>[^\r\n|]{0,200}?):\s+(?P<pct>\d{1,3})%\|[^|\r\n]{0,120}\|\s*\d+/\d+ "
                  rb"\[(?P<el>(?:\d+:)?\d+:\d\d)<[^,\]\r\n]{1,16},\s*(?P<rate>\d+(?:\.\d+)?)\s*(?P<unit>s/[A-Za-z]+|[A-Za-z]+/s)\]")


def _secs(text: bytes) -> int:
    parts = [int(p) for p in text.split(b":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return parts[0] * 3600 + parts[1] * 60 + parts[2]


class BarRates:
    """(line, elapsed s, rate per second, percent) for each bar description, block by block."""

    def __init__(self) -> None:
        self.bars: dict[bytes, list[tuple[int, int, float, int]]] = {}
        self.units: dict[bytes, str] = {}
        self.count = 0

    def feed(self, lines: bytes, line_base: int) -> None:
        if b"%|" not in lines or b"/s]" not in lines and b"s/" not in lines or self.count >= KEEP:
            return
        for m in _BAR.finditer(lines):
            desc = m.group("desc").rsplit(b":", 1)[-1].strip()     # the bar's name, not a time or rank prefix
            if len(desc) < 3:
                continue
            if desc not in self.bars and len(self.bars) >= MAX_BARS:
                continue
            rate, unit = float(m.group("rate")), m.group("unit").decode("ascii", "replace")
            if unit.startswith("s/"):
                if rate <= 0:
                    continue
                rate, unit = 1.0 / rate, unit[2:] + "/s"
            el = _secs(m.group("el"))
            rows = self.bars.setdefault(desc, [])
            if rows and el <= rows[-1][1]:
                if el < rows[-1][1]:        # the bar started again (a new epoch, a rerun): keep the latest run
                    rows.clear()
                else:
                    continue
            rows.append((line_base + lines.count(b"\n", 0, m.start()), el, rate, int(m.group("pct"))))
            self.units[desc] = unit
            self.count += 1
            if self.count >= KEEP:
                return


def bar_decay(br: BarRates, found: list[Anomaly]) -> list[Anomaly]:
    """The throughput-low anomaly for the first bar whose rate collapsed (module docstring), or nothing."""
    if any(a.category == "throughput-low" and a.severity == "error" for a in found):
        return []
    for desc, rows in br.bars.items():
        if len(rows) < MIN_READINGS or rows[-1][3] >= 100:
            continue
        best = max(range(len(rows)), key=lambda i: rows[i][2])
        tail = rows[best:]
        if len(tail) < MIN_READINGS:
            continue
        falls = [b[2] < a[2] for a, b in zip(tail, tail[1:])]
        (l0, e0, r0, _), (l1, e1, r1, p1) = tail[0], tail[-1]
        if sum(falls) < FALL_SHARE * len(falls) or r1 * DECAY > r0 or (e1 - e0) < SPAN * max(e0, 1):
            continue
        nums: dict[str, Any] = {"bar": desc.decode("utf-8", "replace")[-60:], "from_rate": fmt(r0), "to_rate": fmt(r1),
                                "unit": br.units.get(desc, "it/s"), "factor": round(r0 / r1) if r1 else None,
                                "percent": p1, "elapsed": f"{e1 // 3600}:{e1 % 3600 // 60:02d}:{e1 % 60:02d}",
                                "readings": len(tail)}
        return [Anomaly("bar_decay", "throughput-low", "error", l0, l1, None, len(tail), nums)]
    return []
