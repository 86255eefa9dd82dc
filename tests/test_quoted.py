"""Printed training samples and rollouts are data, not the job's own errors (engine/quoted.py)."""
from __future__ import annotations

import llmtriage
from llmtriage.engine import quoted

OOM_TB = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 12, in <module>\n'
    "    out = model(x)\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.65 GiB of which 1.02 GiB is free.\n"
)

QWEN_SAMPLE = (
    "training example:\n"
    "input_ids:\n[151644, 8948, 198, 2610, 525]\n"
    "inputs:\n"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nMy script fails with this:\n" + OOM_TB + "How do I fix it?<|im_end|>\n"
    "<|im_start|>assistant\nReduce the batch size.<|im_end|>\n"
    "label_ids:\n[-100, -100, 50325, 279, 151645]\n"
    "labels:\nSegmentation fault (core dumped) means a native crash; reduce the batch size.<|im_end|>\n"
)

PROGRESS = (
    "[INFO|trainer.py:2405] 2025-03-02 10:11:12,002 >> ***** Running training *****\n"
    "  1%|▏         | 10/939 [00:41<1:03:12,  4.08s/it]\n"
    "{'loss': 1.4312, 'grad_norm': 0.8123, 'learning_rate': 4.99e-05, 'epoch': 0.03}\n"
    "  2%|▏         | 20/939 [01:22<1:02:55,  4.10s/it]\n"
)


