"""A benchmark that stops on its own failure report (nccl-tests / rccl-tests) died: no traceback, no exit code."""
from __future__ import annotations

import llmtriage

NCCL_TESTS_HEAD = (
    "# nThread 1 nGpus 8 minBytes 8388608 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20\n"
    "#  Rank  0 Group  0 Pid 301844 on node07 device  0 [0x18] NVIDIA H800\n"
)


def test_nccl_tests_failure_report_is_death_evidence():
    cuda = ("node07: Test CUDA failure common.cu:1003 'CUDA-capable device(s) is/are busy or unavailable'\n"
            " .. node07 pid 301844: Test failure common.cu:900\n")
    assert llmtriage.analyze(NCCL_TESTS_HEAD + cuda).extra["status"] == "crashed"
    # rccl-tests name their hipified source
    rccl = "node07: Test NCCL failure /opt/rccl-tests/build/hipify/common.cu.cpp:1291 'unhandled cuda error'\n"
    assert llmtriage.analyze(NCCL_TESTS_HEAD + rccl).extra["status"] == "crashed"


def test_a_log_that_only_mentions_test_failures_is_not_a_death():
    text = NCCL_TESTS_HEAD + "see the troubleshooting notes on a Test failure before reporting\n"
    assert llmtriage.analyze(text).extra["status"] != "crashed"
