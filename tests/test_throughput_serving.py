"""throughput-low from a server's periodic metrics (analyzer/detect/throughput_serving.py): stalls and collapses
under load fire; idle periods, the tail of a burst and short dips do not."""
from __future__ import annotations

import io

from llmtriage.detect.throughput import ThroughputTracker
from llmtriage.engine.logparse import iter_blocks, match_view


def _run(text: str):
    t = ThroughputTracker()
    base = 1
    for chunk, _ in iter_blocks(io.BytesIO(text.encode())):
        lines, view = match_view(chunk)
        t.feed(lines, view, base)
        base += lines.count(b"\n")
    return t.detect(None)


def _v0(rows):
    return "".join(f"INFO 10-28 11:{i // 12:02d}:{i % 12 * 5:02d} metrics.py:349] Avg prompt throughput: {p:.1f} tokens/s, "
                   f"Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Swapped: {s} reqs, Pending: {q} reqs, "
                   f"GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.\n" for i, (p, g, r, s, q, kv) in enumerate(rows))


def _v1(rows):
    return "".join(f"INFO 07-28 06:{i // 6:02d}:{i % 6 * 10:02d} [loggers.py:118] Engine 000: Avg prompt throughput: {p:.1f} tokens/s, "
                   f"Avg generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Waiting: {q} reqs, GPU KV cache usage: {kv:.1f}%, "
                   f"Prefix cache hit rate: 0.0%\n" for i, (p, g, r, q, kv) in enumerate(rows))


def test_zero_throughput_with_requests_swapped_and_pending_is_an_error():
    busy = [(300.0, 7200.0, 80, 0, 5, 40.0)] * 12
    stall = [(0.0, 0.0, 0, 1, 98, 0.0)] * 10
    [a] = _run(_v0(busy + stall))
    assert a.severity == "error" and a.category == "throughput-low"
    assert a.numbers["serve_to"] == "0" and a.numbers["serve_n"] == 10 and a.numbers["serve_queued"] == 99
    assert a.line == 13


def test_rate_collapsing_at_a_full_kv_cache_is_an_error():
    steady = [(0.0, 240.0, 8, 0, 50.0)] * 15
    collapsed = [(1500.0, 12.0, 7, 1, 99.6)] * 8 + [(1400.0, 9.0, 8, 0, 99.8)]
    [a] = _run(_v1(steady + collapsed))
    assert a.severity == "error" and a.numbers["serve_kv"] == "99.6" and a.numbers["serve_from"] == "240"


def test_idle_server_and_tail_of_a_burst_are_healthy():
    burst = [(900.0, 2400.0, 64, 0, 30.0)] * 8
    tail = [(0.0, 35.0, 1, 0, 2.0)] * 10          # one long request left: no queue, cache nearly empty
    idle = [(0.0, 0.0, 0, 0, 0.0)] * 20           # nothing running, nothing waiting
    assert _run(_v1(burst + tail + idle + burst + idle)) == []


def test_short_dip_and_a_recovered_collapse():
    busy = [(300.0, 7200.0, 80, 0, 5, 40.0)] * 12
    dip = [(0.0, 0.0, 0, 0, 40, 0.0)] * 3
    assert _run(_v0(busy + dip + busy)) == []
    stall = [(0.0, 0.0, 0, 1, 98, 0.0)] * 8
    [a] = _run(_v0(busy + stall + busy))          # the server came out of it: reported, not an error
    assert a.severity == "warning" and a.numbers["serve_n"] == 8
