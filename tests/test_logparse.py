import io

import llmtriage
from llmtriage.engine.logparse import (MAX_LINE, TracebackParser, decode_line, iter_blocks, match_view, normalise_text,
                                split_prefix)


def test_prefixes_are_recognised():
    assert split_prefix("[rank3]: RuntimeError: x").rank == 3
    assert split_prefix("[default1]:Traceback (most recent call last):").rank == 1
    p = split_prefix("node-12: [rank5]: boom")
    assert (p.host, p.rank, p.text) == ("node-12", 5, "boom")
    assert split_prefix("7: ValueError: bad").rank == 7
    p = split_prefix("2024-05-01 12:00:01,123 - INFO - hello")
    assert p.text.startswith("- INFO") or p.text.startswith("INFO") or "hello" in p.text
    assert split_prefix("[2024-05-01 12:00:01,123] [INFO] [engine.py:12] x").text.startswith("[INFO]")
    assert split_prefix("RuntimeError: CUDA error").text == "RuntimeError: CUDA error"
    assert split_prefix("RuntimeError: CUDA error").rank is None
    # pdsh and `srun -l` keep the line's own indentation: a traceback frame behind them is still a frame
    p = split_prefix('gpu-node-07:   File "/x/train.py", line 3, in <module>')
    assert (p.host, p.text) == ("gpu-node-07", '  File "/x/train.py", line 3, in <module>')
    p = split_prefix("3:     main()")
    assert (p.rank, p.text) == (3, "    main()")
    # llama.cpp's common logger: "<uptime> <level> [<pid>] "
    assert split_prefix("0.44.011.931 I [49457] /usr/include/c++/bits/stl_vector.h:1263: x").text.startswith("/usr/include")
    assert split_prefix("0.44.012.402 E srv    proxy: instance X exited").text.startswith("srv")
    # docker compose "service-1  | " (v1: "service_1 | "): the service is the stream
    p = split_prefix('sglang-gemma-1  |   File "x.py", line 1, in y')
    assert (p.host, p.text) == ("sglang-gemma-1", '  File "x.py", line 1, in y')
    assert split_prefix("| step 20 | loss 3.1 |").host is None
    # torch_xla's xla_dist "<time> <worker ip> [<ordinal>] ": the host and the ordinal, the frame's indent kept
    p = split_prefix('2020-10-22 02:48:58 10.128.0.33 [3]   File "/x/train.py", line 3, in <module>')
    assert (p.host, p.rank, p.text) == ("10.128.0.33", 3, '  File "/x/train.py", line 3, in <module>')
    assert split_prefix("10.0.0.1 [2] RuntimeError: Resource exhausted: x").text.startswith("RuntimeError")
    assert split_prefix("version 1.2.3.4 [1] released").host is None


def test_normalise_ansi_and_progress_bars():
    assert normalise_text("\x1b[31mRuntimeError\x1b[0m: boom") == "RuntimeError: boom"
    assert normalise_text(" 10%|#   | 1/10\r 50%|#####| 5/10\r100%|#####| 10/10") == "100%|#####| 10/10"


def test_match_view_keeps_offsets_and_newlines():
    chunk = b"a\r b\x1b[1mX\x1b[0m\nc\n"
    lines, view = match_view(chunk)
    assert lines.count(b"\n") == chunk.count(b"\n")
    assert len(lines) == len(view)
    assert b"\r" not in view and b"\x1b" not in view


def test_decode_never_fails_and_detects_gbk():
    assert decode_line("显存溢出".encode("gbk")) == ("显存溢出", "gb18030")
    assert decode_line("显存".encode())[1] == "utf-8"
    text, enc = decode_line(b"\xff\xfe\xfa bad")
    assert enc in ("gb18030", "utf-8-replace") and isinstance(text, str)


def test_blocks_cut_at_newline_and_cap_long_lines():
    data = b"x" * (3 * MAX_LINE + 5) + b"\nend\n"
    chunks = list(iter_blocks(io.BytesIO(data)))
    assert b"".join(c for c, _ in chunks) == data
    assert max(len(c) for c, _ in chunks) <= MAX_LINE + 64 * 1024
    assert sum(f for _, f in chunks) >= 2


def _feed(text):
    p = TracebackParser()
    for i, line in enumerate(text.splitlines(), 1):
        p.feed(i, line)
    return p


