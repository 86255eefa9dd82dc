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