def _report(tmp_path, text, name="run.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return llmtriage.analyze(str(p))


def _errors(report):
    return [f for f in report.findings if f.severity == "error"]


def test_sample_with_an_oom_traceback_is_not_the_jobs_error(tmp_path):
    r = _report(tmp_path, QWEN_SAMPLE + PROGRESS)
    assert _errors(r) == []
    assert r.exception is None
    assert r.extra["status"] == "running"


def test_same_text_outside_a_sample_is_the_crash(tmp_path):
    r = _report(tmp_path, PROGRESS + OOM_TB)
    errs = _errors(r)
    assert errs and errs[0].category == "cuda-oom"
    assert r.extra["status"] == "crashed"


def test_real_crash_after_a_sample_keeps_its_line_number(tmp_path):
    text = QWEN_SAMPLE + PROGRESS + OOM_TB
    r = _report(tmp_path, text)
    errs = _errors(r)
    assert errs and errs[0].category == "cuda-oom"
    rows = text.splitlines()
    oom_line = len(rows) - rows[::-1].index(OOM_TB.splitlines()[-1])
    assert errs[0].line == oom_line
    assert r.extra["status"] == "crashed"


def test_a_turn_that_never_closes_is_not_hidden(tmp_path):
    # no close marker in the block: the lines are left to the rules (a log line is never hidden on a guess)
    text = "inputs:\n<|im_start|>user\nquestion\n" + OOM_TB
    r = _report(tmp_path, text)
    assert _errors(r) and _errors(r)[0].category == "cuda-oom"


def test_template_source_and_error_lines_quoting_markers_do_not_open_a_sample():
    template = b"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'}}\nx\n<|im_end|>\n"
    assert quoted.spans(template) == []
    err = b"ValueError: chat template produced <|im_start|>user without a generation prompt\nnext\n<|im_end|>\n"
    assert quoted.spans(err) == []
    tok = b"bos_token='<|begin_of_text|>', eos_token='<|eot_id|>'\n"
    assert quoted.spans(tok) == []


def test_other_chat_formats_and_prefixes():
    llama3 = (b"[rank0]: <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
              b"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970<|eot_id|>"
              b"<|start_header_id|>assistant<|end_header_id|>\n\nCheck NCCL_DEBUG=INFO.<|eot_id|>\n"
              b"[rank0]: step 3 loss 1.2\n")
    assert quoted.spans(llama3) == [(0, 4)]
    mistral = b"prompt: <s>[INST] why do I get Killed? [/INST] host OOM: the kernel killed it.</s>\nnext line\n"
    assert quoted.spans(mistral) == [(0, 0)]
    gemma = b"(WorkerDict pid=12) <start_of_turn>user\nwhat is SIGSEGV<end_of_turn>\n"
    assert quoted.spans(gemma) == [(0, 1)]


def test_labels_header_after_a_turn_is_part_of_the_sample():
    text = (b"<|im_start|>assistant\nok<|im_end|>\nlabel_ids:\n[1, 2]\nlabels:\n"
            b"CUDA out of memory.\nanswer<|im_end|>\nreal line\n")
    assert quoted.spans(text) == [(0, 1), (4, 6)]
    # a bare header far from any sample opens nothing
    far = b"labels:\nCUDA out of memory.<|im_end|>\n"
    assert quoted.spans(far) == []


def test_mask_keeps_length_and_newlines():
    text = QWEN_SAMPLE.encode()
    masked = quoted.mask(text)
    assert len(masked) == len(text)
    assert masked.count(b"\n") == text.count(b"\n")
    assert b"CUDA out of memory" not in masked
    assert b"training example:" in masked


OLLAMA_SESSION = (
    "$ ollama run qwen2.5:7b --verbose\n"
    '>>> explain what "CUDA error: out of memory" means in one sentence\n'
    "It means the GPU ran out of free memory; you may see torch.OutOfMemoryError: CUDA out of memory.\n"
    "\n"
    "total duration:       1.412115002s\n"
    ">>> /bye\n"
)


def test_a_chat_repl_sessions_questions_and_answers_are_quoted_data():
    rep = llmtriage.analyze(OLLAMA_SESSION)
    assert not [f for f in rep.findings if f.severity == "error"], rep.findings
    # the tool's own error inside the same session is the session failing
    failed = OLLAMA_SESSION.replace("total duration:", "Error: an error was encountered while running the model: "
                                    "CUDA error: out of memory\ntotal duration:")
    failed = failed.replace("It means", "Error: an error was encountered while running the model: CUDA error: "
                            "out of memory\nIt means")
    errs = [f for f in llmtriage.analyze(failed).findings if f.severity == "error"]
    assert errs and errs[0].category == "cuda-oom"


def test_a_python_repl_without_a_chat_banner_is_not_masked():
    text = (">>> import torch\n>>> x = torch.empty(10**12, device='cuda')\nTraceback (most recent call last):\n"
            '  File "<stdin>", line 1, in <module>\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3725.29 GiB.\n")
    errs = [f for f in llmtriage.analyze(text).findings if f.severity == "error"]
    assert errs and errs[0].category == "cuda-oom"


DEMO = (
    "$ python web_demo.py --checkpoint-path /models/Qwen-7B-Chat --server-port 8000\n"
    "Loading checkpoint shards: 100%|██████████| 8/8 [00:07<00:00,  1.02it/s]\n"
    "Running on local URL:  http://0.0.0.0:8000\n"
    "User: 训练时报错 torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB，怎么办？\n"
    "Qwen-Chat: 出现 “CUDA out of memory” 说明显存不够。可以减小 batch size，\n"
    "或者开启 gradient checkpointing。RuntimeError: NCCL error 则是通信问题。\n"
    "\n"
    "用户：Killed 是什么意思？\n"
    "ChatGLM-6B：通常是系统内存不足，被 OOM killer 杀掉了。\n"
)


def test_a_chat_demos_transcript_is_quoted_data():
    masked = quoted.mask(DEMO.encode()).split(b"\n")
    assert b"Running on local URL" in masked[2]
    assert all(not masked[k].strip() for k in (3, 4, 5, 7, 8)), masked
    # a continuation line that looks like the program's own output is kept (never hidden on a guess)
    own = DEMO.replace("或者开启", "2024-05-01 10:00:01 WARNING 或者开启").encode()
    assert quoted.mask(own).split(b"\n")[5] == own.split(b"\n")[5]
    rep = llmtriage.analyze(DEMO)
    assert not [f for f in rep.findings if f.severity == "error"], rep.findings


def test_the_users_exit_command_closing_a_demo_is_kept():
    """"用户：stop" / "User: exit" ends the session (a finish marker of rules/verdict.yaml): not conversation."""
    for bye in ("用户：stop", "User: exit", "用户：:q"):
        text = DEMO + "\n" + bye + "\n"
        assert quoted.mask(text.encode()).split(b"\n")[-2] == bye.encode()
    said = DEMO + "\n用户：stop talking about this\n"
    assert not quoted.mask(said.encode()).split(b"\n")[-2].strip()


def test_the_kept_exit_command_and_the_finish_marker_agree():
    """The exit words live twice (quoted.py's `bye`, verdict.yaml's chat-cli-exit): every line the marker reads as
    the session's end survives masking, and a line it does not read stays conversation."""
    import re
    from llmtriage.detect.spec import verdict_spec
    marker = next(m for m in verdict_spec()["markers"] if m["name"] == "chat-cli-exit")
    rx = re.compile(marker["regex"])
    for words in ("exit", "quit", "stop", "q", ":q", ":quit"):
        for who in ("用户", "User", "USER", "Human"):
            for sep in (":", "：", ": ", "： "):
                bye = f"{who}{sep}{words}"
                kept = quoted.mask((DEMO + "\n" + bye + "\n").encode()).split(b"\n")[-2] == bye.encode()
                assert bool(rx.search(bye)) and kept, bye
    for said in ("用户：stop it", "User: exit code?", "Human: quitting"):
        assert not rx.search(said)
        assert not quoted.mask((DEMO + "\n" + said + "\n").encode()).split(b"\n")[-2].strip()

def test_a_demo_that_crashes_keeps_its_traceback_and_one_speaker_alone_is_not_a_transcript():
    crashed = DEMO + OOM_TB
    errs = _errors(llmtriage.analyze(crashed))
    assert errs and errs[0].category == "cuda-oom"
    # a user's turn with no model turn in the block is not a transcript: nothing is hidden
    alone = "User: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert quoted.mask(alone.encode()) == alone.encode()
    # behind a pdsh host or `srun -l` prefix the traceback's frames are still the program's own lines
    for pre in ("gpu-node-07: ", "3: "):
        lines = "".join(pre + row + "\n" for row in crashed.split("\n"))
        errs = _errors(llmtriage.analyze(lines))
        assert errs and errs[0].category == "cuda-oom", (pre, errs)


# ------------------------------------------------------------ a traceback's echo of the raising source line
ECHOES = {
    "plain": ('Traceback (most recent call last):\n  File "/x/site-packages/foo/bar.py", line 20, in main\n'
              '    raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")\n'),
    "rank-prefixed": ('[rank0]: Traceback (most recent call last):\n'
                      '[rank0]:   File "/x/site-packages/foo/bar.py", line 20, in main\n'
                      '[rank0]:     raise RuntimeError(f"CUDA out of memory. Tried to allocate {n} GiB")\n'),
    "ipython": ("ValueError                                Traceback (most recent call last)\n"
                "File /x/site-packages/foo/bar.py:20, in main()\n     18 def main():\n"
                '---> 20     raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")\n'),
    "rich": ("╭──────────────── Traceback (most recent call last) ────────────────╮\n"
             "│ /x/site-packages/foo/bar.py:20 in main                             │\n"
             '│ ❱ 20 │   │   raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB") │\n'
             "╰────────────────────────────────────────────────────────────────────╯\n"),
}


def test_an_echoed_raise_statement_is_code_not_the_error(tmp_path):
    """The message template in a `raise X("...")` source line fires no rule; the exception line
    below it is what happened (here a config error, not an OOM)."""
    for name, head in ECHOES.items():
        rep = _report(tmp_path, head + "ValueError: bad config value 3\n", f"{name}.log")
        assert [f.category for f in _errors(rep)][:1] != ["cuda-oom"], name
        assert rep.exception is not None and rep.exception.type == "ValueError", name


def test_the_exception_line_under_an_echo_still_fires(tmp_path):
    head = ECHOES["plain"]
    rep = _report(tmp_path, head + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    oom = [f for f in _errors(rep) if f.category == "cuda-oom"]
    assert oom and oom[0].line == 4 and oom[0].count == 1


def test_a_bare_raise_without_a_message_is_left_to_the_rules(tmp_path):
    """`raise Exception` quotes no message: a rule may key on the statement (AutoAWQ's scale search)."""
    text = ('Traceback (most recent call last):\n'
            '  File "/usr/lib/python3.10/site-packages/awq/quantize/quantizer.py", line 409, in _compute_best_scale\n'
            "    raise Exception\nException\n")
    rep = _report(tmp_path, text)
    assert [f.rule_id for f in _errors(rep)][:1] == ["awq-scale-search-no-finite-loss"]


def test_an_installers_arrow_lines_do_not_hide_the_journal_or_commands_after_them():
    """`>>> Installing ollama` (the install script) reads like a REPL prompt: the answer it would open
    ends at the shell's prompt, and journal lines (`Sep 28 08:46:05 host ollama[pid]: level=ERROR`)
    are the tool's own output, so a disk-full error in the journal is still the cause."""
    text = (">>> Installing ollama to /usr/local\n>>> Downloading Linux arm64 bundle\n"
            "######################################################################## 100.0%\n"
            "user@box:~$ journalctl -u ollama --no-pager | tail -n 5\n"
            "Sep 28 08:46:05 box ollama[2563]: time=2024-09-28T08:46:05.918+08:00 level=ERROR source=common.go:214 "
            'msg="failed to extract files" error="copy payload linux/arm64/cuda_v12/libggml.so: write '
            '/tmp/ollama21/runners/cuda_v12/libggml.so: no space left on device"\n'
            'Sep 28 08:46:27 box ollama[2563]: [GIN] 2024/09/28 - 08:46:27 | 500 | 14.52s | 127.0.0.1 | POST "/api/generate"\n'
            "user@box:~$ ollama run qwen2.5:1.5b\nError: no suitable llama servers found\n")
    errs = [f for f in llmtriage.analyze(text).findings if f.severity == "error"]
    assert errs and errs[0].category == "disk-full", errs


NOTE_LOG = (
    "# full fine-tune with zero3 offload; 之前报 NotImplementedError: Cannot copy out of meta tensor; no data! "
    "加了 empty_init=False 之后变成下面这个错误\n"
    "$ bash ds_train_finetune.sh\n"
    "Traceback (most recent call last):\n"
    '  File "main.py", line 40, in <module>\n'
    "    main()\n"
    "ValueError: Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided\n"
)


def test_a_users_note_naming_an_earlier_error_is_not_this_runs_error(tmp_path):
    masked = quoted.mask(NOTE_LOG.encode())
    assert b"meta tensor" not in masked and b"train_batch_size" in masked
    assert len(masked) == len(NOTE_LOG.encode()) and masked.count(b"\n") == NOTE_LOG.count("\n")
    p = tmp_path / "note.log"
    p.write_text(NOTE_LOG, encoding="utf-8")
    cats = [f.rule_id for f in llmtriage.analyze(str(p)).findings]
    assert "meta-tensor-no-data" not in cats


def test_a_note_alone_and_c_frames_are_kept():
    alone = "# got torch.OutOfMemoryError: CUDA out of memory on 8xA100, log below\nstep 1 loss 2.3\n"
    assert quoted.mask(alone.encode()).decode() == alone        # no traceback of the job: the note is the evidence
    frames = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom\n"
              "#0  0x00007f in RuntimeError::raise () from libc.so.6\n")
    assert quoted.mask(frames.encode()).decode() == frames
