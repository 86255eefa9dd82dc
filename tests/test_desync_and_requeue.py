"""Ranks out of step and the attempt that finally killed a requeued job.

- Watchdog timeouts that name different collectives (or sizes) at one sequence number, or different sequence
  numbers in one process group, are a desync (keyed `distinct` markers of rules/verdict.yaml,
  detect/scanner.py): actions.yaml `ranks-out-of-step` says fix. Every rank waiting in the same collective
  keeps the category default (retry).
- A new attempt of a requeued job (SLURM_RESTART_COUNT=1, torchelastic restart_count=1) is a resume marker.
- A stop that cut a checkpoint save short, followed by a next attempt that dies reading that checkpoint, is
  `verdict-resumed-interrupted-save` (checkpoint-corrupt, detect/interrupted_save.py); a save reported
  finished before the stop, or a stop long after the save began, is not.
"""
from llmtriage import analyze

WD = ("[rank{r}]:[E1103 14:27:58.118220901 ProcessGroupNCCL.cpp:688] [Rank {r}] Watchdog caught collective operation "
      "timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600012 "
      "milliseconds before timing out.\n")
PG = ("[rank{r}]:[E1103 14:27:58.118390001 ProcessGroupNCCL.cpp:2344] [PG ID {pg} PG GUID {pg} Rank {r}]  failure "
      "detected by watchdog at work sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: 1\n")
TAIL = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "E1103 14:28:05.610000 88121 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) "
        "local_rank: 0 (pid: 88130) of binary: /opt/venv/bin/python\n")


def _rep(text):
    rep = analyze(text)
    top = next(f for f in rep.findings if f.severity == "error")
    return top, rep


def test_every_rank_in_the_same_collective_keeps_retry():
    log = "".join(WD.format(r=r, seq=4013, op="ALLREDUCE", n=1024) for r in range(4)) + TAIL
    top, rep = _rep(log)
    assert top.rule_id == "nccl-watchdog-timeout" and rep.extra["action"] == "retry"


def test_different_collectives_at_one_sequence_number_are_a_desync_to_fix():
    log = ("".join(WD.format(r=r, seq=4013, op="ALLREDUCE", n=1024) for r in (1, 2, 3))
           + WD.format(r=0, seq=4013, op="BROADCAST", n=1) + TAIL)
    top, rep = _rep(log)
    assert top.category == "nccl-timeout" and rep.extra["action"] == "fix"
    assert "out of step" in rep.extra["action_reason"]


def test_different_sizes_of_one_allreduce_are_a_desync_but_all_to_all_sizes_may_differ():
    sizes = WD.format(r=0, seq=120, op="ALLREDUCE", n=3) + WD.format(r=1, seq=129, op="ALLREDUCE", n=3)
    assert _rep(sizes + TAIL)[1].extra["action"] == "retry"
    mismatch = WD.format(r=0, seq=77, op="ALLREDUCE", n=3) + WD.format(r=1, seq=77, op="ALLREDUCE", n=2)
    assert _rep(mismatch + TAIL)[1].extra["action"] == "fix"
    a2a = WD.format(r=0, seq=77, op="ALLTOALL_BASE", n=1379328) + WD.format(r=1, seq=77, op="ALLTOALL_BASE", n=1572864)
    assert _rep(a2a + TAIL)[1].extra["action"] == "retry"


def test_different_sequence_numbers_count_only_within_one_process_group():
    same_pg = (WD.format(r=0, seq=216, op="ALLREDUCE", n=8) + PG.format(r=0, pg=4, seq=216)
               + WD.format(r=1, seq=217, op="ALLREDUCE", n=8) + PG.format(r=1, pg=4, seq=217))
    assert _rep(same_pg + TAIL)[1].extra["action"] == "fix"
    two_pgs = (WD.format(r=0, seq=216, op="ALLREDUCE", n=8) + PG.format(r=0, pg=4, seq=216)
               + WD.format(r=1, seq=57, op="ALLREDUCE", n=8) + PG.format(r=1, pg=7, seq=57))
    assert _rep(two_pgs + TAIL)[1].extra["action"] == "retry"


