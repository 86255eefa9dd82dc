"""Free-form per-step timing columns and a slowdown that sets in early (analyzer/detect/throughput_columns.py)."""
from __future__ import annotations

import io

from llmtriage.detect import metrics as M
from llmtriage.detect.throughput import ThroughputTracker
from llmtriage.detect.throughput_columns import column_sample, early_drop
from llmtriage.engine.logparse import iter_blocks, match_view


def _run(text: str):
    t = ThroughputTracker(M.Thresholds())
    base = 1
    for chunk, _ in iter_blocks(io.BytesIO(text.encode())):
        lines, view = match_view(chunk)
        t.feed(lines, view, base)
        base += lines.count(b"\n")
    return t, t.detect(1)


def _cols(ms_of, n=60):
    return "".join(f"[rank0] step {i:4d} | loss 1.8{i % 10} | fwd {800 + i % 7:.1f} ms | bwd 1550.0 ms | step {ms_of(i):9.1f} ms"
                   f" | tokens/s {65536 / (2.35 + ms_of(i) / 1000):9.1f}\n" for i in range(1, n + 1))


def test_column_values_are_read_as_a_rate_or_a_step_time():
    assert column_sample(b"| step  12256.7 ms | tokens/s   4501.4")[0:2] == ("rate", 1 / 4501.4)
    assert column_sample(b"global_step=18200 loss=1.88 tokens/s=412,330 mfu=0.41")[1] == 1 / 412330
    assert column_sample(b"lm loss 2.01 | tokens/s 1.91M |")[1] == 1 / 1.91e6
    assert column_sample(b"loss 1.2 | step    100.6 ms | lr 1e-5")[0:2] == ("loop", 0.1006)
    # vLLM's engine stats name the rate after the number; a bare step counter has no unit
    assert column_sample(b"Avg generation throughput: 243.2 tokens/s, Running: 64 reqs") is None
    assert column_sample(b"step 12 | loss 1.2") is None


def test_a_slowdown_after_the_first_steps_that_lasts_is_an_error():
    """Four fast steps, then every step several times slower to the end of an unfinished log (DeepSpeed's
    offloaded optimizer step going from 0.1 s to 10+ s): the quarter comparison alone sees no change."""
    t, [a] = _run(_cols(lambda i: 101.0 + i if i <= 4 else 9000.0 + (i * 397) % 5000))
    assert (a.category, a.severity) == ("throughput-low", "error")
    assert float(a.numbers["rise"]) >= 3 and "rate_from" in a.numbers
    assert t.steps["rate"].n == 60


def test_steady_columns_and_a_slow_first_step_raise_nothing():
    assert _run(_cols(lambda i: 100.0 + (i * 7) % 9))[1] == []
    # warm-up: the first steps slow, then fast (the opposite direction)
    assert _run(_cols(lambda i: 9000.0 if i <= 3 else 100.0 + i % 5))[1] == []


def test_early_drop_needs_steady_steps_before_and_a_lasting_slowdown():
    vals = [(i, v) for i, v in enumerate([1.0, 1.1, 1.0, 1.05] + [4.0] * 20)]
    assert early_drop(vals, 2.0) == 1.025
    # back to the fast level for a quarter of the later steps: a pause, not a slowdown
    mixed = [(i, v) for i, v in enumerate([1.0, 1.1, 1.0, 1.05] + [4.0, 1.0, 4.0, 4.0] * 5)]
    assert early_drop(mixed, 2.0) is None
    # no steady start: no yardstick
    assert early_drop([(i, v) for i, v in enumerate([1.0, 3.0, 1.0, 2.0] + [4.0] * 20)], 2.0) is None
