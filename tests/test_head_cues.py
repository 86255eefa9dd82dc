"""detect/head_cues.py: one reader of the log's head for the start-up cues of several detectors."""
from __future__ import annotations

from llmtriage.detect.head_cues import HEAD_BYTES, HeadCues


def test_first_cues_keep_their_first_match_and_max_cues_the_largest_value():
    c = HeadCues()
    c.feed(b"launch\nsrun --nodes=2 python train.py\nLoading checkpoint shards: 100%\n", 1)
    c.feed(b"vocab_size: 32000\n[INFO] nnodes=1, num_local_procs=8\nLoading checkpoint shards: 100%\n"
           b"vocab_size: 151936\ntransformers==4.46.1\n", 4)
    assert c.line("loads") == 3 and c.text("loads") == "Loading checkpoint shards"   # the first of two
    assert c.number("vocab") == 32000 and c.line("vocab") == 4
    assert c.text("version") == "transformers==4.46.1"
    assert c.number("asked_nodes") == 2 and c.line("asked_nodes") == 2
    assert c.number("got_nodes") == 1 and c.line("got_nodes") == 5
    # got_world: the largest world any launcher reported, on its own line
    c.feed(b"dist_world_size=8\nfoo\ndist_world_size=16\n", 20)
    assert c.number("got_world") == 16 and c.line("got_world") == 22
    assert c.number("asked_world") == 0 and c.line("asked_world") is None and c.text("asked_world") is None


def test_cues_after_the_head_are_not_read():
    c = HeadCues()
    c.feed(b"x" * (HEAD_BYTES + 1) + b"\n", 1)
    c.feed(b"vocab_size: 32000\n", 2)
    assert c.number("vocab") == 0
