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


ATTEMPT1 = (
    "+ python train.py --max_epochs 400\n"
    "Epoch 6: 100%|##########| 62/62 [00:02<00:00, 24.55it/s, loss=0.221]\n"
    "Epoch 7: 100%|##########| 62/62 [00:02<00:00, 24.43it/s, loss=0.210]\n"
    "/var/spool/slurmd/job48213/slurm_script: line 14: 118842 Killed                  python train.py --max_epochs 400\n"
)
ATTEMPT2 = (
    "+ python train.py --max_epochs 400 --resume_from_checkpoint ckpt/epoch=7.ckpt\n"
    "Traceback (most recent call last):\n"
    '  File "train.py", line 136, in main\n'
    "    trainer.fit(model, train_loader, val_loader)\n"
    '  File "/venv/lib/python3.7/site-packages/torch/serialization.py", line 620, in _load\n'
    "    deserialized_objects[key]._set_from_file(f, offset, f_should_read_directly)\n"
    "RuntimeError: unexpected EOF, expected 8 more bytes. The file might be corrupted.\n"
)


def test_a_job_script_traced_again_is_a_later_attempt():
    """`set -x` traces the script's command once per run: a second trace after a death starts a later attempt,
    and when that attempt dies too, its failure (not the earlier kill) is the one to fix now."""
    rep = llmtriage.analyze(ATTEMPT1 + ATTEMPT2)
    errs = _errors(ATTEMPT1 + ATTEMPT2)
    assert rep.extra["death"]["line"] == 11
    assert errs[0].category == "checkpoint-corrupt"
    assert all(f.line > 5 for f in errs)


def test_a_traced_different_command_keeps_the_first_death():
    """A later traced command of another program (an evaluation script) is not a rerun of the one that died."""
    other = ATTEMPT2.replace("+ python train.py --max_epochs 400", "+ python evaluate.py", 1)
    rep = llmtriage.analyze(ATTEMPT1 + other)
    assert rep.extra["death"]["line"] == 4


FINISHED_THEN_NEXT = (
    "(swift) root@dsw-1:/mnt/work# swift export --adapters out/checkpoint-1200 --merge_lora true\n"
    "[INFO:swift] Successfully merged LoRA and saved in out/checkpoint-1200-merged.\n"
    "[INFO:swift] End time of running main: 2025-02-18 10:04:57.918204\n"
    "(swift) root@dsw-1:/mnt/work# ollama create qwen-sft --file Modelfile\n"
    "gathering model components\n"
    "copying file sha256:7c0f5e4d 41%\n"
    "Error: write /root/.ollama/models/blobs/sha256-7c0f5e4d-partial: no space left on device\n"
    "Filesystem      Size  Used Avail Use% Mounted on\n"
    "overlay          30G   30G     0 100% /\n"
)


def test_an_error_of_the_next_command_typed_after_a_finish_stays_an_error():
    """The finish ended the earlier command; the command typed after it failed on its own (verdict.py keeps it)."""
    errs = _errors(FINISHED_THEN_NEXT)
    assert errs and errs[0].category == "disk-full" and errs[0].line == 7


def test_an_error_printed_after_a_finish_with_no_new_command_is_teardown():
    """Without a command typed after the finish, a later line is the finished run's own tail (demoted)."""
    text = FINISHED_THEN_NEXT.split("(swift) root@dsw-1:/mnt/work# ollama")[0] + (
        "[WARNING:swift] could not write the run summary: OSError: [Errno 28] No space left on device\n"
        "[INFO:swift] exiting\n")
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "finished" and not _errors(text)



def _twice(second: str) -> str:
    tb = ("Traceback (most recent call last):\n"
          '  File "main_finetune.py", line 46, in <module>\n'
          "    from pkg.util import helper\n"
          '  File "/srv/repo/pkg/util.py", line 37, in <module>\n'
          "    exc_type: Optional[type[BaseException]],\n"
          "TypeError: 'type' object is not subscriptable\n"
          "srun: error: node7: tasks 0-1: Exited with exit code 1\n")
    cmd = "(env) root@ubuntu:/srv/repo# bash exps/finetune.sh ./ckpt\n+ srun python -u main_finetune.py --epochs 3\n"
    return cmd + tb + cmd + tb.replace("TypeError: 'type' object is not subscriptable", second)