def test_chained_traceback_gives_final_exception_and_user_frame():
    log = """Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/safetensors/torch.py", line 311, in load_file
    with safe_open(filename, framework="pt") as f:
safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/home/me/train.py", line 40, in <module>
    model = load(path)
  File "/opt/conda/lib/python3.11/site-packages/transformers/modeling_utils.py", line 500, in load
    raise OSError("Unable to load weights")
OSError: Unable to load weights from pytorch checkpoint file
"""
    p = _feed(log)
    exc = p.headline()
    assert exc.type == "OSError" and exc.line == 13
    assert exc.chain and "HeaderTooLarge" in exc.chain[0]
    assert exc.user_frame.file == "/home/me/train.py" and exc.user_frame.line == 40
    assert len(p.exceptions) == 1


def test_interleaved_rank_tracebacks_and_cpp_frames():
    log = """[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File "/w/train.py", line 10, in <module>
[rank1]:   File "/w/train.py", line 11, in <module>
[rank0]:     main()
[rank1]:     step()
[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered
[rank1]: Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):
[rank1]: frame #0: c10::Error::Error(...) + 0x96 (0x7f in /x/libc10.so)
[rank0]: ValueError: bad value
"""
    p = _feed(log)
    by_rank = {e.rank: e for e in p.exceptions}
    assert by_rank[1].type == "RuntimeError" and by_rank[1].user_frame.line == 11
    assert len(by_rank[1].cpp_frames) == 2
    assert by_rank[0].type == "ValueError" and by_rank[0].line == 10


def test_a_rank_traceback_after_a_progress_bar_with_no_newline_keeps_its_frames():
    """tqdm leaves its last redraw without a newline: the rank's traceback header starts mid-line,
    behind the bar, and must open the traceback of that rank (its frames carry the `[rank0]:` prefix)."""
    log = ("Loading checkpoint shards: 100%|##########| 2/2 [00:02<00:00][rank0]: Traceback (most recent call last):\n"
           '[rank0]:   File "/w/train.py", line 10, in <module>\n'
           "[rank0]:     main()\n"
           "[rank0]: ValueError: bad value\n")
    p = _feed(log)
    assert [(e.type, e.rank, len(e.frames)) for e in p.exceptions] == [("ValueError", 0, 1)]
    assert p.exceptions[0].user_frame.line == 10


def test_keyboard_interrupt_is_not_headline_when_real_error_exists():
    log = """Traceback (most recent call last):
  File "a.py", line 1, in <module>
ValueError: real
Traceback (most recent call last):
  File "a.py", line 2, in <module>
KeyboardInterrupt
"""
    assert _feed(log).headline().type == "ValueError"


def _headline(lines):
    p = TracebackParser()
    for i, text in enumerate(lines, 1):
        p.feed(i, text)
    return p.headline()


def test_exceptions_not_named_error_are_found_after_frames_but_logger_lines_are_not():
    frames = ["Traceback (most recent call last):", '  File "/home/u/prep.py", line 12, in <module>', "    main()"]
    for line, typ in [("pyarrow.lib.ArrowInvalid: JSON parse error: Missing a name", "pyarrow.lib.ArrowInvalid"),
                      ("cv2.error: OpenCV(4.8.0) resize.cpp:4062: error: (-215:Assertion failed)", "cv2.error"),
                      ("socket.timeout: timed out", "socket.timeout"),
                      ("ArrowInvalid: Column 3 changed type", "ArrowInvalid"),
                      ("mylib.errors.BadThing", "mylib.errors.BadThing")]:
        exc = _headline(frames + [line])
        assert exc is not None and exc.type == typ and exc.line == 4, (line, exc)
        assert exc.user_frame is not None and exc.user_frame.line == 12
    # a logger line inside an open traceback is not the exception; the real one after it is
    for noise in ("INFO: waiting for workers", "wandb: Waiting for W&B process to finish...",
                  "torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 4211 closing signal"):
        exc = _headline(frames + [noise, "ValueError: bad"])
        assert exc is not None and exc.type == "ValueError" and exc.line == 5, (noise, exc)


def test_user_frame_skips_cython_frozen_and_library_frames():
    from llmtriage.engine.logparse import TracebackParser

    text = '''Traceback (most recent call last):
  File "/home/u/proj/train.py", line 88, in <module>
    main()
  File "/home/u/proj/train.py", line 61, in main
    batch = next(it)
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "pyarrow/table.pxi", line 1609, in pyarrow.lib._Tabular.__getitem__
  File "pyarrow/_compute.pyx", line 598, in pyarrow._compute.call_function
  File "/opt/conda/lib64/python3.10/json/decoder.py", line 337, in decode
pyarrow.lib.ArrowInvalid: JSON parse error: Missing a closing quotation mark in string.
'''
    p = TracebackParser()
    for i, line in enumerate(text.splitlines(), 1):
        p.feed(i, line)
    exc = p.headline()
    assert (exc.user_frame.file, exc.user_frame.line) == ("/home/u/proj/train.py", 61)


