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
