"""`get_engine` caches engines per configuration, bounded so that a caller varying the configuration per call
(leave-one-rule-out builds one engine per rule) does not keep every engine alive."""
from __future__ import annotations

import llmtriage


def test_the_same_configuration_gets_the_same_engine():
    assert llmtriage.get_engine() is llmtriage.get_engine()


def test_the_cache_keeps_only_the_most_recently_used_engines():
    from llmtriage import _ENGINES, _MAX_ENGINES

    first = llmtriage.get_engine(disabled=["torch-cuda-oom"])
    for rid in ["nccl-watchdog-timeout", "pad-token-missing", "hub-gated-repo", "cuda-error-out-of-memory",
                "rule-a", "rule-b", "rule-c", "rule-d", "rule-e"]:
        llmtriage.get_engine(disabled=[rid])
        assert len(_ENGINES) <= _MAX_ENGINES
    # the oldest configuration was dropped: asking again builds a new engine that works the same
    again = llmtriage.get_engine(disabled=["torch-cuda-oom"])
    assert again is not first
    text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.1 GiB\n"
    cats = {llmtriage.scan_source(e, text.encode()).findings[0].category for e in (first, again)}
    assert cats == {"cuda-oom"}
