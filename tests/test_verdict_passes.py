"""Verdict passes split from detect/verdict.py: a crashed report always names its death with an error."""
from __future__ import annotations

import llmtriage

FIRST_RUN = (
    "(venv) user@gpu01:~/proj$ python train.py --config cfg.yaml\n"
    "Traceback (most recent call last):\n"
    '  File "/home/user/proj/train.py", line 41, in <module>\n'
    "    main()\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "23.65 GiB of which 1.02 GiB is free.\n"
)
SECOND_RUN = (
    "(venv) user@gpu01:~/proj$ python train.py --config cfg_small.yaml\n"
    "Building model\n"
    "Traceback (most recent call last):\n"
    '  File "/home/user/proj/train.py", line 41, in <module>\n'
    "    main()\n"
    '  File "/home/user/proj/stages.py", line 12, in run_stage\n'
    "    return STAGES[name](cfg)\n"
    "KeyError: 'warmup_v2'\n"
)


def _errors(rep: llmtriage.Report) -> list:
    return [f for f in rep.findings if f.severity == "error"]


def test_rerun_dying_of_an_unrecognised_error_still_has_an_error_finding():
    # the first run's recognised OOM is history once the command was typed again; the rerun's own death
    # (an exception no rule knows) must still be named by an error finding
    rep = llmtriage.analyze(FIRST_RUN + SECOND_RUN)
    assert rep.extra["status"] == "crashed"
    errs = _errors(rep)
    assert errs and errs[0].rule_id == "unknown" and "warmup_v2" in errs[0].message
    oom = [f for f in rep.findings if f.rule_id == "torch-cuda-oom"]
    assert oom and oom[0].severity == "warning"


def test_single_run_keeps_its_recognised_cause_without_a_second_unknown():
    rep = llmtriage.analyze(FIRST_RUN)
    errs = _errors(rep)
    assert [f.rule_id for f in errs] == ["torch-cuda-oom"]