def test_a_rerun_that_dies_of_the_same_error_keeps_it_the_error_to_fix():
    """The command typed again met the very error its first run died of (merged into the first run's finding):
    that error is still the cause, not history behind the launcher's exit line."""
    rep = llmtriage.analyze(_twice("TypeError: 'type' object is not subscriptable").encode())
    top = [f for f in rep.findings if f.severity == "error"][0]
    assert (top.rule_id, top.category, top.judgement) == ("unknown", "dependency-mismatch", None)
    # a rerun that died of another error leaves the first run's error as history
    rep = llmtriage.analyze(_twice("KeyError: 'input_ids'").encode())
    (first,) = [f for f in rep.findings if "subscriptable" in (f.evidence or "")]
    assert first.severity == "warning" and first.judgement["context"] == "earlier-run"


def test_an_error_line_without_a_traceback_is_history_once_the_prompt_came_back():
    """The first run printed only a logged error (no traceback, no death) and the prompt came back; the user
    changed a package and typed the command again, which died: the later death is the failure now."""
    first = (PROMPT + "trtllm-serve ./model --backend pytorch\n"
             "[03/18/2026-14:02:12] [TRT-LLM] [E] Failed to load model config from ./model: The checkpoint you are "
             "trying to load has model type `qwen3_5` but Transformers does not recognize this architecture.\n")
    fix = PROMPT + 'pip install -U "transformers>=5.2"\n'
    second = (PROMPT + "trtllm-serve ./model --backend pytorch\n"
              "Traceback (most recent call last):\n"
              '  File "/usr/local/bin/trtllm-serve", line 5, in <module>\n'
              "    from tensorrt_llm.commands.serve import main\n"
              "ImportError: cannot import name 'AutoModelForVision2Seq' from 'transformers' "
              "(/usr/local/lib/python3.12/dist-packages/transformers/__init__.py)\n")
    rep = llmtriage.analyze(first + fix + second)
    errs = [f for f in rep.findings if f.severity == "error"]
    assert rep.extra["death"]["line"] == 8
    assert errs and all(f.line > 4 for f in errs)
    assert any(f.judgement and f.judgement.get("context") == "earlier-run" for f in rep.findings if f.line == 2)


def test_a_command_typed_once_keeps_its_earlier_error():
    """Without the command typed again, an earlier logged error is not made history by a later death."""
    first = (PROMPT + "trtllm-serve ./model --backend pytorch\n"
             "[03/18/2026-14:02:12] [TRT-LLM] [E] Failed to load model config from ./model: The checkpoint you are "
             "trying to load has model type `qwen3_5` but Transformers does not recognize this architecture.\n")
    second = (PROMPT + "python other.py\n"
              "Traceback (most recent call last):\n"
              '  File "/home/ana/proj/other.py", line 5, in <module>\n'
              "    import foo\n"
              "ModuleNotFoundError: No module named 'foo'\n")
    rep = llmtriage.analyze(first + second)
    assert not rep.extra["death"].get("rerun")
    assert any(f.line == 2 and f.severity == "error" for f in rep.findings)


def test_a_reproduction_failing_the_same_way_confirms_the_earlier_failure():
    """torchrun's record of a SIGSEGV, then the user's one-line reproduction segfaulting too: the first failure is
    confirmed (still an error), not pushed down as an earlier run's history."""
    prompt = "[u@n017 proj]$ "
    log = (prompt + "apptainer exec --rocm t.sif torchrun --nproc_per_node=2 train.py\n"
           "E1211 14:22:19.772000 22 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: -11) "
           "local_rank: 0 (pid: 68) of binary: /opt/venv/bin/python3\n"
           + prompt + "apptainer exec --rocm t.sif python3 -c \"import torch; torch.ones(4, device='cuda')\"\n"
           "Segmentation fault (core dumped)\n"
           + prompt + "apptainer exec --rocm t.sif python3 -X faulthandler -c \"import torch; torch.ones(4, device='cuda')\"\n"
           "Fatal Python error: Segmentation fault\n"
           "Segmentation fault (core dumped)\n")
    rep = llmtriage.analyze(log.encode())
    first = next(f for f in rep.findings if f.line == 2 and f.category == "native-crash")
    assert first.severity == "error" and first.judgement is None
