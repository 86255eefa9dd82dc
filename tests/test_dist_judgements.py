"""Distributed-training judgements: a wrapper exception that only points at the logs, a collective
timeout before any step, nccl-tests result rows as progress, Slurm's task-failure cancel, the NCCL
unique-id fetch that timed out with no sign of rank 0 being busy."""
from __future__ import annotations

import llmtriage
from llmtriage.findings import Finding


def run(text: str) -> llmtriage.Report:
    return llmtriage.analyze(text)


def errors(rep: llmtriage.Report) -> list[Finding]:
    return [f for f in rep.findings if f.severity == "error"]


WATCHDOG = ("[rank3]:[E502 14:21:24.5 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum={seq}, OpType=_ALLGATHER_BASE, NumelIn=2049024, NumelOut=4098048, Timeout(ms)=600000) "
            "ran for 600047 milliseconds before timing out.\n")


def test_an_exception_that_only_points_at_the_logs_is_no_root_cause_guess():
    wrapper = ("Traceback (most recent call last):\n"
               '  File "/opt/lib/launch.py", line 205, in main\n'
               '    raise RuntimeError("Suffered a failure during distributed training. Please see the training logs for more context.")\n'
               "RuntimeError: Suffered a failure during distributed training. Please see the training logs for more context.\n")
    rep = run(WATCHDOG.format(seq=1) + wrapper)
    assert errors(rep)[0].rule_id == "nccl-watchdog-timeout"
    assert not any(f.rule_id == "unknown" for f in errors(rep))
    # an exception that says something of its own is still the unrecognised root-cause guess
    own = wrapper.replace("Suffered a failure during distributed training. Please see the training logs for more context.",
                          "flux capacitor ran dry in the warp coil")
    assert errors(run(WATCHDOG.format(seq=1) + own))[0].rule_id == "unknown"


def test_a_collective_timeout_with_the_loop_bar_still_at_zero_is_fix():
    bar0 = "  0%|          | 0/904 [00:00<?, ?it/s]\n"
    rep = run("Starting training...\n" + bar0 + WATCHDOG.format(seq=13))
    assert errors(rep)[0].rule_id == "nccl-watchdog-timeout" and rep.extra["action"] == "fix"
    steps = "".join(f" {i}%|█         | {i * 9}/904 [0{i}:00<30:00,  1.30s/it]\n" for i in range(1, 6))
    assert run("Starting training...\n" + steps + WATCHDOG.format(seq=913)).extra["action"] == "retry"
    # no bar at all (a server, custom step lines): nothing says no step was done, the default stands
    assert run("Starting training...\n" + WATCHDOG.format(seq=13)).extra["action"] == "retry"


def test_nccl_tests_result_rows_are_progress():
    rows = "".join(f"    {size:>10}  {size // 4:>10}     float     sum      -1    91.27   11.49   21.54      0    90.88   11.54   21.63      0\n"
                   for size in (65536, 131072, 262144, 524288))
    ib = ("node2:353236:353423 [6] transport/net_ib.cc:2244 NCCL WARN NET/IB: Got completion from peer 192.168.3.5<53908> "
          "with status=12 opcode=129 len=1048576 vendor err 129 (Recv) localGid ::ffff:192.168.6.3 remoteGids::ffff:192.168.6.5 hca mlx5_10\n"
          "node2: Test NCCL failure common.cu:403 'remote process exited or there was a network error / '\n")
    rep = run(rows + ib)
    assert errors(rep)[0].rule_id == "nccl-ib-fabric-error" and rep.extra["action"] == "retry"
    assert run(ib).extra["action"] == "fix"            # no row printed: failed before any transfer completed
    # a local access violation is the plugin/driver or memory-registration setup: fix even after rows
    lav = "node201:127799:127863 [0] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work queue error\n"
    assert run(rows + lav + ib).extra["action"] == "fix"


def test_slurm_cancelling_a_step_for_a_failed_task_is_the_task_failure_not_a_scheduler_kill():
    log = ("srun: error: nid002889: task 58: Exited with exit code 1\n"
           "[2026-04-29T23:36:37.809] error: *** STEP 52222788.0 ON nid002888 CANCELLED AT 2026-04-29T23:36:37 DUE TO TASK FAILURE ***\n"
           "srun: error: nid002888: tasks 0-57,59-63: Terminated\n")
    rep = run(log)
    assert errors(rep)[0].category == "launcher-child-failed"
    assert not any(f.rule_id == "slurm-job-cancelled" for f in rep.findings)


def test_a_unique_id_fetch_timeout_is_a_bootstrap_failure_unless_rank0_was_busy():
    err = ("[rank5]: torch.distributed.DistBackendError: [5] is setting up NCCL communicator and retrieving ncclUniqueId "
           "from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n")
    rep = run("building GPT model ...\n" + err)
    assert errors(rep)[0].rule_id == "nccl-unique-id-fetch-timeout" and errors(rep)[0].category == "nccl-error"
    busy = "Running tokenizer on dataset:  56%|█████▌    | 1066000/1903221 [18:27<14:29, 962.88 examples/s]\n"
    assert errors(run(busy + err))[0].rule_id == "c10d-store-timeout"
