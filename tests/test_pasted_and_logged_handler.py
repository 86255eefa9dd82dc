"""Two verdict refinements: a log file the user printed after the job died (detect/pasted.py) and an
exception its handler logged with a fallback message above the traceback (detect/logged_handler.py)."""
from __future__ import annotations

import llmtriage
from llmtriage.findings import Finding

DEATH = (
    "Traceback (most recent call last):\n"
    '  File "/work/train.py", line 40, in <module>\n'
    "    dist.barrier()\n"
    "RuntimeError: create_config:torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:2198 HCCL function error: "
    "HcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 7\n"
    "[rank1]: EI0006: [PID: 3977663] 2025-11-22-17:37:40.447.996 Getting socket times out. Reason: 1. The remote "
    "does not initiate a connect request. some NPUs in the cluster are abnormal.\n"
    "E1122 17:37:41.009000 3977573 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
    "local_rank: 1 (pid: 3977663) of binary: /usr/bin/python3\n"
)
PLOG = (
    "[ERROR] HCCL(3977573,python3):2025-11-22-17:37:04.447.996 [hccl_socket_manager.cc:816] [3977663]"
    "[Wait][LinkEstablish]wait socket establish timeout, role[0] rank[1] timeout[120 s]\n"
    "[ERROR] HCCL(3977573,python3):2025-11-22-17:37:04.448.967 [hccl_socket_manager.cc:599] [3977663] "
    "| 192.168.2.198(9) | 16666 | 192.168.2.199(1) | 0 | server | time out | DISABLE |\n"
)


def _errors(rep: llmtriage.Report) -> list[Finding]:
    return [f for f in rep.findings if f.severity == "error"]


def test_plog_printed_after_the_death_is_not_a_consequence():
    rep = llmtriage.analyze(DEATH + "+ grep -r ERROR /root/ascend/log/debug/plog/plog-3977663_*.log | grep LinkEstablish\n" + PLOG)
    assert rep.extra["status"] == "crashed"
    top = _errors(rep)[0]
    assert top.rule_id == "hccl-socket-link-establish-timeout" and top.judgement is None


def test_the_same_lines_without_the_command_stay_after_death():
    rep = llmtriage.analyze(DEATH + "\n" * 3 + PLOG)
    link = next(f for f in rep.findings if f.rule_id == "hccl-socket-link-establish-timeout")
    assert link.judgement and link.judgement["context"] == "after-death"
    assert _errors(rep)[0].rule_id != "hccl-socket-link-establish-timeout"


HANDLED = (
    "2025-06-16 09:41:08.004 | ERROR    | app.model_init:atom_model_init:161 - model init on npu failed, fallback to cpu\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/app/model_init.py", line 148, in atom_model_init\n'
    "    model = YOLOv10(weight).to(device)\n"
    "RuntimeError: Expected one of cpu, cuda, xpu, mps, meta, privateuseone device type at start of device string: npu\n"
    "2025-06-16 09:41:09.188 | INFO     | app.model_init:atom_model_init:170 - layout model init on cpu done\n"
)
PROGRESS = (
    "Layout Predict: 100%|██████████| 86/86 [01:12<00:00,  1.19it/s]\n"
    "OCR-det Predict: 100%|██████████| 86/86 [00:48<00:00,  1.77it/s]\n"
)


def test_exception_logged_by_a_fallback_handler_is_survived():
    rep = llmtriage.analyze(HANDLED + PROGRESS)
    assert rep.extra["status"] != "crashed"
    assert not _errors(rep)


def test_fallback_handler_without_progress_after_is_still_a_death():
    rep = llmtriage.analyze(HANDLED)
    assert rep.extra["status"] == "crashed"


def test_traceback_without_a_handler_message_is_still_a_death():
    rep = llmtriage.analyze(HANDLED.split("\n", 1)[1] + PROGRESS)
    assert rep.extra["status"] == "crashed"
    assert _errors(rep)


# xformers on Windows probes triton and logs the ModuleNotFoundError traceback under its own notice
TRITON_PROBE = (
    "A matching Triton is not available, some optimizations will not be enabled\n"
    "Traceback (most recent call last):\n"
    '  File "C:\\\\venv\\\\lib\\\\site-packages\\\\xformers\\\\__init__.py", line 55, in _is_triton_available\n'
    "    from xformers.triton.softmax import softmax as triton_softmax  # noqa\n"
    "ModuleNotFoundError: No module named 'triton'\n"
)
STEPS = "".join(f"steps:  {i}%|##        | {i * 10}/1000 [00:{i:02d}<10:00,  1.60it/s, avr_loss=0.11]\n" for i in range(1, 6))


def test_optional_feature_notice_above_a_traceback_with_progress_is_no_failure():
    rep = llmtriage.analyze(TRITON_PROBE + "running training\n" + STEPS)
    assert rep.extra["status"] == "running"
    assert not _errors(rep)
    mod = next(f for f in rep.findings if f.rule_id == "python-module-not-found")
    assert mod.judgement and mod.judgement["context"] == "handled-before-traceback"


def test_optional_feature_notice_then_a_later_crash_names_the_later_crash():
    later = (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 9, in <module>\n'
        "    from sentencepiece import sentencepiece_model_pb2\n"
        "ImportError: cannot import name 'builder' from 'google.protobuf.internal' (/v/google/protobuf/internal/__init__.py)\n"
    )
    rep = llmtriage.analyze(TRITON_PROBE + "loading settings\n" + later)
    assert rep.extra["status"] == "crashed"
    assert "builder" in rep.extra["death"]["evidence"]
    assert _errors(rep)[0].category == "dependency-mismatch"


def test_the_probe_traceback_alone_at_the_end_is_still_a_death():
    rep = llmtriage.analyze(TRITON_PROBE)
    assert rep.extra["status"] == "crashed"
    assert _errors(rep)[0].category == "missing-dependency"


def test_a_handler_notice_heads_only_its_own_traceback():
    """The notice above the first traceback does not cover a second traceback that begins after it."""
    second = (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 3, in <module>\n'
        "    from huggingface_hub import cached_download\n"
        "ImportError: cannot import name 'cached_download' from 'huggingface_hub' (/v/huggingface_hub/__init__.py)\n"
    )
    rep = llmtriage.analyze(TRITON_PROBE + second + "+ echo done\n")
    top = _errors(rep)[0]
    assert top.category == "dependency-mismatch" and top.judgement is None
