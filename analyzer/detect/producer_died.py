"""A consumer's timed-out wait whose producer thread had died (layer 3, data in rules/verdict.yaml
`unknown.consumer_wait`).

transformers' TextIteratorStreamer reads the tokens that generate() puts on a queue from another
thread; when generate() raises, the thread dies ("Exception in thread Thread-8 (generate):" and its
traceback) and the consumer's `queue.get(timeout=...)` later raises `queue.Empty`. The last exception
of the log is then only the wait that outlived its producer: the background thread's exception
printed before it is the root-cause guess for the `unknown` finding.
"""
from __future__ import annotations

from typing import Optional

from llmtriage.engine.logparse import is_benign
from llmtriage.findings import ExceptionInfo
from llmtriage.detect.spec import compiled, verdict_spec


def producer_thread_exception(exc: ExceptionInfo, exceptions: list[ExceptionInfo],
                              lookback: int) -> Optional[ExceptionInfo]:
    """The latest background thread's exception within `lookback` lines before `exc`, when `exc` is a
    consumer's timed-out wait (its type and one of its frames match `unknown.consumer_wait`), else None."""
    spec = verdict_spec()["unknown"].get("consumer_wait")
    if not spec or exc.thread or not compiled(spec["type"]).search(exc.type or ""):
        return None
    frames = compiled(spec["frames"])
    if not any(frames.search(f.file or "") for f in exc.frames):
        return None
    for other in reversed(exceptions):
        if other.line >= exc.line:
            continue
        if exc.line - other.line > lookback:
            return None
        if other.thread and not is_benign(other):
            return other
    return None
