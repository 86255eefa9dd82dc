"""A job killed from outside whose pasted accounting shows a step at its memory limit ran out of host
memory (analyzer/detect/accounting.py): sacct MaxRSS against ReqMem, OUT_OF_MEMORY, seff."""
from llmtriage import analyze

HEAD = ("+ srun python train.py --bf16\n"
        "{'loss': 1.912, 'grad_norm': 0.81, 'learning_rate': 2e-05, 'epoch': 0.4}\n"
        " 41%|████      | 410/1000 [12:02<17:19,  1.76s/it]srun: error: c014: task 0: Killed\n"
        "srun: Force Terminated StepId=4410.0\n"
        "$ sacct -j 4410 --format=JobID,State,ExitCode,ReqMem,MaxRSS\n")
SACCT = ("JobID           State ExitCode     ReqMem     MaxRSS \n"
         "------------ ---------- -------- ---------- ---------- \n"
         "4410            FAILED      9:0        16G            \n"
         "4410.batch      FAILED      9:0        16G       512K \n"
         "4410.0       CANCELLED      0:9        16G  {rss} \n")


def _errors(text):
    rep = analyze(text)
    return [f for f in rep.findings if f.severity == "error"], rep


def test_maxrss_at_reqmem_is_host_memory():
    errors, rep = _errors(HEAD + SACCT.format(rss="16773120K"))
    assert errors[0].rule_id == "verdict-memory-at-limit" and errors[0].category == "host-oom"
    assert errors[0].captures["step"] == "4410.0" and errors[0].line == 10
    assert rep.extra["action"] == "fix"
    kill = next(f for f in rep.findings if f.rule_id == "srun-task-killed")
    assert kill.severity == "warning" and kill.judgement["context"] == "memory-at-limit"


def test_maxrss_well_under_reqmem_leaves_the_kill():
    errors, _ = _errors(HEAD + SACCT.format(rss=" 2097152K"))
    assert errors[0].rule_id == "srun-task-killed"


def test_out_of_memory_state_and_parsable_output():
    table = ("JobID|State|ExitCode|ReqMem|MaxRSS|\n"
             "4410|OUT_OF_MEMORY|0:125|64Gn||\n"
             "4410.0|OUT_OF_MEMORY|0:125|64Gn|61000000K|\n")
    errors, _ = _errors(HEAD + table)
    assert errors[0].rule_id == "verdict-memory-at-limit"
    assert errors[0].captures["state"] == "OUT_OF_MEMORY"


def test_seff_memory_efficiency():
    seff = ("Job ID: 4410\nState: FAILED (exit code 9)\nMemory Utilized: 15.98 GB\n"
            "Memory Efficiency: 99.87% of 16.00 GB\n")
    errors, _ = _errors(HEAD + seff)
    assert errors[0].rule_id == "verdict-memory-at-limit" and "16.00 GB" in errors[0].message


def test_a_per_cpu_request_is_not_compared():
    table = SACCT.replace("16G ", "16Gc").format(rss="16773120K")
    errors, _ = _errors(HEAD + table)
    assert errors[0].rule_id == "srun-task-killed"


def test_an_error_of_the_job_itself_keeps_its_place():
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
           "    import flash_attn\nModuleNotFoundError: No module named 'flash_attn'\n"
           + SACCT.format(rss="16773120K"))
    errors, _ = _errors(log)
    assert errors[0].category == "missing-dependency"
