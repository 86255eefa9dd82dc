"""A model download's end before the run (`ollama run` pulls, then loads) is no run's end: a crash after it is
not read as a crash at shutdown (detect/prelude_finish.py, `prelude_finish` in rules/verdict.yaml)."""
from __future__ import annotations

import llmtriage

PULL = (
    "PS C:\\Users\\dev> ollama run qwen2.5vl:7b\n"
    "pulling manifest\n"
    "pulling a99b7f834d75... 100% ▕████████████████▏ 6.0 GB\n"
    "verifying sha256 digest\n"
    "writing manifest\n"
    "success\n"
)


def test_a_crash_after_the_pull_is_not_a_crash_at_shutdown():
    rep = llmtriage.analyze(PULL + "Error: llama runner process has terminated: exit status 0xc0000409\n")
    assert rep.extra["status"] == "crashed"
    assert "had finished" not in (rep.extra["action_reason"] or "")


def test_a_pull_alone_still_finishes():
    rep = llmtriage.analyze(PULL)
    assert rep.extra["status"] == "finished"
