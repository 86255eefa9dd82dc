"""A pasted terminal session holding two runs of one command: the last run's error is the one the user faces
(detect/rerun.py, `rerun` in rules/verdict.yaml)."""
from __future__ import annotations

import llmtriage

PROMPT = "(env) ana@box:~/proj$ "
RUN1 = (
    PROMPT + "python serve.py --model ./ckpt\n"
    "Traceback (most recent call last):\n"
    '  File "/home/ana/proj/serve.py", line 9, in <module>\n'
    "    cfg = load_cfg(path)\n"
    '  File "/home/ana/proj/cfgutil.py", line 30, in load_cfg\n'
    "    raise FileNotFoundError(path)\n"
    "FileNotFoundError: ./ckpt/serve.toml\n"
)
FIX = PROMPT + "cp serve.example.toml ./ckpt/serve.toml\n"
RUN2 = (
    PROMPT + "python serve.py --model ./ckpt\n"
    "Traceback (most recent call last):\n"
    '  File "/home/ana/proj/serve.py", line 12, in <module>\n'
    "    start(cfg)\n"
    '  File "/home/ana/proj/server.py", line 51, in start\n'
    "    raise ValueError(f'port {cfg.port} out of range')\n"
    "ValueError: port 99999 out of range\n"
)


def _errors(text: str) -> list:
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_second_run_of_the_same_command_is_the_failure_now():
    rep = llmtriage.analyze(RUN1 + FIX + RUN2)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["line"] == 15
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs[0].captures["type"] == "ValueError"
    assert all(f.line > 8 for f in errs)


def test_a_different_command_does_not_make_the_first_death_history():
    """Another program after the death (a diagnostic script that fails too) is not a rerun of the job."""
    other = RUN2.replace("python serve.py --model ./ckpt", "python check_env.py", 1)
    rep = llmtriage.analyze(RUN1 + FIX + other)
    assert rep.extra["death"]["line"] == 7


def test_a_file_viewer_repeated_is_no_rerun():
    """`tail -f` typed twice shows output, it starts no run."""
    text = (PROMPT + "tail -f out.log\n" + RUN1.split("\n", 1)[1] + PROMPT + "tail -f out.log\n"
            + RUN2.split("\n", 1)[1])
    rep = llmtriage.analyze(text)
    assert rep.extra["death"]["line"] == 7
