"""Status evidence (detect/scanner.py, rules/verdict.yaml): step counters that go on after an error
prove the process survived it; systemd, ggml and argparse endings are deaths."""
from __future__ import annotations

import pytest

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


def test_a_background_threads_exception_does_not_end_the_process():
    log = ("[INFO] - train, rank: 0, epoch: 19/20, step: 4000/4211, (loss_avg_rank: 0.212)\n"
           "Exception in thread Thread-3 (_pin_memory_loop):\n"
           "Traceback (most recent call last):\n"
           '  File "/env/lib/python3.12/threading.py", line 1075, in _bootstrap_inner\n'
           "    self.run()\n"
           "RuntimeError: can't create new thread at interpreter shutdown\n")
    rep = _rep(log)
    assert rep.extra["status"] != "crashed"
    assert not [f for f in rep.findings if f.severity == "error"]
    main = _rep(log.replace("Exception in thread Thread-3 (_pin_memory_loop):\n", ""))   # the main thread's: a death
    assert main.extra["status"] == "crashed"


def _tool_error(n: int) -> str:
    return (f"(AgentLoopWorker pid=790{n}) WARNING:2025-08-15 10:14:02,881:Error when executing tool: 'calc{n}'\n"
            f"(AgentLoopWorker pid=790{n}) Traceback (most recent call last):\n"
            f'(AgentLoopWorker pid=790{n})   File "/work/verl/agent_loop/tool_agent_loop.py", line 181, in _call_tool\n'
            f"(AgentLoopWorker pid=790{n})     tool = self.tools[tool_name]\n"
            f"(AgentLoopWorker pid=790{n}) KeyError: 'calc{n}'\n")


def _verl_step(n: int) -> str:
    return (f"(TaskRunner pid=77130) step:{n} - actor/pg_loss:-0.011 - actor/grad_norm:0.284 - "
            f"timing_s/step:{118 - n}.904 - critic/score/mean:0.617\n")


def test_an_error_survived_before_and_raised_again_is_the_same_handled_error():
    log = _verl_step(12) + _tool_error(1) + _verl_step(13) + _tool_error(2) + _verl_step(14) + _tool_error(3) + _verl_step(15)
    rep = _rep(log)
    assert rep.extra["status"] == "running"
    assert not [f for f in rep.findings if f.severity == "error"]
    # raised once with a single step after it, and nothing survived before: still a death
    once = _rep(_verl_step(12) + _tool_error(1) + _verl_step(13))
    assert once.extra["status"] == "crashed"


def test_a_metric_named_step_with_decimals_is_not_a_step_counter():
    # "timing_s/step" goes down 118, 117, 116: a duration, not a counter going backwards
    log = _verl_step(12) + _tool_error(1) + _verl_step(13) + _verl_step(14)
    assert _rep(log).extra["status"] == "running"


def test_a_nan_grad_norm_now_and_then_with_every_later_loss_finite_is_a_skipped_step():
    recs = [("0.1445", "nan")] + [(f"0.16{i}", f"0.{i + 2}") for i in range(4)] + [("0.1601", "nan")] + \
        [(f"0.15{i}", f"0.{i + 3}") for i in range(6)]
    log = "".join(f"{{'loss': {l}, 'grad_norm': {g}, 'learning_rate': 0.0001, 'epoch': {0.04 * (i + 1):.2f}}}\n"
                  for i, (l, g) in enumerate(recs))
    rep = _rep(log)
    assert not [f for f in rep.findings if f.severity == "error"]
    nan = [f for f in rep.findings if f.category == "nan-loss"]
    assert nan and all(f.severity == "warning" for f in nan)
    # the same NaN grad_norm at the last record: nothing shows the step was skipped
    last_bad = _rep(log + "{'loss': 0.1501, 'grad_norm': nan, 'learning_rate': 0.0001, 'epoch': 0.6}\n")
    assert [f for f in last_bad.findings if f.severity == "error" and f.category == "nan-loss"]


