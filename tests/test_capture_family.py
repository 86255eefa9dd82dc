"""An unexplained exception raised while an inference server was capturing CUDA graphs belongs to
the compile-error family (detect/capture.py, rules/verdict.yaml `unknown.family.capture`); the same
exception after capture finished, or one whose message names another failure, does not."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import llmtriage

RULES = Path(__file__).resolve().parents[1] / "rules"

_HEAD = [
    "INFO 07-01 10:00:00 [gpu_worker.py:276] Available KV cache memory: 20.11 GiB",
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 51/51 [00:10<00:00,  5.01it/s]",
]
_RAISE = [
    "ERROR 07-01 10:00:14 [core.py:700] EngineCore failed to start.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    '  File "/usr/local/lib/python3.12/dist-packages/custom_kernels/ops.py", line 88, in fused_gemm',
    "    assert x.shape[0] % 8 == 0",
    "AssertionError: token count must be a multiple of 8 for the fused gemm",
]


def _top(lines: list[str]):
    rep = llmtriage.analyze(("\n".join(lines) + "\n").encode())
    errs = [f for f in rep.findings if f.severity == "error"]
    return errs[0] if errs else None


def test_an_exception_during_capture_is_in_the_compile_error_family():
    top = _top([*_HEAD, "Capturing CUDA graphs (decode, FULL):  14%|#4        | 5/35 [00:01<00:09,  3.12it/s]", *_RAISE])
    assert top is not None and top.rule_id == "unknown"
    assert top.category == "compile-error"
    assert top.captures["family_words"] == "raised during CUDA graph capture"


def test_sglang_markers_open_and_close_a_capture():
    begin = "[2025-12-29 10:12:26 TP0] Capture piecewise CUDA graph begin. avail mem=17.17 GB"
    end = "[2025-12-29 10:12:40 TP0] Capture piecewise CUDA graph end. Time elapsed: 14.01 s."
    assert _top([begin, *_RAISE]).category == "compile-error"
    assert _top([begin, end, *_RAISE]).category == "unknown"


def test_the_same_exception_after_capture_finished_names_no_family():
    done = "INFO 07-01 10:00:13 [gpu_model_runner.py:2007] Graph capturing finished in 12 secs, took 0.52 GiB"
    top = _top([*_HEAD, "Capturing CUDA graphs (decode, FULL): 100%|##########| 35/35 [00:03<00:00, 10.1it/s]", done, *_RAISE])
    assert top is not None and top.rule_id == "unknown" and top.category == "unknown"


def test_without_any_capture_line_nothing_changes():
    top = _top(_RAISE)
    assert top is not None and top.category == "unknown"


def test_a_message_naming_another_failure_keeps_its_own_words():
    msg = _RAISE[:-1] + ["RuntimeError: NCCL communicator was aborted on rank 0 while capturing"]
    top = _top([*_HEAD, "Capturing CUDA graphs (decode, FULL):   0%|          | 0/35", *msg])
    assert top is not None and top.category != "compile-error"


def test_capture_markers_are_re2_safe():
    spec = yaml.safe_load((RULES / "verdict.yaml").read_text(encoding="utf-8"))["unknown"]["family"]["capture"]
    cats = set(yaml.safe_load((RULES / "taxonomy.yaml").read_text(encoding="utf-8"))["categories"])
    assert spec["family"] in cats
    re2 = pytest.importorskip("re2")
    for k in ("start", "end", "unless"):
        re2.compile(spec[k])


def test_a_finished_bar_or_a_named_capture_end_closes_the_capture():
    v0 = "Capturing CUDA graph shapes: 100%|##########| 31/31 [00:21<00:00,  1.44it/s]"
    assert _top([v0, *_RAISE]).category == "unknown"
    draft = ["[2026-07-23 17:03:06 TP0] Capture draft cuda graph begin. This can take up to several minutes.",
             "[2026-07-23 17:03:13 TP0] Capture draft cuda graph end. Time elapsed: 6.83 s."]
    assert _top([*draft, *_RAISE]).category == "unknown"


def test_a_shape_that_places_the_exception_wins_over_the_capture():
    sig = _RAISE[:-1] + ["TypeError: Trainer._get_per_token_logps() takes 5 positional arguments but 6 were given"]
    top = _top(["Capturing CUDA graphs (decode, FULL):   3%|3         | 1/35", *sig])
    assert top is not None and top.category == "dependency-mismatch"