SAVE = "[rank0]:2026-07-29 20:17:41 | INFO | checkpoint | Saving checkpoint to /lustre/ft/ckpt/epoch_0_step_1200\n"
SAVED = "[rank0]:2026-07-29 20:18:30 | INFO | checkpoint | Saved checkpoint to /lustre/ft/ckpt/epoch_0_step_1200\n"
KILL = "slurmstepd: error: *** JOB 2231907 ON dgx-041 CANCELLED AT 2026-07-29T20:18:02 DUE TO TIME LIMIT ***\n"
ATTEMPT2 = "==== SLURM_JOB_ID=2231907 SLURM_RESTART_COUNT=1 ====\n"
READ = ("Traceback (most recent call last):\n"
        '  File "/opt/train.py", line 88, in <module>\n'
        "    state = torch.load(path)\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/lustre/ft/ckpt/epoch_0_step_1200/optim_rank3.pt'\n"
        "srun: error: dgx-041: task 0: Exited with exit code 1\n")


def test_a_requeued_attempt_that_dies_reading_the_checkpoint_a_stop_cut_short():
    top, rep = _rep(SAVE + KILL + ATTEMPT2 + READ)
    assert top.rule_id == "verdict-resumed-interrupted-save" and top.category == "checkpoint-corrupt"
    assert rep.extra["action"] == "fix"
    kill = next(f for f in rep.findings if f.category == "scheduler-kill")
    assert kill.severity == "warning" and kill.judgement["context"] == "requeued-then-failed"


def test_a_save_reported_finished_before_the_stop_is_not_an_interrupted_save():
    top, _ = _rep(SAVE + SAVED + KILL + ATTEMPT2 + READ)
    assert top.rule_id != "verdict-resumed-interrupted-save"


def test_a_stop_long_after_the_save_began_is_not_an_interrupted_save():
    steps = "".join(f"[rank0]: step {1200 + i} | loss 1.41 | lr 1.8e-05\n" for i in range(300))
    top, _ = _rep(SAVE + steps + KILL + ATTEMPT2 + READ)
    assert top.rule_id != "verdict-resumed-interrupted-save"


FR_TRACE = ("$ python -m torch.distributed.flight_recorder.fr_trace /scratch/fr -p nccl_trace_rank_\n"
            "Not all ranks joining collective, sequence number: 4013\n"
            "collective: nccl:all_reduce\n"
            "missing ranks: {3}\n")


def test_a_flight_recorder_analysis_naming_a_missing_rank_is_a_fix():
    log = "".join(WD.format(r=r, seq=4013, op="ALLREDUCE", n=1024) for r in (0, 1, 2)) + TAIL + FR_TRACE
    top, rep = _rep(log)
    assert top.category == "nccl-timeout" and rep.extra["action"] == "fix"
    assert "Flight Recorder" in rep.extra["action_reason"]


def test_a_death_followed_by_a_new_attempt_that_trains_is_history():
    log = ("[rank0]: step 3120 | loss 1.2230\n" + WD.format(r=2, seq=40211, op="ALLREDUCE", n=8) + TAIL
           + "I0602 10:22:09.005000 801 torch/distributed/elastic/agent/server/api.py:525]   restart_count=1\n"
           + "[rank0]: Epoch 4 | batch 3050 | loss 1.2281\n[rank0]: Epoch 4 | batch 3100 | loss 1.2244\n")
    rep = analyze(log)
    assert rep.extra["status"] == "running" and rep.extra["action"] == "none"
    assert not [f for f in rep.findings if f.severity == "error"]


def test_restart_count_zero_is_not_a_new_attempt():
    log = ("I0602 10:02:09.005000 801 torch/distributed/elastic/agent/server/api.py:525]   restart_count=0\n"
           + WD.format(r=2, seq=40211, op="ALLREDUCE", n=8) + TAIL
           + "[rank0]: Epoch 4 | batch 3050 | loss 1.2281\n")
    rep = analyze(log)
    assert rep.extra["status"] == "crashed"
