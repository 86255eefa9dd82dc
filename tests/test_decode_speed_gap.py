"""detect/decode_speed_gap: a benchmark run that warned of a slow fallback kernel, far slower than its sibling run."""
from __future__ import annotations

import llmtriage


def _run(cmd: str, warnings: list[str], speeds: list[float]) -> list[str]:
    lines = [f"(venv) me@box:~/bench$ python bench.py {cmd}", *warnings, "Loading checkpoint shards: 100%|##| 5/5"]
    lines += [f"[bench] sample {i:02d} new_tokens=200 time={200 / v:.2f}s tok/s={v:.2f} gpu_util=30%"
              for i, v in enumerate(speeds, 1)]
    lines.append(f"[bench] SUMMARY: {len(speeds)} samples -> {sum(speeds) / len(speeds):.2f} tok/s")
    return lines


def _errors(lines: list[str]):
    rep = llmtriage.analyze(("\n".join(lines) + "\n").encode())
    return [f for f in rep.findings if f.severity == "error"]


SLOW = [2.8, 2.7, 3.0, 3.1, 2.9]
FAST = [21.7, 22.1, 23.7, 21.9, 22.4]
FA = "Warning: import flash_attn fail, please install FlashAttention to get higher efficiency"


def test_the_run_that_fell_back_to_a_slow_kernel_is_reported():
    errs = _errors(_run("--model m-int4", ["CUDA extension not installed.", FA], SLOW) + _run("--model m --fp16", [FA], FAST))
    assert errs and errs[0].rule_id == "metric-decode-speed-fallback-kernel" and errs[0].category == "throughput-low"
    assert errs[0].captures["warning"] == "CUDA extension not installed" and errs[0].line == 2


def test_no_gap_or_no_fallback_warning_is_healthy():
    # both runs as fast
    assert not _errors(_run("--model m-int4", ["CUDA extension not installed."], FAST) + _run("--model m", [], FAST))
    # a slow run with no fallback warning: a bigger model or longer prompts, not a missing kernel
    assert not _errors(_run("--model m-70b", [], SLOW) + _run("--model m-7b", [], FAST))
    # the same warning in both runs explains no difference between them
    assert not _errors(_run("--bs 1", [FA], SLOW) + _run("--bs 8", [FA], FAST))
    # too few measurements (one sample and its summary)
    assert not _errors(_run("--model m-int4", ["CUDA extension not installed."], SLOW[:1]) + _run("--model m", [], FAST))
