"""Status evidence (detect/scanner.py, rules/verdict.yaml): step counters that go on after an error
prove the process survived it; systemd, ggml and argparse endings are deaths."""
from __future__ import annotations

import llmtriage

TB = ("Traceback (most recent call last):\n"
      '  File "/opt/env/site-packages/gradio/queueing.py", line 495, in call_prediction\n'
      "    output = await route_utils.call_process_api(\n"
      "gradio.exceptions.Error: 'Connection errored out.'\n")


def _bar(n: int, total: int = 186) -> str:
    return f" {100 * n // total:2d}%|##        | {n}/{total} [00:{n:02d}<18:41,  6.19s/it]\n"


def _rep(text: str):
    return llmtriage.analyze(text.encode())


def test_a_bar_that_goes_on_two_steps_after_a_traceback_was_not_killed_by_it():
    text = "".join(_bar(n) for n in (5, 10, 15, 20)) + TB + "{'loss': 2.19, 'epoch': 0.4}\n" + _bar(25) + _bar(30)
    rep = _rep(text)
    assert rep.extra["status"] == "running"
    assert not [f for f in rep.findings if f.severity == "error"]


def test_one_more_step_is_what_the_other_ranks_print_while_one_dies():
    rep = _rep("".join(_bar(n) for n in (18, 19, 20)) + TB + _bar(21))
    assert rep.extra["status"] == "crashed"
    assert [f for f in rep.findings if f.severity == "error"]


def test_a_new_bar_after_the_error_is_not_the_same_counter():
    # an evaluation bar that starts after the error has no value before it: nothing to compare
    rep = _rep(_bar(20) + TB + "".join(_bar(n, 50) for n in (10, 20, 30)))
    assert rep.extra["status"] == "crashed"


def test_step_words_and_megatron_iterations_count_as_counters():
    steps = "".join(f"step {n} loss 1.{n:02d}\n" for n in (10, 11)) + TB + "".join(f"step {n} loss 1.{n:02d}\n" for n in (12, 13))
    assert _rep(steps).extra["status"] == "running"
    it = lambda n: f" iteration       {n}/    1000 | consumed samples: {n * 8} | lm loss: 2.1E+00 |\n"  # noqa: E731
    assert _rep(it(40) + TB + it(41) + it(42)).extra["status"] == "running"
    assert _rep(it(40) + TB + it(41)).extra["status"] == "crashed"


def test_systemd_reports_a_failed_service_as_a_death_but_not_a_stop():
    head = "Apr 17 21:10:41 host llama-server[881]: srv  prompt_save: saving prompt with length 28960\n"
    oom = (head + "Apr 17 21:10:44 host systemd[1]: llama-server.service: A process of this unit has been killed by the OOM killer.\n"
           "Apr 17 21:10:44 host systemd[1]: llama-server.service: Main process exited, code=killed, status=9/KILL\n"
           "Apr 17 21:10:44 host systemd[1]: llama-server.service: Failed with result 'oom-kill'.\n")
    rep = _rep(oom)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "systemd-unit-failed"
    assert rep.findings[0].severity == "error"
    fail = head + "Apr 22 10:14:01 host systemd[1]: ollama.service: Main process exited, code=exited, status=1/FAILURE\n"
    assert _rep(fail).extra["status"] == "crashed"
    stop = head + ("Apr 22 10:14:01 host systemd[1]: Stopping llama-server.service...\n"
                   "Apr 22 10:14:01 host systemd[1]: llama-server.service: Main process exited, code=killed, status=15/TERM\n"
                   "Apr 22 10:14:01 host systemd[1]: llama-server.service: Deactivated successfully.\n")
    assert _rep(stop).extra["status"] != "crashed"


def test_a_ggml_cuda_error_line_is_the_process_aborting():
    log = ("llama_new_context_with_model: n_ctx = 8192\n"
           "ggml_cuda_compute_forward: MUL_MAT failed\n"
           "CUDA error: an illegal memory access was encountered\n"
           "  current device: 0, in function ggml_cuda_compute_forward at /src/ggml/src/ggml-cuda/ggml-cuda.cu:2328\n"
           "  err\n"
           "/src/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error\n")
    rep = _rep(log)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "ggml-abort"
    assert rep.findings[0].category == "gpu-hardware-fault"


def test_an_argparse_error_ends_the_program():
    log = ("usage: train.py [-h] [--model MODEL] --data DATA\n"
           "train.py: error: the following arguments are required: --data\n")
    rep = _rep(log)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "argparse-error"
    quoted = "INFO hint: a message like 'train.py: error: unrecognized arguments' means a typo\nstep 1 loss 2.0\n"
    assert _rep(quoted).extra["status"] != "crashed"
