"""How batch schedulers' end-of-job lines weigh in the verdict (rules/verdict.yaml markers
`slurm-oom-event`, `batch-limit-kill`, `teardown_after_finish`, `finished.reason_before`)."""
from __future__ import annotations

import llmtriage

TRAIN = (
    "***** Running training *****\n"
    "{'loss': 1.412, 'grad_norm': 0.31, 'learning_rate': 1.8e-05, 'epoch': 0.41}\n"
    "{'loss': 1.101, 'grad_norm': 0.29, 'learning_rate': 2.0e-06, 'epoch': 0.98}\n"
)
FINISH = "{'train_runtime': 3301.2, 'train_samples_per_second': 9.1, 'train_steps_per_second': 0.3, 'train_loss': 1.2, 'epoch': 1.0}\n"
OOM_EVENT = "slurmstepd: error: Detected 1 oom_kill event in StepId=881.batch. Some of the step tasks have been OOM Killed.\n"


def errors(rep: llmtriage.Report):
    return [f for f in rep.findings if f.severity == "error"]


def test_oom_event_note_after_the_finish_does_not_undo_it():
    rep = llmtriage.analyze(TRAIN + FINISH + "[eval] win-rate 0.61, results written\n" + OOM_EVENT)
    assert rep.extra["status"] == "finished" and not errors(rep)
    oom = next(f for f in rep.findings if f.category == "host-oom")
    assert oom.severity == "warning" and oom.judgement["context"] == "finished"
    assert "already finished" in oom.judgement["reason"]          # the note came after the finish line


def test_oom_event_before_any_finish_is_the_death():
    rep = llmtriage.analyze(TRAIN + OOM_EVENT)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "slurm-oom-event"
    assert errors(rep)[0].category == "host-oom"


def test_a_killed_process_after_the_finish_is_still_a_crash():
    # the final save killed: bash reports the job's own process Killed beside Slurm's note
    rep = llmtriage.analyze(TRAIN + FINISH + "Saving model checkpoint to out/final\n" + OOM_EVENT
                            + "/var/spool/slurmd/job881/slurm_script: line 9: 4121 Killed                  python train.py\n")
    assert rep.extra["status"] == "crashed" and errors(rep)[0].category == "host-oom"


def test_srun_out_of_memory_task_is_a_death():
    rep = llmtriage.analyze(TRAIN + "srun: error: gpu-a01: task 0: Out Of Memory\n")
    assert rep.extra["status"] == "crashed"


def test_pbs_walltime_kill_ends_the_run_as_a_time_limit():
    rep = llmtriage.analyze(TRAIN + " 48%|████▊     | 9101/19041 [23:58:29<26:10:18,  9.48s/it]"
                                    "=>> PBS: job killed: walltime 86415 exceeded limit 86400\n")
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "batch-limit-kill"
    top = errors(rep)[0]
    assert top.rule_id == "pbs-walltime-exceeded" and top.action == "fix"


def test_lsf_reason_in_the_mail_header_is_no_death_marker_for_the_output_below():
    # LSF prints TERM_* above the job's output: what the job printed below it is not "after the death"
    rep = llmtriage.analyze("TERM_OWNER: job killed by owner.\nExited with exit code 130.\n\n"
                            "The output (if any) follows:\n\n" + TRAIN)
    assert errors(rep)[0].rule_id == "lsf-job-terminated"
    assert all(not (f.judgement or {}).get("context", "").startswith("after") for f in rep.findings)