def test_serving_and_ray_prefixes_are_stripped_and_give_the_rank():
    """vLLM's logger prefix and Ray/vLLM process prefixes hide traceback frames and the exception
    line unless they are read as prefixes; `rank=N` inside the process prefix is the rank."""
    from llmtriage.engine.logparse import split_prefix

    cases = {
        'ERROR 06-02 08:03:44 [serving_chat.py:200]   File "/x/y.py", line 3, in f': (None, '  File "/x/y.py", line 3, in f'),
        '(WorkerDict pid=616, ip=10.0.0.1)   File "/x/y.py", line 3, in f': (None, '  File "/x/y.py", line 3, in f'),
        '(VllmWorker rank=2 pid=123) ERROR 06-02 08:03:44 [worker.py:12] ValueError: bad': (2, "ValueError: bad"),
        "(EngineCore_DP0 pid=123) Traceback (most recent call last):": (None, "Traceback (most recent call last):"),
        "(head, rank=0, pid=4773) AssertionError": (0, "AssertionError"),          # SkyPilot
        "(worker1, rank=3, pid=88) Traceback (most recent call last):": (3, "Traceback (most recent call last):"),
        "INFO:     10.0.0.4:51822 - \"POST /v1/chat HTTP/1.1\" 200 OK": (None, "INFO:     10.0.0.4:51822 - \"POST /v1/chat HTTP/1.1\" 200 OK"),
        "(not a prefix) ValueError: x": (None, "(not a prefix) ValueError: x"),
    }
    for line, (rank, text) in cases.items():
        p = split_prefix(line)
        assert (p.rank, p.text) == (rank, text), line


def test_a_vllm_traceback_behind_logger_prefixes_names_its_exception():
    import llmtriage

    log = "\n".join(f"ERROR 06-02 08:03:44 [core.py:200] {t}" for t in (
        "EngineCore failed to start.", "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 10, in run',
        "    raise ValueError(msg)", "ValueError: No available memory for the cache blocks.")) + "\n"
    rep = llmtriage.analyze(log)
    assert rep.exception is not None and rep.exception.type == "ValueError", rep.exception


def test_an_exception_python_ignored_is_not_the_crash():
    """'Exception ignored in: <__del__>' then a traceback: Python printed it and went on."""
    import llmtriage

    ignored = ("step 1 loss 2.3\nException ignored in: <function DeepSpeedCPUAdam.__del__ at 0x7f>\n"
               "Traceback (most recent call last):\n"
               '  File "/x/site-packages/deepspeed/ops/adam/cpu_adam.py", line 102, in __del__\n'
               "    self.ds_opt_adam.destroy_adam(self.opt_id)\n"
               "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n")
    rep = llmtriage.analyze(ignored)
    assert rep.exception is None and not [f for f in rep.findings if f.severity == "error"]
    real = ignored.replace("Exception ignored in: <function DeepSpeedCPUAdam.__del__ at 0x7f>\n", "")
    assert llmtriage.analyze(real).exception.type == "AttributeError"


def test_a_warning_quoting_an_exception_is_not_the_crash():
    import llmtriage

    warn = ('WARNING 06-02 08:01:31 [api.py:1] Found ulimit of 1024; this can cause "OSError: [Errno 24] '
            'Too many open files". Consider raising it.\nINFO 06-02 08:01:32 [api.py:2] ready\n')
    assert llmtriage.analyze(warn).exception is None
    assert llmtriage.analyze("OSError: [Errno 24] Too many open files\n").exception.type == "OSError"


# ------------------------------------------------------------------ exception lines from real logs (helpers' probes)
def _exceptions(text: str):
    from llmtriage.engine.logparse import TracebackParser
    tbp = TracebackParser()
    for i, line in enumerate(text.splitlines(), 1):
        tbp.feed(i, line)
    return [(e.type, e.message) for e in tbp.exceptions]


def test_a_bare_exception_class_is_an_exception():
    text = ("[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/opt/ds/runtime/fp16/loss_scaler.py", line 183, in update_scale\n'
            "[rank0]:     raise Exception(\n"
            "[rank0]: Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n")
    assert _exceptions(text) == [("Exception", "Current loss scale already at minimum - cannot decrease scale "
                                                "anymore. Exiting run.")]


