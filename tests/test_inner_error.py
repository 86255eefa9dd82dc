"""A wrapper rule that quotes a recognised error yields to it (detect/inner_error.py)."""
from __future__ import annotations

import llmtriage

HEAD = (
    "[2025-03-06 12:40:22 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
    "[2025-03-06 12:40:29 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 352, in capture_one_batch_size\n'
    "    self.model_runner.tp_group.barrier()\n"
)
PEER = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.42.3.17]:28417\n"
WRAP = ("Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
        "Connection closed by peer [10.42.3.17]:28417\n"
        "Possible solutions:\n1. disable cuda graph by --disable-cuda-graph\n")
TAIL = "[2025-03-06 12:40:29] Received sigquit from a child process. It usually means the child failed.\n"


def top(text: str) -> llmtriage.Finding:
    rep = llmtriage.analyze(text)
    return next(f for f in rep.findings if f.severity == "error")


def finding(text: str, rule_id: str) -> llmtriage.Finding:
    return next(f for f in llmtriage.analyze(text).findings if f.rule_id == rule_id)


def test_capture_wrapper_yields_to_the_recognised_error_it_quotes():
    text = HEAD + PEER + "\nDuring handling of the above exception, another exception occurred:\n\n" + WRAP + TAIL
    assert top(text).category == "nccl-error"
    w = finding(text, "sglang-cuda-graph-capture-failed")
    assert w.role == "symptom" and w.judgement["context"] == "wraps-recognised-error"


def test_the_quote_alone_on_the_wrapper_line_is_enough():
    # no earlier traceback: the inner error's own rule reads the wrapper's line
    assert top(HEAD + WRAP + TAIL).category == "nccl-error"


def test_an_unrecognised_inner_error_leaves_the_wrapper_the_cause():
    text = HEAD + ("NameError: name 'cuda_capability_geq' is not defined\n"
                   "Exception: Capture cuda graph failed: SubprocException: An exception occurred in a subprocess:\n"
                   "Possible solutions:\n") + TAIL
    f = top(text)
    assert f.rule_id == "sglang-cuda-graph-capture-failed" and f.role == "cause" and f.judgement is None


def test_an_error_printed_after_the_wrapper_is_not_its_inner_error():
    text = HEAD + WRAP.replace("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.42.3.17]:28417",
                               "unexpected failure in custom allreduce kernel registration step") + PEER
    w = finding(text, "sglang-cuda-graph-capture-failed")
    assert w.judgement is None or w.judgement.get("context") != "wraps-recognised-error"
