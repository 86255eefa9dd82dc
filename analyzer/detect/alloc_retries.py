"""throughput-low from PyTorch's caching allocator retrying allocations step after step (memory thrashing).

`torch.cuda.memory_stats()["num_alloc_retries"]` counts the cudaMalloc calls that failed and were retried after
the allocator freed all its cached blocks. Trainers log it: Composer's MemoryMonitor `Train memory/alloc_retries: 37`,
Lightning's DeviceStatsMonitor and user loops `num_alloc_retries: 12` / `alloc_retries=12`. A few retries at the
start (the first large batch) are harmless; a counter that keeps growing with the steps means the run sits at the
memory limit and flushes and refills the allocator's cache every step, a synchronising cudaFree/cudaMalloc storm that
makes each step several times slower (dropless MoE routing, variable sequence lengths, a batch just too large)
without ever raising an out-of-memory error.

Evidence: at least MIN_SAMPLES readings of the counter; it grows between at least GROW_SHARE of consecutive readings
and by at least MIN_GROWTH over the log, and is still growing at the last reading. A counter that stops growing
(retries only while warming up) is left alone.
"""
from __future__ import annotations

import re
from typing import Any

from llmtriage.detect.metric_anomaly import Anomaly

MIN_SAMPLES = 5
GROW_SHARE = 0.75
MIN_GROWTH = 20
KEEP = 4096

_GATES = (b"alloc_retries", b"alloc retries")
_COUNTER = re.compile(rb"""(?i)\b(?:memory/)?(?:num_)?alloc[_ ]retries['"]?\s*[:=]\s*([0-9]+)(?![0-9.])""")


class AllocRetries:
    """Readings of the allocator's retry counter, block by block: (line, value)."""

    def __init__(self) -> None:
        self.values: list[tuple[int, int]] = []

    def feed(self, lines: bytes, line_base: int) -> None:
        if not any(g in lines for g in _GATES) or len(self.values) >= KEEP:
            return
        for m in _COUNTER.finditer(lines):
            self.values.append((line_base + lines.count(b"\n", 0, m.start()), int(m.group(1))))


def alloc_thrash(ar: AllocRetries, found: list[Anomaly]) -> list[Anomaly]:
    """The throughput-low anomaly when the retry counter keeps growing (module docstring), or nothing."""
    vals = ar.values
    if len(vals) < MIN_SAMPLES or any(a.category == "throughput-low" and a.severity == "error" for a in found):
        return []
    ups = [b > a for (_, a), (_, b) in zip(vals, vals[1:])]
    growth = vals[-1][1] - vals[0][1]
    if sum(ups) < GROW_SHARE * len(ups) or growth < MIN_GROWTH or not ups[-1]:
        return []
    nums: dict[str, Any] = {"retries_from": vals[0][1], "retries_to": vals[-1][1], "readings": len(vals)}
    return [Anomaly("alloc_thrash", "throughput-low", "error", vals[0][0], vals[-1][0], None, len(vals), nums)]
