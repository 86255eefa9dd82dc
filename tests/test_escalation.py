"""A SIGKILL that follows a termination the job already received is the termination's escalation
(detect/escalation.py, `kill_after_term` in rules/verdict.yaml), not a guess of the OOM killer."""
from __future__ import annotations

import llmtriage

STEPS = (
    " 41%|████      | 4100/10000 [3:10:02<4:33:40,  2.78s/it]\n"
    "{'loss': 1.412, 'grad_norm': 0.31, 'learning_rate': 1.8e-05, 'epoch': 0.41}\n"
)
TERM = ("W1103 02:14:09.551000 140 torch/distributed/elastic/agent/server/api.py:704] "
        "Received Signals.SIGTERM death signal, shutting down workers\n"
        "W1103 02:14:09.552000 140 torch/distributed/elastic/multiprocessing/api.py:897] "
        "Sending process 212 closing signal SIGTERM\n")
ESCALATE = ("W1103 02:14:39.560000 140 torch/distributed/elastic/multiprocessing/api.py:916] "
            "Unable to shutdown process 212 via Signals.SIGTERM, forcefully exiting via Signals.SIGKILL\n")


def top(rep: llmtriage.Report):
    return next(f for f in rep.findings if f.severity == "error")


def test_shell_kill_after_received_sigterm_is_the_termination():
    rep = llmtriage.analyze(STEPS + TERM + "./train.sh: line 12:   140 Killed                  torchrun --nproc-per-node 8 train.py\n")
    assert top(rep).category == "scheduler-kill" and top(rep).rule_id == "torchelastic-sigterm"
    kill = next(f for f in rep.findings if f.rule_id == "process-sigkilled")
    assert kill.role == "symptom" and kill.judgement["context"] == "kill-after-term"
    assert "line 3" in kill.judgement["reason"]
    assert rep.extra["action"] == "retry"


def test_torchrun_escalation_line_is_not_an_oom_kill():
    rep = llmtriage.analyze(STEPS + TERM + ESCALATE)
    assert not any(f.rule_id == "process-sigkilled" for f in rep.findings)
    assert top(rep).category == "scheduler-kill"


def test_kill_before_any_termination_stays_the_oom_guess():
    rep = llmtriage.analyze(STEPS + "./train.sh: line 12:   140 Killed                  python train.py\n")
    assert top(rep).rule_id == "process-sigkilled" and top(rep).judgement is None


def test_kill_printed_before_the_sigterm_is_not_demoted():
    rep = llmtriage.analyze(STEPS + "[E] worker exited with code 137\n" + TERM)
    kill = next(f for f in rep.findings if f.rule_id == "process-sigkilled")
    assert kill.role == "cause" and kill.judgement is None
