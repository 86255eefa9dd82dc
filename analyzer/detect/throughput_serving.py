"""throughput-low from an inference server's periodic metrics: the engine stalls or collapses under load.

vLLM prints its scheduler state every few seconds (V0 `metrics.py`, V1 `loggers.py` with an `Engine 000:` prefix):

    Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs,
    Swapped: 1 reqs, Pending: 98 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 4.1%.      (V0)
    ... Running: 7 reqs, Waiting: 1 reqs, GPU KV cache usage: 99.5%, Prefix cache hit rate: 69.5%   (V1)

and SGLang's scheduler `Decode batch, #running-req: 4, ... token usage: 0.99, ... gen throughput (token/s): 429.62,
#queue-req: 3`. Each line is one interval: the generation rate, the requests running and the requests queued
(pending / waiting / swapped), and the KV cache use when printed.

An interval is "low" when requests are in the engine (running or queued) and the generation rate is below SHARE
of the server's own plateau before it (the median of the upper half of the earlier intervals that generated with
requests running). A run of MIN_RUN low intervals in a row, at least half of them under pressure (requests queued,
or the KV cache at KV_FULL% or more), is a stall (rate 0) or a collapse: the engine stopped scheduling (a swap /
preemption deadlock) or spends its steps re-prefilling what it cannot fit. Not a stall:
  * an idle server: 0 tokens/s with nothing running and nothing queued (it breaks a run);
  * the tail of a burst: few requests still running, none queued, cache not full (no pressure);
  * a short dip: fewer than MIN_RUN intervals.
The run still going at the last interval means the server is in that state as the log ends (strong: an error);
a run the server came out of is reported as a warning.
"""
from __future__ import annotations

import re
from collections import deque
from typing import Any, Optional

SHARE = 0.15
MIN_RUN = 6
MIN_PRIOR = 3
KV_FULL = 90.0
TAIL = 512

_QUEUED = re.compile(rb"(?:Pending|Waiting|Swapped): ([0-9]+) req")
_KV = re.compile(rb"GPU KV cache usage: ([0-9.]+)%")
_SGL_QUEUE = re.compile(rb"#queue-req: ([0-9]+)")
_SGL_KV = re.compile(rb"token usage: ([0-9.]+)")

Row = tuple[int, float, int, int, Optional[float]]      # (line, tokens/s, running, queued, KV cache %)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if v < 100 else f"{v:.0f}"


class ServeSeries:
    def __init__(self) -> None:
        self.rows: deque[Row] = deque(maxlen=TAIL)

    def add_vllm(self, seg: bytes, line: int, gen: float, running: int) -> None:
        queued = sum(int(m.group(1)) for m in _QUEUED.finditer(seg))
        kv = _KV.search(seg)
        self.rows.append((line, gen, running, queued, float(kv.group(1)) if kv else None))

    def add_sglang(self, seg: bytes, line: int, gen: float, running: int) -> None:
        q, kv = _SGL_QUEUE.search(seg), _SGL_KV.search(seg)
        self.rows.append((line, gen, running, int(q.group(1)) if q else 0, 100 * float(kv.group(1)) if kv else None))

    def detect(self) -> Optional[tuple[dict[str, Any], int, int, bool]]:
        """(numbers, first line, last line, still in it at the last interval) of the last stall, or None."""
        prior: list[float] = []
        run: list[Row] = []
        found: Optional[tuple[list[Row], float]] = None
        plat = 0.0
        rows = list(self.rows)
        for i, r in enumerate(rows):
            _, gen, running, queued, _kv = r
            if running + queued > 0 and len(prior) >= MIN_PRIOR:
                if not run:
                    top = sorted(prior)[len(prior) // 2:]
                    plat = _median(top)
                if gen < SHARE * plat:
                    run.append(r)
                    if i < len(rows) - 1:
                        continue
            if run:
                if self._stall(run):
                    found = (run, plat)
                run = []
            if gen > 0 and running > 0:
                prior.append(gen)
        if found is None:
            return None
        run, plat = found
        kvs = [r[4] for r in run if r[4] is not None]
        nums: dict[str, Any] = {"serve_from": _num(plat), "serve_to": _num(_median([r[1] for r in run])),
                                "serve_n": len(run), "serve_queued": max(r[3] for r in run)}
        if kvs and _median(kvs) >= KV_FULL:
            nums["serve_kv"] = _num(_median(kvs))
        return nums, run[0][0], run[-1][0], run[-1] is rows[-1]

    @staticmethod
    def _stall(run: list[Row]) -> bool:
        pressed = sum(1 for r in run if r[3] > 0 or (r[4] is not None and r[4] >= KV_FULL))
        return len(run) >= MIN_RUN and 2 * pressed >= len(run)
