"""A streamer's timed-out wait (queue.Empty) after the generate() thread died: the thread's exception is the
root-cause guess, not the consumer's timeout (detect/producer_died.py, `unknown.consumer_wait`)."""
from __future__ import annotations

import llmtriage

THREAD = (
    "07/30/2024 15:21:17 - INFO - app.loader - all params: 9,399,951,360\n"
    "Exception in thread Thread-8 (generate):\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.11/threading.py", line 982, in run\n'
    "    self._target(*self._args, **self._kwargs)\n"
    '  File "/srv/app/gen/sampler.py", line 88, in step\n'
    "    scores = self.scorer(ids, temperature=t)\n"
    "ValueError: scorer got a batch of 0 rows\n"
)
CONSUMER = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/web/chat.py", line 142, in stream\n'
    "    for new_text in streamer:\n"
    '  File "/usr/lib/python3.11/site-packages/transformers/generation/streamers.py", line 223, in __next__\n'
    "    value = self.text_queue.get(timeout=self.timeout)\n"
    '  File "/usr/lib/python3.11/queue.py", line 179, in get\n'
    "    raise Empty\n"
    "_queue.Empty\n"
)


def test_streamer_timeout_yields_to_the_dead_generate_thread():
    rep = llmtriage.analyze(THREAD + CONSUMER)
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs[0].rule_id == "unknown" and errs[0].captures["type"] == "ValueError"
    assert errs[0].line == 8
    assert rep.extra["status"] == "crashed"


def test_streamer_timeout_alone_stays_the_headline():
    """No thread died before it (a slow first token): the timeout itself is what the log shows."""
    rep = llmtriage.analyze(THREAD.splitlines(keepends=True)[0] + CONSUMER)
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs[0].rule_id == "unknown" and errs[0].captures["type"] == "_queue.Empty"


def test_other_last_exception_does_not_reach_back_to_a_thread():
    """A last exception that is no consumer's wait keeps the headline even after a background thread's death."""
    other = CONSUMER.replace("_queue.Empty", "KeyError: 'choices'").replace("raise Empty", "raise KeyError(k)")
    other = other.replace("queue.py", "dictutil.py").replace("streamers.py", "pipeline.py")
    rep = llmtriage.analyze(THREAD + other)
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs[0].captures["type"] == "KeyError"
