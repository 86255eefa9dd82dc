"""The Trainer's notebook progress line (analyzer/detect/notebook_bar.py): read as the training step by
metric_parse and phase, and as a step-time sample by throughput."""
from __future__ import annotations

import re

from llmtriage import scan_source
from llmtriage.detect.metric_parse import BAR_SRC
from llmtriage.detect.notebook_bar import notebook_bar, notebook_sample

NB = " [  23/2080 10:12 < 16:40:10, 0.03 it/s, Epoch 0.00/1]"


def test_the_notebook_line_gives_step_total_and_seconds_per_step():
    n, total, sec = notebook_bar(NB.encode())
    assert (n, total) == (23, 2080) and abs(sec - 1 / 0.03) < 1e-9
    assert notebook_bar(b"[ 5/40 00:10 < 01:10, 2.10 s/it, Epoch 0.10/1]")[2] == 2.10


def test_an_evaluation_bar_and_other_brackets_are_not_read():
    assert notebook_bar(b"[ 5/10 00:01 < 00:02, 2.50 it/s]") is None       # the evaluation bar: no Epoch comment
    assert notebook_bar(b"[rank0]: 3/10 done") is None
    assert re.compile(BAR_SRC).findall(b"| 5/10 3 |") == []


def test_metric_parse_bar_pattern_reads_both_forms():
    r = re.compile(BAR_SRC)
    assert r.findall(NB.encode()) == [(b"23", b"2080")]
    assert r.findall(b"Map (num_proc=2): 100%|##| 22318/22318 [00:09<00:00, 2391.62 examples/s]") == [(b"22318", b"22318")]


def test_throughput_samples_once_per_step_from_the_second():
    seen: dict = {}
    assert notebook_sample(b" [   1/2080 00:03 < : , 0.30 it/s, Epoch 0.00/1]", seen) is None
    assert notebook_sample(NB.encode(), seen) == ("bar/2080", 1 / 0.03)
    assert notebook_sample(NB.encode(), seen) is None        # a redraw of the same step


def test_the_step_of_a_notebook_run_is_its_bar_not_a_dataset_map(engine):
    text = ("Map (num_proc=2): 100%|##########| 22318/22318 [00:09<00:00, 2391.62 examples/s]\n"
            + "".join(f" [{n:4d}/2080 {n // 2:02d}:00 < 16:00:00, 0.03 it/s, Epoch 0.00/1]\n"
                      f"{{'loss': 1.{n:02d}, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.0}}\n" for n in range(5, 30, 5)))
    rep = scan_source(engine, text)
    assert rep.extra["step"] == 25 and rep.extra["phase"] == "training"
    assert rep.extra["throughput"]["step_samples"] == 5