def test_a_loss_of_exactly_zero_from_the_first_record_is_a_hidden_nan_in_fp16():
    log = "".join(f"{{'loss': 0.0, 'learning_rate': {5e-5 - i * 1e-7:.4e}, 'epoch': {0.01 * (i + 1):.2f}}}\n" for i in range(12))
    top = [f for f in _rep("$ torchrun train.py --fp16 True\n" + log).findings if f.severity == "error"][0]
    assert (top.rule_id, top.category) == ("metric-loss-zero-from-start", "nan-loss")
    # without fp16 in the log the loss averages over no label token (metric_zero.nan_hidden)
    top = [f for f in _rep(log).findings if f.severity == "error"][0]
    assert (top.rule_id, top.category) == ("metric-loss-zero-no-label-token", "no-grad")
    # with a zero gradient norm beside it nothing is supervised: not this detector
    zero_grad = log.replace("'loss': 0.0,", "'loss': 0.0, 'grad_norm': 0.0,")
    assert not [f for f in _rep(zero_grad).findings if f.rule_id in ("metric-loss-zero-from-start",
                                                                      "metric-loss-zero-no-label-token")]


def test_megatron_lines_that_drop_the_loss_and_print_grad_norm_nan_are_nan_records():
    it = lambda n, loss: (f" iteration {n:8d}/  250000 | consumed samples: {n * 8} | learning rate: 2.999E-04 | "  # noqa: E731
                          f"global batch size:     8 |{loss} loss scale: 1.0 | grad norm: {'nan' if not loss else '0.75'} | "
                          "number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    log = "".join(it(n, " lm loss: 7.3E-01 |") for n in range(100, 106)) + "".join(it(n, "") for n in range(106, 112))
    top = [f for f in _rep(log).findings if f.severity == "error"][0]
    assert (top.rule_id, top.category) == ("metric-nan-loss", "nan-loss")


def test_a_background_threads_traceback_is_read_the_same_in_a_crlf_log():
    text = ("step 10 loss 1.2\n" * 3 + "Exception in thread Thread-3 (_pin_memory_loop):\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner\n'
            "RuntimeError: can't create new thread at interpreter shutdown\n")
    for data in (text, text.replace("\n", "\r\n")):
        rep = llmtriage.analyze(data)
        assert rep.extra["status"] != "crashed", data
        assert not [f for f in rep.findings if f.severity == "error"]


@pytest.mark.parametrize("line", [
    "I0612 09:40:44.101000 2211 torch/distributed/elastic/agent/server/api.py:718] Local worker group finished "
    "(WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish",
    "Detected kill switch at /gpfs/exp/kill-switch-tr11, exiting",
    "exiting program at iteration 5000",
    "03/06 11:07:40 - mmengine - INFO - Train finished: training completed at iteration 1250.",
    "2024-05-01 10:00:00 mindcv.train INFO - Finish training!",
    "Figure saved: ppo_output/training_reward.png",
    "[INFO|2024-05-01 10:00:00] llamafactory.train.sft.trainer:98 >> Saving prediction results to out/generated_predictions.jsonl",
    "Job 'raysubmit_7Ld2PpQkZ8xW1cRe' succeeded",
    "2025-01-09 04:27:40,118\tSUCC cli.py:61 -- Job 'raysubmit_Xk2mJ9aQ1pLrV7tc' succeeded",
])
def test_finish_lines_of_other_launchers_and_frameworks(line):
    rep = llmtriage.analyze("step 10 loss 1.2\nstep 20 loss 1.1\n" + line + "\n")
    assert rep.extra["status"] == "finished", line


def test_a_rollout_batch_done_is_not_the_end_of_a_training_run():
    rollout = "Processed prompts: 100%|██████████| 256/256 [00:58<00:00,  4.38it/s]\n"
    assert llmtriage.analyze("INFO loading model\n" + rollout).extra["status"] == "finished"    # offline inference
    train = "{'loss': 0.12, 'grad_norm': 1.3, 'learning_rate': 1e-06, 'epoch': 0.1}\n" + rollout
    assert llmtriage.analyze(train).extra["status"] == "running"


def test_a_streamed_pull_answered_200_is_not_progress():
    err = "Error: max retries exceeded: write /root/.ollama/models/blobs/sha256-1: no space left on device\n"
    gin = '[GIN] 2025/01/01 - 10:00:00 | 200 |  5m2.1s |  127.0.0.1 | POST     "/api/pull"\n'
    rep = llmtriage.analyze("time=2025-01-01 level=INFO msg=\"pulling manifest\"\n" + err + gin)
    assert rep.findings and rep.findings[0].severity == "error", rep.findings


def test_a_launcher_summary_never_places_an_unrecognised_exception():
    text = ("Traceback (most recent call last):\n  File \"/w/finetune.py\", line 9, in <module>\n"
            "    cfg = FinetuningConfig(**d)\n"
            "SomeError: the widget frobnicated twice\n"
            "E0501 10:00:00.1 1 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            "train.py FAILED\n")
    top = llmtriage.analyze(text).findings[0]
    assert top.rule_id == "unknown" and top.category != "launcher-child-failed", top.captures


def test_sglangs_self_kill_after_a_child_failed_is_not_the_oom_killer():
    # SGLang's handler prints "proces." (sic) before it SIGKILLs its own process tree
    text = ("[rank5]:[E1017 09:22:44.502 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
            "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
            "[2024-10-17 09:22:45] Received sigquit from a child proces. It usually means the child failed.\n"
            "Killed\n")
    top = llmtriage.analyze(text).findings[0]
    assert (top.category, top.severity) == ("nccl-timeout", "error")
    assert llmtriage.analyze("step 3 loss 2.1\nKilled\n").findings[0].category == "host-oom"


def test_a_childs_argparse_error_ranks_above_the_launchers_summary():
    text = ("gpu-a: usage: train.py [-h] --model_name_or_path MODEL_NAME_OR_PATH --output_dir OUTPUT_DIR\n"
            "gpu-a: train.py: error: the following arguments are required: --model_name_or_path, --output_dir\n"
            "[2024-11-19 16:11:48,512] [ERROR] [launch.py:325:sigkill_handler] ['python', '-u', 'src/train.py', "
            "'--local_rank=7'] exits with return code = 2\n"
            "pdsh@gpu-a: gpu-a: ssh exited with exit code 2\n")
    rep = llmtriage.analyze(text)
    top = rep.findings[0]
    assert (top.rule_id, top.severity, top.line) == ("unknown", "error", 2), rep.findings
    assert rep.extra["death"]["name"] == "argparse-error"
    assert any(f.category == "launcher-child-failed" and f.role == "symptom" for f in rep.findings[1:])


def test_the_llama_server_leaving_its_main_loop_is_its_death_and_health_checks_are_no_progress():
    kv = "".join(f"srv  update_slots: failed to find free space in the KV cache, retrying with smaller n_batch = {n}\n"
                 for n in (256, 64, 16, 4, 1))
    text = ("[GIN] 2024/05/20 - 10:00:01 | 200 |  3.2s | 127.0.0.1 | POST     \"/api/chat\"\n" + kv
            + "update_slots : failed to decode the batch, n_batch = 1, ret = 1\n"
            "unexpected error in llama server update_slots - exiting main loop\nllama server shutting down\n"
            "[GIN] 2024/05/20 - 10:00:09 | 200 |     12µs | 127.0.0.1 | HEAD     \"/\"\n")
    rep = _rep(text)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "llama-cpp-exit"
    top = [f for f in rep.findings if f.severity == "error"][0]
    # retried just before the death it caused: not a recovery
    assert top.category == "seq-too-long" and top.judgement is None


SERVED = '(APIServer pid=1) INFO:     172.18.0.1:50412 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
ENGINE_DEATH = ("(EngineCore pid=104) ERROR 05-05 12:36:59 [core.py:1233] EngineCore encountered a fatal error.\n"
                "(APIServer pid=1) ERROR 05-05 12:36:59 [async_llm.py:693] vllm.v1.engine.exceptions.EngineDeadError: "
                "EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
                "(EngineCore pid=104) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. "
                "GPU 0 has a total capacity of 23.56 GiB of which 56.88 MiB is free.\n"
                "(APIServer pid=1) INFO:     Shutting down\n"
                "(APIServer pid=1) INFO:     Finished server process [1]\n")


def test_a_server_exit_zero_after_its_engine_died_is_no_finish():
    # the front end shut down in order because its engine was gone: the container's exit code 0 is
    # the death's consequence, so the engine's OOM stays the error that ended the server
    rep = _rep(SERVED * 3 + ENGINE_DEATH + "vllm-qwen36 exited with code 0\n")
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "engine-dead"
    assert [f.category for f in rep.findings if f.severity == "error"][:1] == ["cuda-oom"]


def test_an_exit_zero_after_the_server_went_on_serving_is_a_finish():
    # requests served between the engine's death line and the exit: whatever died was not the server
    rep = _rep(SERVED + ENGINE_DEATH + SERVED * 3 + "vllm-qwen36 exited with code 0\n")
    assert rep.extra["status"] == "finished"
    assert not [f for f in rep.findings if f.severity == "error"]


def test_the_literal_gate_checks_every_marker_with_a_literal_on_the_line():
    """The scanner checks, per line, only the markers owning a literal near the gate's matches. On lines
    built from overlapping literals that must be exactly the markers with a literal on the line."""
    import random

    from llmtriage.detect.scanner import Scanner
    sc = Scanner()
    lits = sorted({lit for m in sc._active for lit in m.literals})
    rng = random.Random(7)
    for _ in range(400):
        parts = [rng.choice(lits)[rng.randrange(3):] if rng.random() < 0.3 else rng.choice(lits) for _ in range(3)]
        line = rng.choice([b"", b" ", b"x"]).join(parts)
        got = {lit_hit.group(0) for lit_hit in sc._gate.finditer(line)}
        owners = {i for lit in got for i in sc._owners[lit]}
        want = {i for i, m in enumerate(sc._active) if any(lit in line for lit in m.literals)}
        assert want <= owners, (line, [sc._active[i].name for i in want - owners])


def test_a_results_table_cell_of_500_is_not_an_http_500():
    """GIN's access line "| 500 |   12.0s |" is a server's failed request; a markdown results table row
    "| math500 | 500 | 0.914 |" of a finished evaluation is not."""
    rep = _rep("Processed prompts: 100%|##########| 500/500 [03:12<00:00, 2.6it/s]\n"
               "| dataset | n | acc |\n|---|---|---|\n| math500 | 500 | 0.914 |\nresults written to out.json\n")
    assert rep.extra["status"] != "crashed"
    rep = _rep('[GIN] 2025/11/09 - 12:12:40 | 500 |   12.0021881s |       127.0.0.1 | POST     "/api/chat"\n')
    assert rep.extra["status"] == "crashed"


def test_a_model_reported_missing_then_trained_with_is_not_the_failure():
    """ModelScope's "failed to access model /mnt/models/X which may not exist" while loading a local
    folder, then the Trainer logs step after step: whatever it reported missing was not needed."""
    line = ("2024-03-14 14:02:13,722 - modelscope - ERROR - Authentication token does not exist, failed to access "
            "model /mnt/models/Qwen1.5-7B-Chat which may not exist or may be                 private. Please login first.\n")
    steps = "".join(f"{{'loss': {2 - n / 100:.3f}, 'grad_norm': 0.8, 'learning_rate': 1e-4, 'epoch': 0.0{n}}}\n"
                    f"Train:   {n}%|#         | {n * 5}/2316 [0{n}:00<3:52:40,  6.21s/it]\n" for n in range(1, 9))
    rep = _rep("[INFO:swift] Loading the model using model_dir: /mnt/models/Qwen1.5-7B-Chat\n" + line + steps)
    assert not [f for f in rep.findings if f.severity == "error"]
    assert any(f.rule_id == "hf-invalid-model-id" and (f.judgement or {}).get("context") == "loaded-anyway"
               for f in rep.findings)
    rep = _rep(line + "Traceback (most recent call last):\n  File \"/app/x.py\", line 3, in <module>\n"
               "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://modelscope.cn/api/v1/models/x\n")
    assert any(f.rule_id == "hf-invalid-model-id" and f.severity == "error" for f in rep.findings)


def test_ray_job_submit_reports_a_failed_job_as_no_finish():
    """`ray job submit` ends with the job's status: "succeeded" is the end of the run, "failed" is not."""
    head = "step 10 loss 1.2\nstep 20 loss 1.1\n-------------------------------------------\n"
    assert llmtriage.analyze(head + "Job 'raysubmit_Vq3kH7bS1mPzL2xw' failed\n").extra["status"] != "finished"
    assert llmtriage.analyze(head + "Job 'raysubmit_Vq3kH7bS1mPzL2xw' succeeded\n").extra["status"] == "finished"
    ray_log = "2025-02-10 08:45:11,583\tERR cli.py:72 -- Job 'raysubmit_Vq3kH7bS1mPzL2xw' failed\n"
    assert llmtriage.analyze(head + ray_log).extra["status"] != "finished"
