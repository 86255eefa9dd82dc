"""A distributed job Slurm stopped at its time limit hours after its last progress hung: the hang is the
root cause (nccl-timeout) and the cancellation its symptom (analyzer/detect/hung.py)."""
from llmtriage import analyze

KILL = ("slurmstepd: error: *** JOB 771204 ON gpu-a41 CANCELLED AT 2026-11-27T{kill} DUE TO TIME LIMIT ***\n"
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n")


def _log(last: str, kill: str, distributed: bool = True, rate: str = "", hour: str = "03") -> str:
    head = "+ srun torchrun --nproc_per_node 8 train.py\n[rank0] NCCL INFO NCCL version 2.27.3\n" if distributed \
        else "+ python train.py --bf16\n"
    steps = "".join(f"[2026-11-27 {hour}:{10 + i:02d}:05,118] step {i}/400 loss {2.0 - i * 0.01:.3f}{rate}\n"
                    for i in range(1, 9))
    return head + steps + f"[2026-11-27 {last},001] saving nothing, waiting\n" + KILL.format(kill=kill)


def _errors(text):
    rep = analyze(text)
    return [f for f in rep.findings if f.severity == "error"], rep


def test_hours_of_silence_before_the_time_limit_is_a_hang():
    errors, rep = _errors(_log("03:18:30", "12:00:22"))
    assert errors[0].rule_id == "verdict-hung-until-killed" and errors[0].category == "nccl-timeout"
    kill = next(f for f in rep.findings if f.rule_id == "slurm-job-cancelled")
    assert kill.severity == "warning" and kill.judgement["context"] == "hung-until-killed"
    assert "8 h 42 min" in errors[0].message and "line 10" in errors[0].message


def test_progress_until_shortly_before_the_limit_is_no_hang():
    errors, _ = _errors(_log("11:45:30", "12:00:22", hour="11"))
    assert errors[0].rule_id == "slurm-job-cancelled"


def test_a_single_process_job_is_left_to_the_kill():
    errors, _ = _errors(_log("03:18:30", "12:00:22", distributed=False))
    assert errors[0].rule_id == "slurm-job-cancelled"


def test_a_gap_of_a_few_long_steps_is_no_hang():
    # steps of ~50 minutes: a 3-hour gap is under 10 step times
    log = _log("03:18:30", "06:20:00", rate=" | 3000.0s/it").replace(
        "[rank0] NCCL", " 2%|▏ | 8/400 [6:40:00<326:40:00, 3000.00s/it]\n[rank0] NCCL")
    errors, _ = _errors(log)
    assert errors[0].rule_id != "verdict-hung-until-killed"


def test_a_server_log_pasted_after_the_kill_is_not_the_jobs_progress():
    # the user appended the rollout server's tail under the job's log: its request lines come after the
    # kill, and the job's own last progress is the step before the silence
    tail = ("$ tail -2 vllm_server.log\n"
            'INFO:     127.0.0.1:40112 - "POST /update_named_param/ HTTP/1.1" 200 OK\n'
            'INFO:     127.0.0.1:40112 - "POST /update_named_param/ HTTP/1.1" 200 OK\n')
    errors, rep = _errors(_log("03:18:30", "12:00:22") + tail)
    assert errors[0].rule_id == "verdict-hung-until-killed", [f.rule_id for f in errors]
    assert "line 10" in errors[0].message


def _bar_log(bar: str, kill: str) -> str:
    # the last time stamp comes before the progress bar; nothing after the bar carries one
    return ("+ srun accelerate launch --num_processes 8 train_grpo.py\n[rank0] NCCL INFO NCCL version 2.26.2\n"
            "[2026-11-27 03:10:05,118] INFO - *** Train ***\n"
            'INFO:     127.0.0.1:40118 - "POST /update_named_param/ HTTP/1.1" 200 OK\n'
            f"{bar}\n" + KILL.format(kill=kill))


def test_a_bar_stuck_at_zero_until_the_time_limit_is_a_hang_before_the_first_step():
    # the bar's elapsed time dates it from the stamp before it: 0/1875 at 00:00, then hours of nothing
    errors, rep = _errors(_bar_log("  0%|          | 0/1875 [00:00<?, ?it/s]", "07:02:18"))
    assert errors[0].rule_id == "verdict-hung-until-killed", [f.rule_id for f in errors]
    assert "3 h 52 min" in errors[0].message and errors[0].captures["done"] == "0"
    assert errors[0].action == "fix"


def test_a_bar_whose_elapsed_time_reaches_the_kill_is_no_hang():
    # the bar itself ran for 3 h 50 min: it was still progressing when the time limit came
    errors, _ = _errors(_bar_log(" 52%|█████▏    | 980/1875 [3:50:02<3:30:11, 14.1s/it]", "07:02:18"))
    assert errors[0].rule_id != "verdict-hung-until-killed"


def test_a_short_silence_after_an_undated_bar_is_no_hang():
    # without a time stamp after the bar, under two hours is not enough to call it hung
    errors, _ = _errors(_bar_log("  0%|          | 0/1875 [00:00<?, ?it/s]", "04:40:00"))
    assert errors[0].rule_id != "verdict-hung-until-killed"


# ---------------------------------------------------------------- a stop short of the time limit
def _stopped_log(kill: str, every: int = 60, after: str = "", saves: str = "", steps: int = 30,
                 head: str = "+ srun torchrun --nnodes 4 --nproc_per_node 8 pretrain.py\n[rank0] NCCL INFO NCCL version 2.21.5\n") -> str:
    """A distributed job that logs a step every `every` seconds from 02:00:00, then `after`, then `kill`."""
    rows = []
    for i in range(1, steps + 1):
        t = 2 * 3600 + i * every
        rows.append(f"[2026-11-27 {t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d},118] step {i}/5000 loss {3.0 - i * 0.01:.3f}\n")
        if saves and i == steps // 2:
            rows.append(saves)
    return head + "".join(rows) + after + kill


_SCANCEL = "slurmstepd: error: *** JOB 771204 ON gpu-a41 CANCELLED AT 2026-11-27T{at} ***\nsrun: error: gpu-a41: tasks 0-7: Terminated\n"


def test_a_users_scancel_many_logging_intervals_after_the_last_step_is_a_hang():
    # steps every minute until 02:30, then nothing until the user's scancel at 02:48: 18 intervals of silence
    errors, rep = _errors(_stopped_log(_SCANCEL.format(at="02:48:10")))
    assert errors[0].rule_id == "verdict-hung-until-killed" and errors[0].category == "nccl-timeout", \
        [f.rule_id for f in errors]
    assert "stopped from outside" in errors[0].message and errors[0].captures["cadence"] == "60"
    assert rep.extra["action"] == "retry"
    kill = next(f for f in rep.findings if f.rule_id == "slurm-job-cancelled")
    assert kill.severity == "warning" and kill.judgement["context"] == "hung-until-killed"


def test_a_stop_a_few_minutes_after_the_last_step_is_no_hang():
    errors, _ = _errors(_stopped_log(_SCANCEL.format(at="02:36:00")))      # 6 min: under min_gap_s
    assert errors[0].rule_id != "verdict-hung-until-killed"


def test_a_silence_of_a_few_logging_intervals_of_a_sparse_logger_is_no_hang():
    # a step logged every 5 minutes: 25 minutes of silence is 5 intervals, not a stall
    errors, _ = _errors(_stopped_log(_SCANCEL.format(at="04:55:00"), every=300, steps=30))
    assert errors[0].rule_id != "verdict-hung-until-killed"


def test_a_save_still_running_weighs_against_a_hang_by_the_jobs_own_earlier_save():
    # steps every minute; the earlier save took 12 minutes (02:15 -> the next step at 02:27); steps go on to
    # 02:40, a save begins at 02:40:30, and the user stops the job at 03:00:10: 20 minutes, within twice the
    # job's own save, so not judged hung
    def at(m: int) -> str:
        return f"[2026-11-27 {2 + m // 60:02d}:{m % 60:02d}:00,118]"
    rows = [f"{at(m)} step {m}/5000 loss {3.0 - m * 0.01:.3f}\n" for m in range(1, 16)]
    rows.append("[2026-11-27 02:15:10,001] Saving checkpoint to /lustre/ckpt/step_15 ...\n")
    rows += [f"{at(m)} step {m - 11}/5000 loss {3.0 - m * 0.01:.3f}\n" for m in range(27, 41)]
    head = "+ srun torchrun --nnodes 4 --nproc_per_node 8 pretrain.py\n[rank0] NCCL INFO NCCL version 2.21.5\n"
    kill = _SCANCEL.format(at="03:00:10")
    in_flight = "[2026-11-27 02:40:30,001] Saving checkpoint to /lustre/ckpt/step_30 ...\n"
    errors, _ = _errors(head + "".join(rows) + in_flight + kill)
    assert errors[0].rule_id != "verdict-hung-until-killed"
    # the same silence with no save in flight is a hang
    errors, _ = _errors(head + "".join(rows) + kill)
    assert errors[0].rule_id == "verdict-hung-until-killed"


def test_a_preemption_after_a_silence_stays_the_schedulers():
    kill = "slurmstepd: error: *** JOB 771204 ON gpu-a41 CANCELLED AT 2026-11-27T02:48:10 DUE TO PREEMPTION ***\n"
    errors, _ = _errors(_stopped_log(kill))
    assert errors[0].rule_id == "slurm-job-cancelled"


def test_a_sigterm_no_rule_names_is_judged_once_the_verdict_names_it():
    # mpirun's "exited on signal 15" is a death the verdict names late (scheduler-kill family); the wrapper's
    # closing line after it dates the stop
    kill = ("mpirun noticed that process rank 0 with PID 4411 on node w-0 exited on signal 15 (Terminated).\n"
            "[2026-11-27 02:50:02] launcher: received SIGTERM, exiting 143\n")
    errors, rep = _errors(_stopped_log(kill, head="+ mpirun -np 32 python train.py\nw-0:4411:4470 [0] NCCL INFO NCCL version 2.21.5\n"))
    assert errors[0].rule_id == "verdict-hung-until-killed", [f.rule_id for f in errors]
    assert "20 min" in errors[0].message


def test_a_hang_while_loading_a_checkpoint_before_any_step_is_fixed_not_retried():
    # the data-loading bars reached 100%, then the ranks went silent loading the checkpoint until the kill:
    # a relaunch waits at the same start-up step, so the next action is fix; a hang after steps stays retry
    text = ("+ srun torchrun --nproc_per_node 8 train.py\n[rank0] NCCL INFO NCCL version 2.27.3\n"
            "[rank0]:Resolving data files: 100%|##########| 2048/2048 [04:51<00:00,  7.03it/s]\n"
            "[rank0]:Loading dataset shards: 100%|##########| 1536/1536 [05:02<00:00,  5.08it/s]\n"
            "[rank0]:[2026-11-27 03:10:20,303] INFO - Loading the checkpoint at step 12000.\n"
            "[rank7]:[2026-11-27 03:16:02,117] INFO - Loading the checkpoint at step 12000.\n"
            + KILL.format(kill="09:14:06"))
    errors, rep = _errors(text)
    assert errors[0].rule_id == "verdict-hung-until-killed", [f.rule_id for f in errors]
    assert rep.extra["phase"] in ("model-loading", "data-loading") and errors[0].action == "fix"
    errors, _ = _errors(_log("03:18:30", "12:00:22"))
    assert errors[0].action == "retry"


def test_an_undated_bar_that_was_counting_steps_leaves_the_time_limit_to_the_kill():
    # epochs print tqdm bars with no time stamps; the last stamped line is an earlier save. The bar had
    # counted 1961 steps: the job was advancing when last seen, and the log cannot date that redraw
    # (its elapsed runs from the bar's own start), so the time limit is the answer, not a hang
    errors, rep = _errors(_bar_log(" 67%|██████▋   | 1961/2920 [1:55:01<56:14,  0.28it/s]", "09:02:18"))
    assert errors[0].rule_id == "slurm-job-cancelled", [f.rule_id for f in errors]
    assert not any(f.rule_id == "verdict-hung-until-killed" for f in rep.findings)
