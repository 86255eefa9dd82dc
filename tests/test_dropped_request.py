"""A request the serving engine dropped with only a warning, then nothing served again
(analyzer/detect/dropped_request.py, rules/verdict.yaml `dropped_request`)."""
from __future__ import annotations

import llmtriage

HEAD = (
    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
    "INFO 05-02 09:10:01 async_llm_engine.py:117] Received request cmpl-1: prompt: 'hi', sampling params: SamplingParams(n=1)\n"
    "INFO 05-02 09:10:03 async_llm_engine.py:171] Finished request cmpl-1.\n"
    'INFO:     10.0.0.5:40100 - "POST /v1/completions HTTP/1.1" 200 OK\n'
    "INFO 05-02 09:10:30 async_llm_engine.py:117] Received request cmpl-2: prompt: 'long...', sampling params: SamplingParams(n=1)\n"
    "WARNING 05-02 09:10:30 scheduler.py:130] Input prompt (9120 tokens) is too long and exceeds limit of 8192\n"
)
IDLE = ("INFO 05-02 09:{m:02d}:00 metrics.py:455] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        "0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.0%\n")
PING = 'INFO:     10.0.0.9:51000 - "GET /health HTTP/1.1" 200 OK\n'


def top(text: str):
    rep = llmtriage.analyze(text)
    errors = [f for f in rep.findings if f.severity == "error"]
    return rep, (errors[0] if errors else None)


def test_silence_after_the_dropped_prompt_makes_the_warning_the_error():
    rep, f = top(HEAD + PING + IDLE.format(m=20) + PING + IDLE.format(m=30) + PING + "^CINFO:     Shutting down\n")
    assert f is not None and f.rule_id == "vllm-scheduler-prompt-skipped"
    assert f.category == "seq-too-long" and f.judgement["context"] == "request-never-answered"
    assert rep.extra["action"] == "fix" and f.action == "fix"


def test_new_requests_received_but_never_finished_count_as_alive():
    tail = "".join(f"INFO 05-02 09:1{i}:00 async_llm_engine.py:117] Received request cmpl-{i + 3}: prompt: 'x'\n"
                   for i in range(4))
    _, f = top(HEAD + tail)
    assert f is not None and f.rule_id == "vllm-scheduler-prompt-skipped"


def test_a_request_served_after_the_warning_keeps_it_a_warning():
    _, f = top(HEAD + 'INFO:     10.0.0.5:40102 - "POST /v1/completions HTTP/1.1" 200 OK\n'
               + PING + IDLE.format(m=20) + PING + PING)
    assert f is None


def test_a_log_that_ends_at_the_warning_is_not_a_stall():
    _, f = top(HEAD + PING)
    assert f is None


def test_a_server_that_never_served_before_the_warning_is_not_judged():
    text = HEAD.replace("Finished request cmpl-1.", "Aborted request cmpl-1.").replace(
        '"POST /v1/completions HTTP/1.1" 200 OK', '"POST /v1/completions HTTP/1.1" 499')
    _, f = top(text + PING + PING + PING + IDLE.format(m=20))
    assert f is None
