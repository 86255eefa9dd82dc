"""A distributed init that never completed before a kill (analyzer/detect/init_incomplete.py, rules/verdict.yaml
`init_incomplete` and the `init` markers, texts in rules/detectors.yaml)."""
from llmtriage import analyze

HEAD = "GPU available: True, used: True\n"
CANCEL = "slurmstepd: error: *** JOB 5120 ON node03 CANCELLED AT 2025-01-07T10:02:33 DUE TO TIME LIMIT ***\n"


def _members(seen, world):
    return "".join(f"initializing ddp: GLOBAL_RANK: {k - 1}, MEMBER: {k}/{world}\n" for k in seen)


def _errors(text):
    return [(f.category, f.rule_id) for f in analyze(text).findings if f.severity == "error"]


def test_fewer_members_than_world_then_time_limit():
    rep = analyze(HEAD + _members([1, 2, 3, 4], 8) + CANCEL)
    top = rep.findings[0]
    assert (top.category, top.rule_id) == ("unknown", "verdict-init-world-incomplete")
    assert "4 of 8" in top.message
    kill = next(f for f in rep.findings if f.rule_id == "slurm-job-cancelled")
    assert kill.severity == "warning" and kill.judgement["context"] == "init-incomplete"


def test_lightning_srun_hint_is_named():
    hint = ("/x/lightning/fabric/plugins/environments/slurm.py:204: The `srun` command is available on your system "
            "but is not used. HINT: If your intention is to run Lightning on SLURM, prepend your python command with "
            "`srun` like so: srun python train.py ...\n")
    rep = analyze(hint + HEAD + _members([1], 2) + "slurmstepd: error: *** JOB 33 ON n1 CANCELLED AT 2024-05-27T14:06:31 ***\n")
    assert rep.findings[0].rule_id == "verdict-init-world-incomplete" and "srun was not used (line 1)" in rep.findings[0].message


def test_every_member_joined_keeps_the_kill():
    assert _errors(HEAD + _members([1, 2], 2) + CANCEL)[0] == ("scheduler-kill", "slurm-job-cancelled")


def test_rank_zero_registered_the_world_keeps_the_kill():
    # one node's file: its own MEMBER lines only, but rank zero saw all 8 join
    done = "All distributed processes registered. Starting with 8 processes\n"
    assert _errors(HEAD + _members([1, 2, 3, 4], 8) + done + CANCEL)[0] == ("scheduler-kill", "slurm-job-cancelled")


def test_training_progress_after_init_keeps_the_kill():
    steps = "".join(f"Epoch 0:  {i}%|#| {i}/100 [00:{i:02d}<00:50,  1.00it/s, loss=2.{i}]\n" for i in range(10, 40, 10))
    assert _errors(HEAD + _members([1, 2], 4) + steps + CANCEL)[0] == ("scheduler-kill", "slurm-job-cancelled")


def test_no_kill_no_finding():
    assert _errors(HEAD + _members([1], 2)) == []
