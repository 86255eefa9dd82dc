"""An Ascend driver older than the CANN toolkit turns the HCCL/ACL error into a driver/toolkit mismatch."""
from __future__ import annotations

import llmtriage

HCCL_FAIL = (
    "(Worker_TP0 pid=480) ERROR 08-03 09:15:12 [multiproc_executor.py:671] RuntimeError: [ERROR] HCCL error in: "
    "torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:2311\n"
    "(Worker_TP0 pid=480) ERROR 08-03 09:15:12 [multiproc_executor.py:671] [ERROR] 2026-08-03-09:15:12 "
    "(PID:480, Device:0, RankID:0) ERR02200 DIST call hccl api failed.\n"
)


def _log(driver: str, cann: str) -> str:
    return (
        "root@node:/workspace# cat /usr/local/Ascend/driver/version.info\n"
        f"Version={driver}\n"
        "root@node:/workspace# cat /usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info\n"
        "package_name=Ascend-cann-toolkit\n"
        f"version={cann}\n"
        "root@node:/workspace# python serve.py\n" + HCCL_FAIL
    )


def _top(rep: llmtriage.Report):
    return next(f for f in rep.findings if f.severity == "error")


def test_driver_older_than_the_toolkit_makes_the_hccl_error_a_version_mismatch():
    rep = llmtriage.analyze(_log("24.1.rc2", "8.3.RC1"))
    top = _top(rep)
    assert top.category == "cuda-version-mismatch"
    assert top.judgement and top.judgement["category_was"] == "nccl-error"
    assert "24.1.rc2" in top.judgement["reason"] and "8.3.RC1" in top.judgement["reason"]


def test_a_driver_new_enough_for_the_toolkit_leaves_the_hccl_error_alone():
    rep = llmtriage.analyze(_log("25.3.rc1", "8.3.RC1"))
    assert _top(rep).category == "nccl-error"
