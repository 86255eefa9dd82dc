"""A progress bar whose rate keeps falling until the log ends (detect/bar_decay.py)."""
from __future__ import annotations

import llmtriage


def _bar(rates: list[float], total: int = 5_000_000, step_s: int = 300, done_at_end: bool = False,
         desc: str = "Running tokenizer on dataset (num_proc=16)") -> str:
    out, n = [], 0
    for i, r in enumerate(rates):
        el = (i + 1) * step_s
        n += int(r * step_s)
        pct = 100 if done_at_end and i == len(rates) - 1 else min(99, n * 100 // total)
        shown = total if pct == 100 else n
        out.append(f"{desc}: {pct:3d}%|#####     | {shown}/{total} [{el // 3600:02d}:{el % 3600 // 60:02d}:{el % 60:02d}<1:00:00, {r:.2f} examples/s]\n")
    return "".join(out)


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_a_rate_falling_at_every_update_to_a_twentieth_in_an_unfinished_bar_is_throughput_low():
    rates = [612 * 0.8 ** i for i in range(24)]            # 612 -> ~3.6 examples/s
    errs = _errors(_bar(rates) + "^C\n")
    assert errs and errs[0].rule_id == "metric-progress-rate-collapsing" and errs[0].category == "throughput-low"
    assert "612" in errs[0].message


def test_bars_that_finish_fluctuate_or_slow_only_a_little_are_not():
    rates = [612 * 0.8 ** i for i in range(24)]
    assert not _errors(_bar(rates, done_at_end=True))                        # it completed: slow, but done
    assert not _errors(_bar([612 * (0.9 if i % 2 else 1.1) for i in range(24)]))   # noise around one rate
    assert not _errors(_bar([612 * 0.93 ** i for i in range(24)]))           # 5x slower: long samples at the end
    assert not _errors(_bar([612 * 0.8 ** i for i in range(6)]))             # too few readings to tell


def test_a_fast_start_that_settles_is_not_a_collapse():
    # a burst in the first readings (cached items) then a steady rate for much longer
    rates = [5000, 2500, 1200] + [60.0] * 30
    assert not _errors(_bar(rates))