def test_a_printed_traceback_header_opens_nothing_and_a_bare_word_colon_is_no_exception():
    text = ('    print("Traceback (most recent call last):")\n'
            "Extracted:\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert _exceptions(text) == []
    # the same header at the start of a line opens a traceback; `Extracted:` is skipped, not its exception
    real = "Traceback (most recent call last):\nExtracted:\nRuntimeError: boom\n"
    assert _exceptions(real) == [("RuntimeError", "boom")]


def test_older_vllm_logger_prefix_is_stripped():
    text = ("ERROR 02-19 10:03:11 serving_chat.py:197] Error in preprocessing prompt inputs\n"
            "ERROR 02-19 10:03:11 serving_chat.py:197] Traceback (most recent call last):\n"
            'ERROR 02-19 10:03:11 serving_chat.py:197]   File "/vllm/entrypoints/openai/serving_chat.py", line 181, in create_chat_completion\n'
            "ERROR 02-19 10:03:11 serving_chat.py:197]     ) = await self._preprocess_chat(\n"
            "ERROR 02-19 10:03:11 serving_chat.py:197] ValueError: At most 1 image(s) may be provided in one request.\n")
    assert _exceptions(text) == [("ValueError", "At most 1 image(s) may be provided in one request.")]


IPYTHON_TB = """---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[12], line 1
----> 1 model.save_pretrained_gguf("out", tokenizer, quantization_method = "q8_0")

File ~/miniconda3/envs/u/lib/python3.11/site-packages/unsloth/save.py:1734, in unsloth_save_pretrained_gguf(self, save_directory)
   1731 is_sentencepiece_model = check_if_sentencepiece_model(self)
   1733 # Save to GGUF
-> 1734 all_file_locations = save_to_gguf(model_type, model_dtype,
   1735     new_save_directory, quantization_method,
   1736 )
""" + "".join(f"   {1740 + i} pass  # context line {i}\n" for i in range(24)) + """
File ~/miniconda3/envs/u/lib/python3.11/site-packages/unsloth/save.py:824, in try_execute(commands, force_complete)
    822             raise RuntimeError(f"*** Unsloth: Failed compiling llama.cpp with {line}.")
    823         elif "***" in line:
--> 824             raise RuntimeError(f"*** Unsloth: Failed compiling llama.cpp with {line}.")
    825         print(line, flush = True, end = "")

RuntimeError: *** Unsloth: Failed compiling llama.cpp with WARNING:hf-to-gguf:***.
"""


def test_an_ipython_traceback_is_parsed_with_its_frames_however_long():
    rep = llmtriage.analyze(IPYTHON_TB)
    assert rep.extra["status"] == "crashed"
    exc = rep.exception
    assert exc is not None and exc.type == "RuntimeError" and exc.message.startswith("*** Unsloth")
    assert [f.line for f in exc.frames] == [1, 1734, 824]
    assert exc.frames[-1].function == "try_execute" and exc.frames[-1].code.startswith("raise RuntimeError")
    assert exc.user_frame is not None and exc.user_frame.file == "<cell>"


IPYTHON7_TB = """---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
/tmp/ipykernel_36/2291774410.py in <cell line: 0>()
----> 1 model.save_pretrained_merged("out", tokenizer, save_method = "merged_16bit")

/usr/local/lib/python3.11/dist-packages/unsloth/save.py in unsloth_generic_save(model, tokenizer, save_directory)
   2394         merge_and_overwrite_lora(
-> 2395             get_model_name,

/usr/local/lib/python3.11/dist-packages/unsloth_zoo/saving_utils.py in merge_and_overwrite_lora(get_model_name, model)
-> 1122         raise RuntimeError(

<ipython-input-7-1a2b3c> in <module>
RuntimeError: Unsloth: merge failed
"""


def test_an_ipython7_traceback_colab_kaggle_is_parsed_with_its_frames():
    # IPython 7 (Colab, Kaggle) prints "<path>.py in <function>(<args>)" with no line number
    rep = llmtriage.analyze(IPYTHON7_TB)
    exc = rep.exception
    assert exc is not None and exc.type == "RuntimeError"
    assert [f.file.rsplit("/", 1)[-1] for f in exc.frames] == ["2291774410.py", "save.py", "saving_utils.py",
                                                              "<ipython-input-7-1a2b3c>"]
    assert [f.function for f in exc.frames[:3]] == ["<cell line: 0>", "unsloth_generic_save", "merge_and_overwrite_lora"]
    assert exc.frames[1].code.startswith("get_model_name") and exc.frames[1].line == 0
    # a prose line that names a file is not a frame outside a traceback, nor inside one without "in f("
    assert _exceptions("see /app/train.py in main for details\nValueError: x\n") == []


def test_a_frameless_traceback_takes_an_exception_name_not_a_logger_prefix():
    # the frames went to another stream ([rank0]: mid-line after a tqdm bar); a logger's "wandb: ..."
    # line after the bare header is not the exception
    head = ["Traceback (most recent call last):"]
    assert _headline(head + ["wandb: 🚀 View run dpo-7b at: https://wandb.ai/u/p/runs/x"]) is None
    for line, typ in [("KeyError: 'prompt'", "KeyError"), ("socket.timeout: timed out", "socket.timeout"),
                      ("torch.OutOfMemoryError: CUDA out of memory", "torch.OutOfMemoryError")]:
        exc = _headline(head + [line])
        assert exc is not None and exc.type == typ, (line, exc)


def test_a_frames_source_line_is_kept_when_a_prefix_took_its_indent():
    """`[rank0]: ` / a k8s timestamp before every line leaves the source line under a frame unindented: it is still
    that frame's code (a bare AssertionError's only words), and a line that is not right under a frame is not."""
    tb = ('Traceback (most recent call last):\n'
          '  File "/venv/lib/python3.10/site-packages/lmdeploy/lite/quantization/awq.py", line 118, in smooth_ln_fcs\n'
          '    assert torch.isnan(p).sum() == 0\n'
          'AssertionError\n')
    for prefix in ("", "[rank0]: ", "2025-11-18T09:02:11.402812345Z "):
        exc = llmtriage.analyze("".join(prefix + ln + "\n" for ln in tb.splitlines())).exception
        assert exc is not None and exc.frames[-1].code == "assert torch.isnan(p).sum() == 0", prefix


def test_a_ray_wrappers_remote_traceback_gives_the_remote_exception():
    # RayActorError's message names the remote call; the actor's frames and its own exception follow headerless
    log = """Traceback (most recent call last):
  File "/app/train_ppo_ray.py", line 91, in train
    ray.get(engines[0].generate.remote("ping"))
  File "/py/site-packages/ray/_private/worker.py", line 864, in get_objects
    raise value
ray.exceptions.RayActorError: The actor died because of an error raised in its creation task, ray::LLMRayActor.__init__() (pid=42301, ip=10.42.0.17, actor_id=1e0f, repr=<LLMRayActor object at 0x7f>)
  File "/app/openrlhf/trainer/ray/vllm_engine.py", line 37, in __init__
    self.llm = vllm.LLM(*args, **kwargs)
  File "/py/site-packages/vllm/config.py", line 579, in __init__
    raise RuntimeError("No supported device detected.")
RuntimeError: No supported device detected.
"""
    p = _feed(log)
    head = p.headline()
    assert (head.type, head.message, head.line) == ("RuntimeError", "No supported device detected.", 11)
    assert [f.function for f in head.frames] == ["__init__", "__init__"]
    assert head.chain and "RayActorError" in head.chain[0]
    # a wrapper with no remote frames after it stays the headline, and a logger line after it is not an exception
    p = _feed("\n".join(log.splitlines()[:6] + ["Status: Job failed", "INFO: shutting down"]) + "\n")
    assert p.headline().type == "ray.exceptions.RayActorError" and len(p.exceptions) == 1


def test_a_rich_traceback_panel_gives_its_frames_and_source_row():
    # rich (typer CLIs) prints a boxed traceback of ~40 rows: its frames must be read, not dropped as foreign lines
    source = "\n".join(f"│   {n} │   │   pass{' ' * 60}│" for n in range(10, 40))
    log = f"""╭──────────── Traceback (most recent call last) ────────────╮
│ /home/me/run_eval.py:12 in main                              │
{source}
│ /usr/lib/python3.11/site-packages/lighteval/models/vllm/vllm_model.py:407 in               │
│ _loglikelihood_tokens                                        │
│ ❱ 407 │   │   for token, logprobs in zip(a, output.prompt_logprobs):   │
╰──────────────────────────────────────────────────────────────╯
TypeError: 'NoneType' object is not subscriptable
"""
    exc = _feed(log).headline()
    assert exc is not None and exc.type == "TypeError"
    assert [f.file for f in exc.frames] == ["/home/me/run_eval.py",
                                            "/usr/lib/python3.11/site-packages/lighteval/models/vllm/vllm_model.py"]
    assert exc.frames[-1].line == 407 and exc.frames[-1].code.startswith("for token, logprobs in zip(")
    assert exc.user_frame.file == "/home/me/run_eval.py" and exc.user_frame.line == 12
