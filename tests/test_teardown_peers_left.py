"""A collective timeout after the run finished and after the other ranks closed their communicators is shutdown
teardown (analyzer/detect/exit_crash.py `_peers_left`, rules/verdict.yaml exit_after_completion.peers_left);
without the peers leaving it stays the job's own error. A Slurm time limit that ends a job still in its launch
(actions.yaml `time-limit-before-any-progress`) is a fix, not a resubmit."""
from llmtriage import analyze

FINISH = ("Epoch 19: 100%|██████████| 625/625 [04:10<00:00,  2.50it/s, train_loss=0.209]\n"
          "`Trainer.fit` stopped: `max_epochs=20` reached.\n")
LEFT = "".join(f"gpu-b12:22144{n}:22177{n} [{n}] NCCL INFO comm 0x55d1c3a0e2f{n} rank {n} nranks 4 cudaDev {n} busId "
               f"41000 - Destroy COMPLETE\n" for n in (1, 2, 3))
TIMEOUT = ("[rank0]:[E1118 03:52:40.118402911 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
           "timeout: WorkNCCL(SeqNum=112853, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
           "1800047 milliseconds before timing out.\n"
           "terminate called after throwing an instance of 'c10::DistBackendError'\n"
           "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: "
           "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=112853, OpType=ALLREDUCE, NumelIn=1, "
           "NumelOut=1, Timeout(ms)=1800000) ran for 1800047 milliseconds before timing out.\n"
           "srun: error: gpu-b12: task 0: Aborted (core dumped)\n")


def _errors(text):
    return [f for f in analyze(text).findings if f.severity == "error"]


def test_a_timeout_after_the_peers_left_a_finished_run_is_teardown():
    assert _errors(FINISH + LEFT + TIMEOUT) == []


def test_a_timeout_after_the_finish_with_the_peers_still_there_stays_an_error():
    errors = _errors(FINISH + TIMEOUT)
    assert errors and errors[0].category == "nccl-timeout"


def test_peers_leaving_after_the_timeout_do_not_excuse_it():
    errors = _errors(FINISH + TIMEOUT + LEFT)
    assert errors and errors[0].category == "nccl-timeout"


RDZV = ("+ torchrun --nnodes=2 --node-rank=1 --nproc-per-node=8 --rdzv-endpoint=localhost:29500 -m train\n"
        "I0906 13:02:41.231000 5318 torch/distributed/elastic/agent/server/api.py:689] [default] Rendezvous'ing worker group\n"
        "[W906 13:12:41.882104503 socket.cpp:755] [c10d] The client socket has failed to connect to [localhost]:29500 "
        "(errno: 111 - Connection refused). Retrying.\n"
        "slurmstepd: error: *** JOB 5517203 ON gh-b200-017 CANCELLED AT 2026-09-06T13:42:38 DUE TO TIME LIMIT ***\n")


def test_a_time_limit_that_ends_a_job_still_launching_is_a_fix():
    rep = analyze(RDZV)
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.category == "scheduler-kill" and top.action == "fix" and "never got past its launch" in top.action_reason
