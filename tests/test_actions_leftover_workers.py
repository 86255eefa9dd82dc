"""A port bind failure whose log lists the serving engine's own workers still alive: leftovers to kill, then retry."""
from __future__ import annotations

import llmtriage


def action(text: str) -> tuple[str, str]:
    rep = llmtriage.analyze(text)
    return rep.extra["action"], rep.extra["action_reason"]


HCCL = ("(EngineCore_DP0 pid=501) (Worker_DP0_TP1_EP1 pid=611) ERROR 06-17 14:03:31 [multiproc_executor.py:597] "
        "EJ0003: [PID: 611] 2026-06-17-14:03:31.114.207 Failed to bind the IP port. Reason: The IP address and port "
        "have been bound already.\n"
        "(EngineCore_DP0 pid=501) ERROR 06-17 14:03:33 [core.py:708] EngineCore failed to start.\n"
        "(APIServer pid=214) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {'EngineCore_DP0': 1}\n")


def test_leftover_engine_workers_listed_after_the_bind_failure_make_it_retry():
    for listing in ("$ npu-smi info -t proc-mem -i 1\n        Process id:71406  Process name:VLLM::Worker_DP  "
                    "Process memory(MB):52412\n",
                    "$ nvidia-smi\n|    1   N/A  N/A     71406      C   VLLM::Worker_TP1                   52412MiB |\n",
                    "$ ps -ef | grep VLLM\nroot      71406      1 99 14:02 ?        00:10:00 VLLM::EngineCore_DP0\n"):
        act, reason = action(HCCL + listing)
        assert act == "retry" and "VLLM::Worker" in reason


def test_without_a_listing_the_fixed_hccl_port_stays_fix():
    act, reason = action(HCCL)
    assert act == "fix"
    # the engine's own log prefixes name its processes, but not as a process listing
    act, _ = action(HCCL + "(EngineCore_DP0 pid=501) INFO 06-17 14:03:40 [core.py:77] shutting down VLLM::Worker threads\n")
    assert act == "fix"
