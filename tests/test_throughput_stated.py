"""metric-slower-than-stated-speed (detect/throughput_stated.py): a run far slower than a speed its log states."""
from __future__ import annotations

import llmtriage


def _bar(rate: float, n: int = 12, total: int = 250) -> str:
    return "".join(f" {4 * i}%|#         | {5 * i}/{total} [{i:02d}:00<40:00, {rate:.2f}s/it]\n" for i in range(1, n + 1))


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_a_run_three_times_slower_than_the_previous_run_noted_in_the_log():
    text = ("# previous run with bitsandbytes 0.40.2: 250/250 [14:02<00:00, 3.37s/it]\n"
            "Loading checkpoint shards: 100%|##########| 2/2 [01:08<00:00, 34.02s/it]\n" + _bar(10.7))
    errs = _errors(text)
    assert errs and errs[0].rule_id == "metric-slower-than-stated-speed" and errs[0].category == "throughput-low"
    assert "3.37" in errs[0].message and "10.7" in errs[0].message


def test_tokens_per_gpu_against_an_expected_rate_and_tflops_against_another_node():
    toks = "# expected ~3014 tokens/s per GPU\n" + "".join(f"step {i}: {1480 + i} tokens/s/gpu, 43.69 s/step\n" for i in range(10))
    assert "3014 tokens/s per GPU" in _errors(toks)[0].message
    flops = "# same config on one node: approx flops per GPU: 148.9TFLOPS\n" + "".join(
        f" iteration {i}/ 320000 | approx flops per GPU: 44.{i}TFLOPS | lm_loss: 9.1\n" for i in range(8))
    assert "148.9 TFLOP/s" in _errors(flops)[0].message


def test_a_note_as_fast_as_the_run_or_slower_or_another_unit_raises_nothing():
    assert not _errors("# same job last week: 4.1 s/it either way\n" + _bar(4.3))       # as fast as the reference
    assert not _errors("# on the old GPUs: 25 s/it\n" + _bar(10.7))                     # faster than the reference
    assert not _errors("# expected 3000 tokens/s in total\n" + "".join(f"step {i}: 1500 tokens/s/gpu\n" for i in range(8)))
    assert not _errors(_bar(10.7) + "3.37s/it on the old run, quoted in a warning, not a note\n")
    assert not _errors("# previous run: 1.0 s/it\n" + _bar(10.7, n=2))                  # too few readings to tell
