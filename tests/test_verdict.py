"""The verdict: report status, context deciding fatality, the unknown finding yielding, actions."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

import llmtriage
from llmtriage.findings import Finding
from llmtriage.report.render import render_human, render_json
from llmtriage.detect.verdict import ACTIONS, action_for, action_spec, verdict_spec

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"

TRAIN_HEAD = (
    "[INFO|trainer.py:2048] 2024-05-01 10:00:00,000 >> ***** Running training *****\n"
    "{'loss': 2.131, 'grad_norm': 1.42, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
    " 10%|█         | 10/100 [00:31<04:39,  3.10s/it]\n"
)
OOM_TB = (
    "Traceback (most recent call last):\n"
    '  File "/work/train.py", line 88, in <module>\n'
    "    trainer.train()\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.15 GiB of which 1.10 GiB is free.\n"
)
FINISH = "{'train_runtime': 301.2, 'train_samples_per_second': 5.3, 'train_steps_per_second': 0.33, 'train_loss': 1.9, 'epoch': 1.0}\n"


def run(text: str, lang: str | None = None) -> llmtriage.Report:
    return llmtriage.analyze(text, lang=lang)


def errors(rep: llmtriage.Report) -> list[Finding]:
    return [f for f in rep.findings if f.severity == "error"]


# ------------------------------------------------------------------ status

def test_traceback_is_death_evidence():
    rep = run(TRAIN_HEAD + OOM_TB)
    assert rep.extra["status"] == "crashed"
    assert rep.extra["death"]["name"] == "exception" and rep.extra["death"]["line"] == 7
    assert errors(rep)[0].category == "cuda-oom"


def test_finished_run_and_truncated_run():
    assert run(TRAIN_HEAD + FINISH).extra["status"] == "finished"
    assert run(TRAIN_HEAD).extra["status"] == "running"
    assert run(TRAIN_HEAD).extra["death"] is None


def test_crash_after_finish_is_a_crash():
    rep = run(TRAIN_HEAD + FINISH + "Saving model checkpoint to out/final\n" + OOM_TB)
    assert rep.extra["status"] == "crashed"
    assert errors(rep)[0].category == "cuda-oom"


def test_server_death_without_traceback_gets_an_unknown_error():
    log = ("INFO:     Uvicorn running on http://0.0.0.0:23333 (Press CTRL+C to quit)\n"
           "rank[0] failed with error: model.layers.0.mlp.down_proj.qweight doesn't have any device set.\n"
           "SystemExit: 1\n"
           'INFO:     127.0.0.1:40318 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n')
    rep = run(log)
    assert rep.extra["status"] == "crashed"
    top = errors(rep)[0]
    assert top.rule_id == "unknown" and top.line == rep.extra["death"]["line"] == 3
    assert "SystemExit: 1" in top.evidence


def test_warning_cause_on_the_fatal_exception_line_outranks_a_launcher_summary():
    log = ("+ srun --partition=cpu python eval.py --device cuda:0\n"
           "Traceback (most recent call last):\n"
           '  File "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py", line 319, in _lazy_init\n'
           "    torch._C._cuda_init()\n"
           "RuntimeError: No HIP GPUs are available\n"
           "srun: error: cpu-node-017: task 0: Exited with exit code 1\n")
    top = errors(run(log))[0]
    assert top.category == "cuda-unavailable" and top.judgement["context"] == "explains-death"


def test_native_abort_without_traceback():
    rep = run("llama_model_load_internal: offloaded 40/43 layers to GPU\nIllegal instruction (core dumped)\n")
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "native-abort"
    assert errors(rep), "a crashed report always has an error finding"


def test_ray_actors_sigterm_dump_at_teardown_is_no_death():
    # Ray sends its actors SIGTERM when the driver exits; their abseil dumps are no outside kill
    dump = ("(WorkerDict pid=88449) *** SIGTERM received at time=1772590952 on cpu 41 ***\n"
            "(WorkerDict pid=88449) PC: @     0x7f1a5c91e117  (unknown)  (unknown)\n"
            "(WorkerDict pid=88449) [2026-03-04 04:42:32,908 E 88449 88449] logging.cc:474: "
            "*** SIGTERM received at time=1772590952 on cpu 41 ***\n"
            "(ActorWorker(actor_infer-0) pid=40356) *** SIGTERM received at time=1772590952 on cpu 7 ***\n")
    rep = run(TRAIN_HEAD + dump)
    assert rep.extra["death"] is None and not errors(rep)
    # the driver's own dump (no actor prefix) is still a death, and so is a Ray actor's fatal signal
    driver = run(TRAIN_HEAD + "*** SIGTERM received at time=1739834838 on cpu 88 ***\n")
    assert driver.extra["status"] == "crashed" and driver.extra["death"]["name"] == "signal"
    segv = run(TRAIN_HEAD + "(WorkerDict pid=88449) *** SIGSEGV received at time=1772590952 on cpu 41 ***\n")
    assert segv.extra["status"] == "crashed"


def test_progress_after_a_death_marker_undoes_it():
    log = "worker 3 exited with code 1 while downloading, retrying\n" + TRAIN_HEAD * 12
    assert run(log).extra["status"] == "running"


# ------------------------------------------------------------------ context decides fatality

def test_finished_run_demotes_a_signature_to_warning():
    log = TRAIN_HEAD + "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error\n" + FINISH
    rep = run(log)
    assert rep.extra["status"] == "finished" and not errors(rep)
    f = next(f for f in rep.findings if f.category == "nccl-error")
    assert f.severity == "warning" and f.judgement["context"] == "finished"
    assert f.action == "none" and rep.extra["action"] == "none"


def test_silent_failures_stay_errors_in_a_finished_run():
    nan = ("***** Running training *****\n"
           + "".join(f"{{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 3e-05, 'epoch': {i / 10}}}\n" for i in range(1, 9))
           + FINISH)
    zero = nan.replace("'grad_norm': nan, ", "")      # no gradient printed: a loss over no label token
    for log, want in ((nan, "nan-loss"), (zero, "no-grad")):
        rep = run(log)
        assert rep.extra["status"] == "finished"
        assert errors(rep) and errors(rep)[0].category == want


def test_oom_quoted_in_a_userwarning_is_not_fatal():
    rep = llmtriage.analyze(FIX / "healthy" / "fsdp-clone-oom-userwarning-after-train.log")
    oom = next(f for f in rep.findings if f.category == "cuda-oom")
    assert oom.severity == "warning" and oom.judgement["context"] == "quoted-in-warning"
    assert not errors(rep)


def test_a_rule_that_warns_is_not_demoted_as_a_quote_in_a_warning():
    # peft states an adapter that did not load only through a UserWarning: the warning is the failure
    log = ("/opt/venv/lib/python3.11/site-packages/peft/peft_model.py:599: UserWarning: Found missing adapter keys "
           "while loading the checkpoint: ['base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight']\n"
           "  warnings.warn(warn_message)\n"
           "eval: 100%|██████████| 63/63 [04:19<00:00,  4.12s/it]\n")
    rep = run(log)
    f = errors(rep)[0]
    assert f.rule_id == "peft-missing-adapter-keys" and f.judgement is None
    # the context itself still demotes a rule without `warns` whose text a warning quotes
    from llmtriage.detect.verdict import Scanner, _context_applies
    ctx = next(c for c in verdict_spec()["contexts"] if c["id"] == "quoted-in-warning")
    quoted = Finding(rule_id="x", category="cuda-oom", severity="error", title="", message="", line=1,
                     evidence="UserWarning: CUDA out of memory")
    assert _context_applies(ctx, quoted, Scanner(), "running", rules_by_id={"x": {"warns": False}})
    assert not _context_applies(ctx, quoted, Scanner(), "running", rules_by_id={"x": {"warns": True}})


def test_a_printed_warning_line_followed_by_serving_is_survived():
    """"Warning: ..." printed by the program (a registration it skipped), then the server answers
    requests: a warning; the same line as the last thing before a traceback stays an error."""
    warn = "Warning: '<class 'acme.configs.Qwen2_5_VLConfig'>' is already used by a Transformers model.\n"
    served = "".join(f'INFO:     10.0.0.{i}:5{i:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n' for i in range(30))
    rep = run("INFO:     Started server process [4242]\n" + warn * 3 + "INFO:     Application startup complete.\n" + served)
    f = next(f for f in rep.findings if f.category == "dependency-mismatch")
    assert f.severity == "warning" and f.judgement["context"] == "logged-as-warning"
    rep2 = run(warn.replace("Warning: ", "ValueError: ") + "Traceback (most recent call last):\n"
               "  File \"/srv/app.py\", line 3, in <module>\n    import acme\n"
               "ValueError: '<class 'acme.configs.Qwen2_5_VLConfig'>' is already used by a Transformers model.\n")
    assert errors(rep2) and errors(rep2)[0].category == "dependency-mismatch"


def test_a_raised_exception_whose_text_says_warning_is_not_logged_as_warning():
    """The exception a rank raised is not demoted as "logged as a warning" because its message goes on to
    say "WARNING: ..." (torch's hint about the CPU fallback), even with a progress bar redrawn after it."""
    exc = ("NotImplementedError: The operator 'fsdp::all_gather_copy_in' is not currently implemented for the "
           "XPU device. You can set the environment variable `PYTORCH_ENABLE_XPU_FALLBACK=1` to use the CPU "
           "implementation as a fallback for XPU unimplemented operators. WARNING: this will bring unexpected "
           "performance compared with running natively on XPU.\n")
    tb = ("  0%|          | 0/2166 [00:00<?, ?it/s]\n[rank0]: Traceback (most recent call last):\n"
          '[rank0]:   File "/work/recipes/full_finetune_distributed.py", line 751, in train\n'
          "[rank0]:     logits = self._model(**batch)\n[rank0]: " + exc)
    rep = run(tb + "  0%|          | 0/2166 [00:04<?, ?it/s]\n" * 3 + "  1%|          | 12/2166 [00:09<?, ?it/s]\n")
    assert errors(rep) and errors(rep)[0].rule_id == "accelerator-op-not-implemented"
    # the program's own "WARNING: ..." line with progress after it is still a handled warning
    from llmtriage.detect.verdict import _rx
    ctx = next(c for c in verdict_spec()["contexts"] if c["id"] == "logged-as-warning")
    assert _rx(ctx["evidence"]).search("WARNING: RuntimeError: could not write the cache, continuing")
    assert not _rx(ctx["evidence"]).search(exc.strip())


@pytest.mark.parametrize("fault,rule", [
    ("Memory access fault by GPU node-2 (Agent handle: 0x55d0c8f1a2b0) on address 0x7ef7cd5fd000. "
     "Reason: Page not present or supervisor privilege.\nAborted (core dumped)\n", "rocm-memory-access-fault"),
    ("jaxlib._jax.XlaRuntimeError: INTERNAL: Core halted unexpectedly: INTERNAL: Accelerator device halted "
     "prematurely, perhaps due to an on-device check-failure. HLO: fusion.12; HLO computation: main.5_spmd\n",
     "tpu-core-halted"),
])
def test_accelerator_kernel_fault_without_hardware_evidence_is_fix(fault: str, rule: str):
    """ROCm's wording of an illegal memory access ("Memory access fault by GPU node-N ... Page not present")
    and a TPU core halted by an on-device check, with no hardware evidence, are kernel or program bugs: fix,
    like the CUDA wording, not replace-node."""
    rep = run(TRAIN_HEAD + fault)
    assert errors(rep)[0].rule_id == rule
    assert errors(rep)[0].action == "fix" and rep.extra["action"] == "fix", errors(rep)[0].action_reason


def test_trainable_params_zero_outside_training_is_info():
    rep = llmtriage.analyze(FIX / "healthy" / "chatglm-cli-demo-trainable-params-zero.log")
    f = next(f for f in rep.findings if f.category == "no-grad")
    assert f.severity == "info" and f.judgement["context"] == "not-a-training-run"
    # the same summary line in a training run stays an error
    rep2 = run(f.evidence + "\n***** Running training *****\n")
    assert errors(rep2) and errors(rep2)[0].category == "no-grad"


def test_retried_error_followed_by_progress_is_survived():
    rep = llmtriage.analyze(FIX / "healthy" / "inductor-autotune-oom-choice-ignored.log")
    oom = next(f for f in rep.findings if f.category == "cuda-oom")
    assert oom.severity == "warning" and oom.judgement["context"] == "recovered"
    # the same OOM with nothing after it is fatal
    head = (FIX / "healthy" / "inductor-autotune-oom-choice-ignored.log").read_text().split("AUTOTUNE mm(8192x14336")[0]
    cut = "\n".join(line for line in head.splitlines() if "Ignoring this choice" not in line) + "\n"
    assert errors(run(cut))[0].category == "cuda-oom"


# ------------------------------------------------------------------ the unknown finding yields

def test_warning_cause_of_the_same_process_beats_an_unmatched_exception():
    rep = llmtriage.analyze(FIX / "seq-too-long" / "tokenizer-warning-then-unmatched-reshape-crash.log")
    top = errors(rep)[0]
    assert top.category == "seq-too-long" and top.judgement["context"] == "explains-death"
    assert [f.rule_id for f in errors(rep)][1] == "unknown"


def test_a_length_warning_explains_only_deaths_a_long_input_can_cause():
    warn = ("Token indices sequence length is longer than the specified maximum sequence length for this model "
            "(2374 > 2048). Running this sequence through the model will result in indexing errors\n")
    tb = ("Traceback (most recent call last):\n"
          '  File "/home/u/quant.py", line 31, in <module>\n'
          "    model.quantize(tokenizer)\n"
          '  File "/opt/venv/lib/python3.10/site-packages/transformers/models/gpt_neox/modeling_gpt_neox.py", line 326, in forward\n'
          "    self.cos_cached[:seq_len],\n")
    # a TypeError raised inside a library is no consequence of a long input: the warning stays a warning
    rep = run(warn + tb + "TypeError: slice indices must be integers or None or have an __index__ method\n")
    seq = next(f for f in rep.findings if f.category == "seq-too-long" and f.rule_id != "unknown")
    assert seq.severity == "warning" and seq.judgement is None
    assert errors(rep)[0].rule_id == "unknown" and errors(rep)[0].category != "seq-too-long"
    # an index error is what a too-long input causes: the warning explains it
    rep = run(warn + tb + "IndexError: tuple index out of range\n")
    top = errors(rep)[0]
    assert top.category == "seq-too-long" and top.judgement["context"] == "explains-death"


def test_death_report_exception_is_a_symptom_of_an_earlier_signature():
    rep = llmtriage.analyze(FIX / "nccl-timeout" / "verl-actor-died-after-watchdog.log")
    assert errors(rep)[0].category == "nccl-timeout"
    died = [f for f in rep.findings if "ActorDiedError" in f.evidence or f.rule_id == "ray-worker-died-unexplained"]
    assert died and all(f.role == "symptom" for f in died)
    # the unknown finding of a death-report exception yields the same way
    watchdog = ("[rank3]:[E1201 10:00:00.000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1) ran for 1800000 milliseconds before timing out.\n")
    died_tb = ("Traceback (most recent call last):\n  File \"/app/main_ppo.py\", line 40, in main\n"
               "    ray.get(runner.run.remote(config))\n"
               "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n")
    rep = run(TRAIN_HEAD + watchdog + died_tb)
    assert errors(rep)[0].category == "nccl-timeout"
    unknown = next(f for f in rep.findings if f.rule_id == "unknown")
    assert unknown.role == "symptom" and "ActorDiedError" in unknown.evidence
    # vLLM's engine-death reports (V0's AsyncEngineDeadError, the multiprocessing front end's) too
    dead_tb = ("Traceback (most recent call last):\n  File \"/py/site-packages/vllm/entrypoints/openai/api_server.py\", "
               "line 120, in create_chat_completion\n    generator = await engine.generate(req)\n"
               "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. This should never happen!\n")
    rep = run(TRAIN_HEAD + watchdog + dead_tb)
    assert errors(rep)[0].category == "nccl-timeout"
    assert next(f for f in rep.findings if f.rule_id == "unknown").role == "symptom"


def test_death_report_yields_to_the_explanation_printed_in_its_own_message():
    # Ray prints the actor's fields and then why it died BELOW the exception line: that explanation
    # is the report's own, so the unknown death report yields to it
    died_tb = ("Traceback (most recent call last):\n  File \"/app/main_ppo.py\", line 40, in main\n"
               "    ray.get(runner.run.remote(config))\n"
               "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
               "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n\tactor_id: 2d7a0f1e9c3b45a8\n"
               "\tpid: 20977\n\tip: 10.8.0.14\n"
               "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
               "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some "
               "potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.\n")
    rep = run(TRAIN_HEAD + died_tb)
    assert errors(rep)[0].rule_id == "ray-worker-died-unexplained"
    assert next(f for f in rep.findings if f.rule_id == "unknown").role == "symptom"
    # an ordinary exception does not reach below its own line: a later signature does not explain it
    rep = run(TRAIN_HEAD + "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
              "ValueError: reward function returned a list of length 3, expected 8\n"
              "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection "
              "error code 2. End of file.\nJob 'raysubmit_x' failed\n")
    assert any(f.rule_id == "ray-worker-died-unexplained" for f in rep.findings)
    assert errors(rep)[0].rule_id == "unknown"


def test_collective_timeout_after_a_silent_worker_death_yields_to_it():
    died = ("(ActorModelRayActor pid=744) ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
            "(ActorModelRayActor pid=744) The actor is dead because its worker process has died. Worker exit type: "
            "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.\n")
    watchdog = ("(ActorModelRayActor pid=744) [rank9]:[E416 13:21:26.967 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=876319, OpType=BROADCAST, NumelIn=8, NumelOut=8, "
                "Timeout(ms)=600000) ran for 600089 milliseconds before timing out.\n")
    rep = run(TRAIN_HEAD + died + watchdog)
    assert errors(rep)[0].rule_id == "ray-worker-died-unexplained"
    late = next(f for f in rep.findings if f.rule_id == "nccl-watchdog-timeout")
    assert late.judgement and late.judgement["context"] == "after-peer-death"
    # the watchdog first, then the death: the watchdog took the process down and stays the lead
    rep = run(TRAIN_HEAD + watchdog + died)
    assert errors(rep)[0].rule_id == "nccl-watchdog-timeout"


def test_native_crash_right_after_a_recognised_error_of_the_same_process_is_its_consequence():
    oom = ("[rank2]: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n"
           "[rank2]: CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:63\n")
    crash = "[rank2]: Fatal Python error: Segmentation fault\n"
    rep = run(TRAIN_HEAD + oom + crash)
    assert errors(rep)[0].rule_id == "vllm-cumem-allocator-oom"
    seg = next(f for f in rep.findings if f.rule_id == "segmentation-fault")
    assert seg.role == "symptom" and seg.judgement["context"] == "crash-after-cause"
    # another process's error does not explain this process's crash
    rep = run(TRAIN_HEAD + oom + "[rank5]: Fatal Python error: Segmentation fault\n")
    seg = next(f for f in rep.findings if f.rule_id == "segmentation-fault")
    assert seg.role == "cause" and seg.judgement is None
    # nor does an error far above it (the window), nor one printed after the crash
    filler = "".join(f"[rank2]: INFO step {i} done\n" for i in range(60))
    rep = run(TRAIN_HEAD + oom + filler + crash)
    assert next(f for f in rep.findings if f.rule_id == "segmentation-fault").judgement is None
    rep = run(TRAIN_HEAD + crash + oom)
    assert (next(f for f in rep.findings if f.rule_id == "segmentation-fault").judgement or {}).get(
        "context") != "crash-after-cause"


def test_a_bare_abort_right_after_a_warning_cause_makes_that_warning_the_root_cause():
    """cuDNN under WSL2 prints why it cannot go on (the driver library is not on the loader path) and
    calls abort(): the warning-level signature explains the death and becomes the error; the bare
    "Aborted" ranks as its symptom. Far from the abort, or in another process, the warning stays a warning."""
    why = "Could not load library libcudnn_cnn_infer.so.8. Error: libcuda.so: cannot open shared object file: No such file or directory\n"
    rep = run(TRAIN_HEAD + why + "Aborted\n")
    top = errors(rep)[0]
    assert top.rule_id == "no-cuda-gpu-detected" and top.judgement["context"] == "explains-death"
    assert next(f for f in rep.findings if f.rule_id == "process-aborted").role == "symptom"
    filler = "".join(f"step {i}: loss 1.{i:02d}\n" for i in range(12))
    far = run(TRAIN_HEAD + why + filler + "Aborted\n")
    assert next(f for f in far.findings if f.rule_id == "no-cuda-gpu-detected").severity == "warning"
    other = run(TRAIN_HEAD + "[rank1]: " + why + "[rank3]: Aborted\n")
    assert next(f for f in other.findings if f.rule_id == "no-cuda-gpu-detected").severity == "warning"


def test_a_cpp_terminate_whose_what_line_names_a_warning_level_cause_yields_to_it():
    """An uncaught c10::Error prints its message on the "what():" line below the terminate line: a warning-level
    signature there (the ROCm build finding no GPU) is the cause of the abort; the terminate is its symptom.
    A signature printed several lines below the terminate line is not its message."""
    term = "terminate called after throwing an instance of 'c10::Error'\n"
    why = "  what():  HIP error: no ROCm-capable device is detected\n"
    rep = run(TRAIN_HEAD + term + why + "Aborted (core dumped)\n")
    top = errors(rep)[0]
    assert top.rule_id == "no-cuda-gpu-detected" and top.judgement["context"] == "explains-death"
    assert next(f for f in rep.findings if f.rule_id == "cpp-terminate-uncaught").role == "symptom"
    far = run(TRAIN_HEAD + term + "  what():  unknown error\n" + "".join(f"frame #{i}: 0x7f00 in libc10.so\n" for i in range(6))
              + "no CUDA-capable device is detected\n")
    assert errors(far)[0].rule_id == "cpp-terminate-uncaught"


def test_a_notebook_front_end_reporting_the_kernel_process_died_is_the_death():
    """VS Code's Jupyter log says the kernel process died (an abort, the OOM killer): the run crashed, even
    when the process printed no traceback; a cell that completed normally is no death."""
    died = run(TRAIN_HEAD + "14:02:20.114 [error] Disposing session as kernel process died ExitCode: 3, Reason: \n")
    assert died.extra["status"] == "crashed" and errors(died)[0].rule_id == "notebook-kernel-died"
    fine = run(TRAIN_HEAD + "14:02:20.240 [info] End cell 6 execution after 8.338s, completed @ 1648648940238\n")
    assert fine.extra["status"] != "crashed" and not errors(fine)


def test_unknown_still_wins_when_nothing_recognised_explains_it():
    rep = run(TRAIN_HEAD + "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
              "ValueError: reward function returned a list of length 3, expected 8\n")
    assert errors(rep)[0].rule_id == "unknown"



def test_a_feature_disabled_by_an_old_dependency_explains_a_later_unrecognised_failure():
    # rules/verdict.yaml explains_death_rules: this warning explains the unknown failure on the fallback path,
    # though its category (dependency-mismatch) is not among explains_death
    warn = ("WARNING mxfp4.py:58: flashinfer 0.6.3 is older than the minimum 0.6.9 needed by the MXFP4 MoE path; "
            "MXFP4 MoE method not registered\n")
    crash = ("Traceback (most recent call last):\n  File \"moe.py\", line 9, in fused_experts\n"
             "AssertionError: Hidden size mismatch\n")
    top = errors(run(warn + crash))[0]
    assert top.rule_id == "dependency-below-minimum-feature-disabled" and top.category == "dependency-mismatch"
    assert top.judgement["context"] == "explains-death"
    # without the warning the failure stays unrecognised
    assert errors(run(crash))[0].rule_id == "unknown"


# ------------------------------------------------------------------ actions

def test_every_category_has_an_action_and_reasons_in_both_languages():
    taxonomy = yaml.safe_load((ROOT / "rules" / "taxonomy.yaml").read_text(encoding="utf-8"))["categories"]
    cats = action_spec()["categories"]
    assert set(cats) == set(taxonomy)
    for name, entry in cats.items():
        assert entry["action"] in ACTIONS, name
        assert entry["en"] and entry["zh"] and entry["en"] != entry["zh"], name
    for o in action_spec()["overrides"]:
        assert o["action"] in ACTIONS and o["reason"]["en"] and o["reason"]["zh"], o["id"]
        assert not set(o.get("categories", ())) - set(taxonomy), o["id"]
    names = {m["name"] for m in verdict_spec()["markers"]} | {m["kind"] for m in verdict_spec()["markers"]}
    names.add(verdict_spec()["bar_outlasts_timeout"]["marker"])     # set by detect/bar_timeout.py, not by a pattern
    names.add(verdict_spec()["rank_left_early"]["fact"])            # set by detect/rank_left.py, not by a pattern
    for o in action_spec()["overrides"]:
        assert not set(o.get("seen", ())) - names and not set(o.get("seen_any", ())) - names, o["id"]


def test_category_defaults():
    assert errors(run(TRAIN_HEAD + OOM_TB))[0].action == "fix"
    rep = run("OSError: [Errno 98] Address already in use\nRuntimeError: The server socket has failed to listen on any "
              "local network address. port: 43917, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n")
    assert rep.extra["action"] == "retry"          # a port picked at random collided once: rerun
    # torchrun's fixed default port held by another job on the node: the same launch collides again
    fixed = run("RuntimeError: The server socket has failed to listen on any local network address. port: 29500, "
                "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n")
    assert fixed.extra["action"] == "fix" and "MASTER_PORT" in fixed.extra["action_reason"]
    # the weight-sync group port every rollout server on the node defaults to (TRL / ms-swift): the same
    sync = run("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
               "address. port: 51216, useIPv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n")
    assert sync.extra["action"] == "fix" and "vllm_group_port" in sync.extra["action_reason"]
    # a privileged port refused for lack of root (errno 13), not held by anyone: every rerun fails the same way
    priv = run("[W socket.cpp:436] [c10d] The server socket has failed to bind to 0.0.0.0:520 (errno: 13 - Permission denied).\n"
               "RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
               "failed to bind to 0.0.0.0:520 (errno: 13 - Permission denied).\n")
    assert priv.extra["action"] == "fix" and "1024" in priv.extra["action_reason"]
    # a communicator that fails while it is being set up, before any step, fails the same way again
    init = ("[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n")
    assert run(init).extra["action"] == "fix"
    assert run(TRAIN_HEAD + "".join(f"{{'loss': {2 - i / 10}, 'learning_rate': 2e-05, 'epoch': 0.{i}}}\n" for i in range(9))
               + init).extra["action"] == "retry"     # after progress: the transient default


def test_overrides_from_context():
    slurm = "slurmstepd: error: *** JOB 4242 ON gpu-a07 CANCELLED AT 2024-06-01T03:00:12 DUE TO TIME LIMIT ***\n"
    rep = run(TRAIN_HEAD + slurm)
    assert errors(rep)[0].category == "scheduler-kill" and rep.extra["action"] == "fix"
    assert "time limit" in rep.extra["action_reason"]
    preempt = slurm.replace("TIME LIMIT", "PREEMPTION")
    assert run(TRAIN_HEAD + preempt).extra["action"] == "retry"
    xid = ("[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
           "[Thu May  2 22:14:30 2024] NVRM: Xid (PCI:0000:9d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    assert run(xid).extra["action"] == "replace-node"
    alone = run("[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert errors(alone)[0].category == "gpu-hardware-fault" and alone.extra["action"] == "fix"
    # nvidia-smi -q's 'ECC Errors : N/A' row (no ECC reporting) and a pasted grep for the words are no ECC fault
    smi = ("==> nvidia-smi -q | grep -iA3 \"ecc errors\\|retired\\|remapp\" <==\n"
           "    ECC Errors                            : N/A\n")
    assert run("[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n" + smi).extra["action"] == "fix"
    dbe = "[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    assert run(dbe + smi).extra["action"] == "replace-node"


def test_a_kernel_fault_beside_an_application_xid_is_fix_and_a_hardware_xid_still_replaces_the_node():
    launch = "[2026-07-30 01:58:54 TP6] torch.AcceleratorError: CUDA error: unspecified launch failure\n"
    app = ("Jul 30 01:58:54 b300-node07 kernel: NVRM: Xid (PCI:0000:c1:00): 13, pid=884121, name=sglang::schedul, "
           "Graphics Exception: CTA Not Present\n")
    rep = run(launch + app)
    assert errors(rep)[0].rule_id == "cuda-illegal-memory-access" and rep.extra["action"] == "fix"
    assert "application Xid" in rep.extra["action_reason"]
    mmu = app.replace("13, pid", "31, pid").replace("Graphics Exception: CTA Not Present", "MMU Fault: ENGINE GRAPHICS")
    assert run(launch + mmu).extra["action"] == "fix"
    # a hardware Xid in the driver's own PCI format wins over the application one; the launch failure alone keeps its default
    hw = "[Thu Jul 30 01:58:54 2026] NVRM: Xid (PCI:0000:c1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    assert run(launch + app + hw).extra["action"] == "replace-node"
    assert run(launch).extra["action"] == "replace-node"


def test_collective_timeout_while_a_checkpoint_is_written_is_fix_unless_the_save_completed():
    wd = ("[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
          "WorkNCCL(SeqNum=4211, OpType=ALLGATHER, NumelIn=2949120, NumelOut=11796480, Timeout(ms)=600000) "
          "ran for 600047 milliseconds before timing out.\n")
    saving = "INFO:trainer:Saving checkpoint at step 1000 to /ckpt/step_1000 ...\n"
    rep = run(TRAIN_HEAD + saving + wd)
    assert errors(rep)[0].category == "nccl-timeout" and rep.extra["phase"] == "checkpoint-save"
    assert rep.extra["action"] == "fix" and "checkpoint" in rep.extra["action_reason"]
    done = saving + "INFO:trainer:Model weights saved in /ckpt/step_1000/pytorch_model.bin\n"
    assert run(TRAIN_HEAD + done + wd).extra["action"] == "retry"
    assert run(TRAIN_HEAD + wd).extra["action"] == "retry"      # mid-step: the category default


def test_collective_timeout_after_training_finished_is_fix():
    """Every rank timing out in one collective after the Trainer printed its final metrics (the final save
    gathering a full state dict) stops at the same place on a rerun: fix, not the transient default."""
    wd = ("[E ProcessGroupNCCL.cpp:828] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2778, "
          "OpType=_ALLGATHER_BASE, Timeout(ms)=1800000) ran for 1801649 milliseconds before timing out\n")
    final = ("{'train_runtime': 119.8, 'train_samples_per_second': 2.5, 'train_steps_per_second': 0.075, "
             "'train_loss': 1.2388, 'epoch': 2.57}\n")
    died = ("terminate called after throwing an instance of 'std::runtime_error'\n  what():  " + wd
            + "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 5037) of "
            "binary: /opt/conda/bin/python\n")
    rep = run(TRAIN_HEAD + final + wd + died)
    assert errors(rep)[0].category == "nccl-timeout" and rep.extra["action"] == "fix"
    assert "after training had finished" in rep.extra["action_reason"]
    assert run(TRAIN_HEAD + wd + died).extra["action"] == "retry"      # mid-run: the category default


def test_collective_timeout_after_a_step_time_surge_is_fix():
    """A watchdog timeout right after the steps slowed down several-fold (an RL rollout growing past the
    timeout) recurs at the next long step: fix. Steps at their usual length before it stay retry."""
    wd = ("[rank3]:[E1202 11:07:57.610822254 ProcessGroupNCCL.cpp:744] [Rank 3] Watchdog caught collective operation "
          "timeout: WorkNCCL(SeqNum=186, OpType=_ALLGATHER_BASE, NumelIn=10485760, NumelOut=41943040, "
          "Timeout(ms)=1800000) ran for 1800046 milliseconds before timing out.\n")

    def bars(secs: list[int]) -> str:
        out, el = "", 0
        for i, s in enumerate(secs, 1):
            el += s
            out += (f"{{'loss': 0.01, 'grad_norm': 0.3, 'learning_rate': 1e-06, 'epoch': 0.00{i}}}\n"
                    f"Train:   0%|          | {i}/1250 [{el // 3600:02d}:{el % 3600 // 60:02d}:{el % 60:02d}"
                    f"<120:00:00, {s}.21s/it]\n")
        return out
    surge = run(bars([300, 340, 410, 260, 350, 1650]) + wd)
    assert errors(surge)[0].category == "nccl-timeout" and surge.extra["action"] == "fix", surge.extra
    assert "slowed down" in surge.extra["action_reason"]
    steady = run(bars([300, 340, 410, 260, 350, 330]) + wd)
    assert errors(steady)[0].category == "nccl-timeout" and steady.extra["action"] == "retry"
    assert run(bars([300, 1650]) + wd).extra["action"] == "retry"      # too few steps to call it a surge


def test_rdma_failure_before_any_progress_is_fix_and_mid_run_is_retry():
    ib = "node-0:946:988 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129\n"
    start = run("NCCL version 2.18.1+cuda12.1\n" + ib)
    assert errors(start)[0].rule_id == "nccl-ib-fabric-error" and start.extra["action"] == "fix"
    assert "GID" in start.extra["action_reason"]
    assert run(TRAIN_HEAD + ib).extra["action"] == "retry"


def test_a_hub_request_that_bypassed_a_configured_mirror_is_fix():
    err = ("[rank0]: requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', "
           "port=443): Max retries exceeded with url: /api/models/bert-base-uncased (Caused by NewConnectionError("
           "'Failed to establish a new connection: [Errno 110] Connection timed out'))\"), '(Request ID: 1f2e)')\n")
    # no mirror and no sign of a flaky but reachable hub: the network never reaches it (tests/test_actions_context.py)
    assert errors(run(err))[0].category == "hub-unreachable" and run(err).extra["action"] == "fix"
    rep = run("$ export HF_ENDPOINT=https://hf-mirror.com\n" + err)
    assert rep.extra["action"] == "fix" and "HF_ENDPOINT" in rep.extra["action_reason"]
    mirror_down = err.replace("huggingface.co", "hf-mirror.com")        # the mirror itself is down: transient
    assert run("$ export HF_ENDPOINT=https://hf-mirror.com\n" + mirror_down).extra["action"] == "retry"


def test_nccl_connecting_to_a_link_local_address_is_fix():
    warn = ("n1:12251:12400 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to {addr}<17943> failed : "
            "Software caused connection abort\n")
    rep = run(warn.format(addr="fe80::966d:ae03:a2:8cf0%ib1"))
    assert errors(rep)[0].category == "nccl-error" and rep.extra["action"] == "fix"
    assert "NCCL_SOCKET_IFNAME" in rep.extra["action_reason"]
    assert run(warn.format(addr="10.0.3.17")).extra["action"] == "retry"     # a routable peer: transient


def test_nccl_that_cannot_reach_its_peer_before_any_step_is_fix():
    """An unhandled system error after NCCL's bootstrap found no route to the peer (or dialled fe80::...%iface)
    at start-up: the interface or route is wrong and a rerun repeats it (fix); the same error mid-run after
    training made progress stays a retry."""
    head = "".join(f"n2:9087:9121 [0] misc/socket.cc:567 NCCL WARN socketPollConnect: connect returned No route to host, "
                   f"exceeded error retry count ({i})\n" for i in range(1, 4))
    crash = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
             "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
             "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n")
    rep = run(head + crash)
    assert errors(rep)[0].category == "nccl-error" and rep.extra["action"] == "fix"
    assert "NCCL_SOCKET_IFNAME" in rep.extra["action_reason"]
    steps = "".join(f"{{'loss': {2.0 - i * 0.01:.3f}, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}\n"
                    for i in range(1, 30))
    assert run(steps + head + crash).extra["action"] == "retry"


def test_torchs_cuda_initialization_warning_is_no_quote():
    """`UserWarning: CUDA initialization: The NVIDIA driver on your system is too old` is torch saying CUDA
    could not start (the job has no GPU), not an error quoted in a warning: the driver finding stays an
    error in a run that did not finish."""
    log = ("/opt/conda/lib/python3.9/site-packages/torch/cuda/__init__.py:141: UserWarning: CUDA initialization: The NVIDIA "
           "driver on your system is too old (found version 11000). Please update your GPU driver by downloading and "
           "installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n"
           "  return torch._C._cuda_getDeviceCount() > 0\n"
           "  0%|          | 0/1250 [00:00<?, ?it/s]\n")
    rep = run(log)
    assert errors(rep) and errors(rep)[0].rule_id == "nvidia-driver-too-old"


def test_a_preemption_named_as_an_earlier_attempt_is_history_when_this_attempt_trains():
    """A platform header "attempt 2/3 (previous attempt: Preempted ...)" followed by training steps of this
    attempt is not how this log ends; without progress after it, it is still the stop."""
    head = ("beaker: job 01JRZ6 (grpo) task 0 — attempt 2/3 (previous attempt: Preempted by higher-priority job on "
            "ai2/augusta, exit reason: preempted)\n")
    steps = "".join(f"{{'episode': {i * 768}, 'training_step': {i}, 'objective/scores': 0.51}}\n" for i in range(201, 215))
    assert not errors(run(head + steps))
    assert errors(run(head))[0].category == "scheduler-kill"


def test_rule_declared_action_wins_over_the_category_default():
    rs = llmtriage.load_rules()
    rule = dict(rs.by_id["torch-cuda-oom"], action="retry")
    f = Finding(rule_id=rule["id"], category="cuda-oom", severity="error", title="t", message="m", line=1, evidence="e")
    assert action_for(f, set(), None, {rule["id"]: rule}) == ("retry", action_spec()["generic"]["retry"]["en"])
    assert action_for(f, set(), None, {})[0] == "fix"


def test_json_carries_status_action_and_judgement():
    rep = run(TRAIN_HEAD + OOM_TB)
    out = io.StringIO()
    render_json([rep], out)
    d = json.loads(out.getvalue())["reports"][0]
    assert d["status"] == "crashed" and d["death"]["line"] == 7
    assert d["action"] == "fix" and d["action_reason"]
    assert {"action", "action_reason", "judgement"} <= set(d["findings"][0])
    healthy = llmtriage.analyze(FIX / "healthy" / "vllm-serve-benign.log").to_dict()
    assert healthy["action"] == "none" and healthy["status"] in ("running", "finished")


@pytest.mark.parametrize("lang,label,word", [(None, "Next: fix — ", "crashed"), ("zh", "下一步：先修复 — ", "已崩溃")])
def test_human_next_line(lang, label, word):
    rep = run(TRAIN_HEAD + OOM_TB, lang=lang)
    out = io.StringIO()
    render_human([rep], out, lang=lang)
    text = out.getvalue()
    assert word in text.splitlines()[0]
    nxt = [line for line in text.splitlines() if label in line]
    assert len(nxt) == 1 and rep.findings[0].action_reason in nxt[0]


def test_kb_page_shows_the_default_action():
    from llmtriage.kb.page_text import render_rule_text
    from llmtriage.kb.pages import rule_page

    rs = llmtriage.load_rules()
    page = rule_page(rs, rs.by_id["slurm-job-cancelled"])
    assert page["action"]["action"] == "retry"
    assert "Next: retry — " in render_rule_text(page)


def test_native_crash_after_a_completed_run_is_teardown():
    """The run reached 900/900, printed its final metrics and saved the model before the segfault at exit: the
    outputs are written, the crash is teardown (rules/verdict.yaml `exit_after_completion`): finished, a warning."""
    rep = llmtriage.analyze(FIX / "healthy" / "segfault-at-exit-after-training.log")
    top = rep.findings[0]
    assert (top.category, top.severity, rep.extra["status"]) == ("native-crash", "warning", "finished")
    assert "already finished" in top.judgement["reason"] and rep.extra["action"] == "none"
    step1 = llmtriage.analyze(FIX / "native-crash" / "sft-segfault-bitsandbytes-step1.log").findings[0]
    assert step1.category == "native-crash" and "shutdown" not in step1.action_reason


def test_an_exception_handled_by_a_recovery_line_and_followed_by_progress_is_not_a_death():
    """However few lines are left: the error was caught (retry, a rejected request) and work went on."""
    tb = ("Traceback (most recent call last):\n  File \"/srv/app.py\", line 3, in handle\n"
          "    raise ValueError('bad input')\nValueError: bad input\n")
    handled = tb + "WARNING fetching shard failed, retrying in 5s\n" + "".join(
        f"step {i} loss 1.{i:02d}\n" for i in range(10, 14))
    rep = llmtriage.analyze(handled)
    assert rep.extra["status"] != "crashed", rep.extra.get("death")
    assert not [f for f in rep.findings if f.severity == "error"]
    dead = llmtriage.analyze(tb + "".join(f"step {i} loss 1.{i:02d}\n" for i in range(10, 14)) + tb)
    assert dead.extra["status"] == "crashed"


def test_unrecognised_failure_after_the_work_finished_says_it_failed_at_shutdown():
    done = ("Processed prompts: 100%|██████████| 500/500 [01:12<00:00,  6.89it/s]\n"
            "Wrote 500 generations to out.jsonl\n")
    dies = ("ERROR 05-12 09:03:05 [core.py:398] EngineCore encountered a fatal error.\n"
            "ERROR 05-12 09:03:05 [core.py:398] Traceback (most recent call last):\n"
            'ERROR 05-12 09:03:05 [core.py:398]   File "/venv/vllm/v1/engine/core.py", line 413, in run_busy_loop\n'
            "ERROR 05-12 09:03:05 [core.py:398]     self._process_input_queue()\n"
            "ERROR 05-12 09:03:05 [core.py:398] RuntimeError: cancelled\n")
    after = run(done + dies)
    top = errors(after)[0]
    assert (after.extra["status"], top.category) == ("crashed", "unknown")
    assert "shutdown" in top.action_reason and "outputs are complete" in top.action_reason
    zh = errors(run(done + dies, lang="zh"))[0]
    assert "退出阶段" in zh.action_reason
    before = errors(run(dies))[0]        # the same failure with no finished work: no shutdown story
    assert before.category == "unknown" and "shutdown" not in before.action_reason


def test_override_reads_the_logs_words_not_the_rules_message():
    """torchelastic-sigterm's message lists the possible senders ("preemption, time limit, eviction");
    only a time limit the log itself names makes the action `fix`."""
    sigterm = ("[step=12639/47214] train/CE loss=0.8391\n"
               "W0903 07:59:53.311000 1 torch/distributed/elastic/agent/server/api.py:719] Received 15 death signal, "
               "shutting down workers\n"
               "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1 got signal: 15\n")
    plain = errors(run(sigterm))[0]
    assert plain.category == "scheduler-kill" and plain.action == "retry", plain.action_reason
    limit = errors(run(sigterm + "slurmstepd: error: *** JOB 881204 ON node-a12 CANCELLED AT 2026-09-03T07:59:53 "
                                 "DUE TO TIME LIMIT ***\n"))[0]
    assert limit.category == "scheduler-kill" and limit.action == "fix", (limit.rule_id, limit.action_reason)


RESTARTED = (
    "I0901 03:00:01.700000 300 torch/distributed/elastic/agent/server/api.py:525] [default] starting workers for entrypoint: python\n"
    "[2024-09-01 03:10:44] epoch 0 step 1200 loss 2.201\n"
    "E0901 03:12:40.511000 300 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 1 "
    "(pid: 332) of binary: /usr/bin/python\n"
    "W0901 03:12:40.512000 300 torch/distributed/elastic/agent/server/api.py:723] [default] Worker group FAILED. 3/3 "
    "attempts left; will restart worker group\n"
    "I0901 03:12:40.513000 300 torch/distributed/elastic/agent/server/api.py:864] [default] Restarting worker group\n"
)
LATER = ("Traceback (most recent call last):\n"
         '  File "/w/train.py", line 40, in <module>\n'
         "    loss.backward()\n"
         "RuntimeError: grad can be implicitly created only for scalar outputs\n")


def test_a_restarted_worker_group_that_later_dies_of_something_else_names_the_later_cause():
    rep = run(RESTARTED + LATER)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "exception"
    errs = errors(rep)
    assert errs[0].category == "autograd-misuse", [(f.rule_id, f.severity) for f in rep.findings]
    killed = next(f for f in rep.findings if f.rule_id == "process-sigkilled")
    assert killed.severity == "warning" and killed.judgement["context"] == "recovered"
    # counter-case: no restart line, so the SIGKILL is not known to be survived and stays an error
    plain = run(RESTARTED.replace("; will restart worker group", "").rsplit("I0901", 1)[0] + LATER)
    assert any(f.rule_id == "process-sigkilled" and f.severity == "error" for f in plain.findings)


def test_an_error_skipped_by_the_autotuner_yields_to_a_later_error_even_without_progress():
    skipped = ("[rank0]:W1021 14:04:02.551000 2231 torch/_inductor/select_algorithm.py:1906] [1/0] CUDA out of memory. "
               "Tried to allocate 896.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 611.88 MiB is free.\n"
               "[rank0]:W1021 14:04:02.551000 2231 torch/_inductor/select_algorithm.py:1906] [1/0] Ignoring this choice.\n")
    errs = errors(run(skipped + LATER))
    assert errs[0].category == "autograd-misuse", [(f.rule_id, f.category) for f in errs]


def test_an_exception_quoted_in_a_chat_transcript_is_not_the_crash():
    text = ("[INFO:swift] Loading the model using model_dir: /models/Qwen2.5-7B-Instruct-FP8\n"
            '[QUERY] 为什么训练时报错 "ValueError: The model you are trying to fine-tune is quantized with fp8 but '
            'that quantization method do not support training."?\n'
            "[RESPONSE] FP8 量化的模型不能直接训练，请改用 bf16 权重或 QLoRA。\n"
            "[INFO:swift] End time of running main: 2025-03-01 10:12:03.481\n")
    rep = run(text)
    assert rep.exception is None and errors(rep) == [] and rep.extra["status"] == "finished"
    bare = run("step 3 loss 1.2\nValueError: bad value for lr\n")     # the same name at the line start is the crash
    assert bare.exception is not None and bare.exception.type == "ValueError"


def test_llama_cpp_exit_lines_are_death_evidence():
    text = ("llama_model_load: error loading model: check_tensor_dims: tensor 'blk.0.attn_q.weight' has wrong shape\n"
            "llama_model_load_from_file_impl: failed to load model\n"
            "main: exiting due to model loading error\n")
    rep = run(text)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "llama-cpp-exit"
    assert errors(rep), "a crashed report always has an error finding"


def test_a_pod_state_from_kubectl_describe_is_death_evidence():
    log = ("Name:         sft-worker-0\nNamespace:    train\nStatus:       Running\n"
           "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
           "    Ready:          False\n"
           "  Warning  BackOff  12s (x4 over 1m)  kubelet  Back-off restarting failed container trainer in pod sft-worker-0\n")
    rep = llmtriage.analyze(log.encode())
    assert rep.extra["status"] == "crashed"
    assert rep.extra["death"]["name"] == "k8s-container-died"


def test_a_client_that_closed_its_request_is_survived():
    load = ('time=2025-03-02T10:02:13.402Z level=WARN source=server.go:568 msg="client connection closed before server '
            'finished loading, aborting load"\n'
            'time=2025-03-02T10:02:13.402Z level=ERROR source=sched.go:455 msg="error loading llama server" '
            'error="timed out waiting for llama runner to start: context canceled"\n')
    closed = '[GIN] 2025/03/02 - 10:02:13 | 499 |  2.301118903s |      172.18.0.3 | POST     "/api/chat"\n'
    served = '[GIN] 2025/03/02 - 10:02:20 | 200 |  5.1s |      172.18.0.3 | POST     "/api/chat"\n'
    rep = llmtriage.analyze((load + closed + served).encode())
    assert rep.extra["status"] != "crashed" and not any(f.severity == "error" for f in rep.findings)
    # a request served afterwards proves the server alive too, however soon the log ends;
    # with nothing after the failed load, it is the death
    assert llmtriage.analyze((load + served).encode()).extra["status"] != "crashed"
    assert llmtriage.analyze(load.encode()).extra["status"] == "crashed"


SERVED = 'INFO:     10.0.7.31:40218 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
CANCELLED = ("ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n"
             '  File "/venv/lib/python3.10/site-packages/starlette/responses.py", line 265, in __call__\n'
             "    await wrap(partial(self.listen_for_disconnect, receive))\n"
             "asyncio.exceptions.CancelledError: Cancelled by cancel scope 757f107d7cd0\n")


def test_a_request_served_after_an_exception_is_progress_a_dying_server_cannot_print():
    rep = run(SERVED + CANCELLED + SERVED + SERVED)
    assert rep.extra["status"] != "crashed" and not errors(rep)
    rep = run(SERVED + CANCELLED)                       # nothing served after it: the death
    assert rep.extra["status"] == "crashed" and errors(rep)
    # a streaming server logs the failed request's own "200 OK" right after its traceback: not a later request
    oom = ("Traceback (most recent call last):\n  File \"/srv/vl/engine.py\", line 151, in forward\n    outputs = self.model(x)\n"
           "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 400.00 MiB. GPU 0 has a total capacity of "
           "14.75 GiB of which 63.06 MiB is free.\n")
    assert [f.category for f in errors(run(SERVED + oom + SERVED))] == ["cuda-oom"]
    assert not errors(run(SERVED + oom + SERVED + SERVED))
    # a training step within progress_gap lines of a death is not enough (another rank prints on)
    assert run(TRAIN_HEAD + OOM_TB + TRAIN_HEAD).extra["status"] == "crashed"


RAY_DIED = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. "
            "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.\n")
FINAL_VAL = "(TaskRunner pid=8120) (\"Final validation metrics: {'val-core/math/reward/mean@1': 0.6612}\")\n"


def test_a_peer_death_reported_after_the_run_finished_is_teardown():
    rep = run(TRAIN_HEAD + FINAL_VAL + RAY_DIED)
    assert rep.extra["status"] == "finished" and not errors(rep)
    # the same report before the finish, or with an exception after the finish, is a crash
    assert run(TRAIN_HEAD + RAY_DIED).extra["status"] == "crashed"
    assert run(TRAIN_HEAD + FINAL_VAL + RAY_DIED + OOM_TB).extra["status"] == "crashed"


def test_a_bare_exception_ending_the_log_is_a_death():
    ray = ("Exception occurred while running MegatronActor's function init_worker: exception is "
           "ray::MegatronActor.init_worker() (pid=26068, ip=172.27.146.45)\n"
           '  File "/opt/Megatron-LM/megatron/training/checkpointing.py", line 1042, in load_checkpoint\n'
           "    model[0].load_state_dict(state_dict['model'], strict=strict)\n"
           "RuntimeError: Error(s) in loading state_dict for GPTModel:\n"
           '\tMissing key(s) in state_dict: "decoder.layers.0.self_attention.linear_proj._extra_state".\n')
    rep = run(ray)
    assert rep.extra["status"] == "crashed" and rep.findings[0].category == "state-dict-keys"
    later = "".join(f"(MegatronActor pid=26068) step:{i} - actor/pg_loss:-0.004 - actor/grad_norm:0.2\n" for i in range(30))
    assert run(ray + later).extra["status"] != "crashed"


def test_a_command_line_tools_final_error_is_a_death_only_as_the_last_words():
    err = "Error: listen tcp 127.0.0.1:11434: bind: address already in use\n"
    head = 'time=2025-02-11T09:14:20.112+01:00 level=INFO source=images.go:432 msg="total blobs: 9"\n'
    rep = run(head + err)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "cli-final-error"
    assert run(head + err + head * 5).extra["status"] == "running"


def test_an_interrupted_job_needs_no_action():
    text = SERVED + ("Traceback (most recent call last):\n  File \"/opt/venv/bin/vllm\", line 10, in <module>\n"
                     "    sys.exit(main())\nKeyboardInterrupt\n")
    rep = run(text)
    assert not errors(rep)
    u = next(f for f in rep.findings if f.rule_id == "unknown")
    assert u.action == "none" and "interrupt" in u.action_reason


def test_an_error_the_program_says_it_ignored_is_information():
    err = "OSError: [Errno 28] No space left on device: '/logs/events.out.tfevents'\n"
    rep = run(TRAIN_HEAD + "Error ignored while writing the event file: " + err + TRAIN_HEAD)
    f = next(f for f in rep.findings if f.category == "disk-full")
    assert f.severity == "info" and f.judgement["context"] == "ignored-by-the-program"
    assert errors(run(TRAIN_HEAD + err))[0].category == "disk-full"


def test_a_download_resumed_after_an_error_is_recovered():
    err = ("requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='cdn-lfs-us-1.hf-mirror.com', port=443): "
           "Read timed out. (read timeout=10)\n")
    bar = "model-00001-of-00004.safetensors: 100%|##########| 3.95G/3.95G [05:49<00:00, 11.3MB/s]\n"
    done = "Fetching 14 files: 100%|##########| 14/14 [06:14<00:00, 26.71s/it]\n"
    rep = run(err + "Trying to resume download...\n" + bar + done)
    assert not errors(rep)
    assert errors(run(err + bar)), "without the resume line the read timeout stays an error"


NO_GRAD_WARN = ("/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:91: UserWarning: None of the inputs "
                "have requires_grad=True. Gradients will be None\n  warnings.warn(\n")


def test_a_signature_warning_and_the_loss_curve_corroborate_a_silent_failure():
    flat = "".join(f"{{'loss': {2.45115 if i % 2 else 2.45125}, 'learning_rate': 1.9e-05, 'epoch': {i / 20:.2f}}}\n"
                   for i in range(1, 21))
    falling = "".join(f"{{'loss': {2.5 - i * 0.05:.3f}, 'learning_rate': 1.9e-05, 'epoch': {i / 20:.2f}}}\n"
                      for i in range(1, 21))
    rep = run(NO_GRAD_WARN + flat + FINISH)
    top = rep.findings[0]
    assert top.rule_id == "checkpoint-inputs-no-grad" and top.severity == "error"
    assert top.judgement["context"] == "corroborated" and "line 3" in top.judgement["reason"]
    assert any(f.rule_id == "metric-flat-loss" and f.severity == "warning" for f in rep.findings)
    rep = run(NO_GRAD_WARN + falling + FINISH)           # the loss falls: the warning alone is harmless
    assert not errors(rep)


ENGINE_CORE = (
    "INFO 07-02 08:11:43 [core.py:69] Initializing a V1 LLM engine (v0.9.2) with config: model='zz/Model-9B'\n"
    "ERROR 07-02 08:11:47 [core.py:586] EngineCore failed to start.\n"
    "ERROR 07-02 08:11:47 [core.py:586] Traceback (most recent call last):\n"
    'ERROR 07-02 08:11:47 [core.py:586]   File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 577, in run_engine_core\n'
    "ERROR 07-02 08:11:47 [core.py:586]     engine_core = EngineCoreProc(*args, **kwargs)\n"
    'ERROR 07-02 08:11:47 [core.py:586]   File "/venv/lib/python3.12/site-packages/zzmm/processor.py", line 100, in build\n'
    "ERROR 07-02 08:11:47 [core.py:586]     return ZzProcessor(cfg)\n"
    "ERROR 07-02 08:11:47 [core.py:586] {exc}\n"
    "Traceback (most recent call last):\n"
    '  File "/venv/bin/vllm", line 8, in <module>\n'
    "    sys.exit(main())\n"
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{}}\n"
)


def test_the_exception_behind_a_symptom_exception_is_the_root_cause_guess():
    # the last exception is the engine-died symptom's own; the engine process's exception before it,
    # which no rule knows, is the root-cause guess (here placed by its shape)
    rep = run(ENGINE_CORE.format(exc="TypeError: ZzProcessor.build_inputs() takes 2 positional arguments but 3 were given"))
    top = errors(rep)[0]
    assert top.rule_id == "unknown" and top.line == 8 and top.category == "dependency-mismatch"
    died = next(f for f in rep.findings if f.rule_id == "vllm-engine-core-died")
    assert died.role == "symptom" and died.severity == "error"


def test_no_earlier_exception_leaves_the_symptom_alone():
    rep = run("\n".join(ENGINE_CORE.splitlines()[:2] + ENGINE_CORE.splitlines()[8:]).format() + "\n")
    assert errors(rep)[0].rule_id == "vllm-engine-core-died"


def test_an_exception_long_before_the_symptom_is_not_its_cause():
    lines = ENGINE_CORE.format(exc="TypeError: ZzProcessor.build_inputs() takes 2 positional arguments but 3 were given").splitlines()
    far = "\n".join(lines[:8] + [f"INFO 07-02 08:12:{i % 60:02d} [core.py:1] waiting" for i in range(260)] + lines[8:]) + "\n"
    assert errors(run(far))[0].rule_id == "vllm-engine-core-died"


def test_a_pytest_failure_under_torchrun_names_its_exception_not_the_launcher():
    # pytest prints no "Traceback" block: its "E   TypeError: ..." and the summary line are all there is
    log = ("tests/unit/test_zz.py::test_load[tp1] FAILED\n"
           "    def test_load(tmp_path):\n"
           ">       zz.load(ckpt, no_remote=True)\n"
           "E       TypeError: ZzLoader.load() takes 2 positional arguments but 3 were given\n"
           "\n"
           "zz/core/loader.py:890: TypeError\n"
           "=========================== short test summary info ============================\n"
           "FAILED tests/unit/test_zz.py::test_load[tp1] - TypeError: ZzLoader.load() takes 2 positional arguments but 3 were given\n"
           "========================= 1 failed, 3 passed in 48.17s =========================\n"
           "E0424 03:12:49.551000 8817 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
           "local_rank: 0 (pid: 8889) of binary: /usr/bin/python\n")
    rep = run(log)
    top = errors(rep)[0]
    assert top.rule_id == "unknown" and "ZzLoader.load()" in top.message and top.category == "unknown"
    assert top.captures.get("nearest_category") == "dependency-mismatch"      # the lead, named but not the category
    assert any(f.category == "launcher-child-failed" and f.role == "symptom" for f in rep.findings)


def test_a_counter_that_only_shows_after_an_exception_and_advances_means_the_process_lived():
    # a web UI's traceback printed before the first progress bar, then training steps on
    tb = ("Traceback (most recent call last):\n"
          '  File "/py/site-packages/gradio/queueing.py", line 495, in call_prediction\n'
          "    output = await route_utils.call_process_api(\n"
          "httpx.ReadTimeout: timed out\n")
    bars = "".join(f" {i * 3}%|▎         | {i * 5}/186 [00:{i * 6:02d}<21:43,  7.20s/it]\n" for i in range(1, 5))
    rep = run(TRAIN_HEAD.splitlines()[0] + "\n" + tb + bars)
    assert rep.extra["status"] == "running" and not errors(rep)
    # one step after it is not enough: another rank's bar can move once while the job dies
    one = " 3%|▎         | 5/186 [00:06<21:43,  7.20s/it]\n 3%|▎         | 6/186 [00:13<21:43,  7.20s/it]\n"
    rep = run(TRAIN_HEAD.splitlines()[0] + "\n" + tb + one)
    assert rep.extra["status"] == "crashed"


def test_a_request_error_then_finished_requests_is_a_server_that_lived():
    log = ("INFO 03-12 09:29:40 async_llm_engine.py:211] Added request 9a1.\n"
           "ERROR 03-12 09:29:41 serving_chat.py:200] Error in preprocessing prompt inputs\n"
           "Traceback (most recent call last):\n"
           '  File "/py/site-packages/vllm/multimodal/processing.py", line 1211, in _validate_mm_kwargs\n'
           "    raise ValueError(\n"
           "ValueError: You set image=2 (or defaulted to 1) in `--limit-mm-per-prompt`, but passed 3 image items in the same prompt.\n"
           "INFO 03-12 09:30:03 async_llm_engine.py:211] Added request 9f2e8a10-ff24.\n"
           "INFO 03-12 09:30:05 async_llm_engine.py:188] Finished request 9f2e8a10-ff24.\n")
    rep = run(log)
    assert rep.extra["status"] == "running" and not errors(rep)


@pytest.mark.parametrize("last", [
    "/bin/sh: 1: torchrun: not found",
    "run.sh: line 3: deepspeed: command not found",
    "python3: can't open file '/w/train.py': [Errno 2] No such file or directory",
    "zsh: segmentation fault  python x.py",
])
def test_a_shell_that_could_not_run_the_job_is_its_death(last):
    rep = run(f"INFO start\nINFO step 1\n{last}\n")
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "shell-final-error"
    assert errors(rep)
    # the same words followed by work are not the end of the job
    later = run(f"INFO start\n{last}\n" + "".join(f"{{'loss': 1.{i}, 'epoch': 0.{i}}}\n" for i in range(5)))
    assert later.extra["status"] != "crashed"


def test_a_two_record_jump_to_zero_loss_is_not_a_fast_fall_over_a_crash():
    log = ("{'loss': 3.5534, 'grad_norm': 1.414, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
           "{'loss': 0.0, 'grad_norm': 1.414, 'learning_rate': 1e-05, 'epoch': 0.2}\n"
           "[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=2201, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800094 "
           "milliseconds before timing out.\n")
    rep = run(log)
    assert errors(rep)[0].category == "nccl-timeout"
    assert not any(f.rule_id == "metric-fast-fall" for f in rep.findings)


@pytest.mark.parametrize("last, name", [
    ("2024-07-29 14:02:12.930 1 kserve ERROR [__main__.py:<module>():259] Failed to start model server: 'type'", "server-died"),
    ("main: failed to quantize model from 'models/zz-f16.gguf'", "llama-cpp-exit"),
])
def test_a_server_or_tool_that_gave_up_is_a_death(last, name):
    rep = run(f"INFO starting\n{last}\n")
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == name and errors(rep)


def test_a_finished_tokenizer_bar_before_the_error_is_no_running_counter():
    tb = ("Traceback (most recent call last):\n"
          '  File "/py/site-packages/gradio/queueing.py", line 495, in call_prediction\n'
          "    output = await route_utils.call_process_api(\n"
          "httpx.ReadTimeout: timed out\n")
    done = "Running tokenizer on dataset: 100%|██████████| 1000/1000 [00:01<00:00, 812.44 examples/s]\n"
    bars = "".join(f" {i * 3}%|▎         | {i * 5}/186 [00:{i * 6:02d}<21:43,  7.20s/it]\n" for i in range(1, 5))
    rep = run(done + tb + bars)
    assert rep.extra["status"] == "running" and not errors(rep)


def test_the_lines_an_exception_message_goes_on_with_are_the_death_not_after_it():
    """NCCL prints "ncclInvalidUsage ... / Last error: / <detail>" below its DistBackendError: a rule on
    the detail is the cause, not a consequence of the death (after_death.message_lines)."""
    rep = llmtriage.analyze(FIX / "nccl-error" / "duplicate-gpu-detected-invalid-usage.log")
    top = errors(rep)[0]
    assert (top.rule_id, top.role, top.judgement) == ("nccl-duplicate-gpu", "cause", None)
    assert rep.extra["death"]["line"] == 11 and top.line == 14


def test_the_cann_block_below_a_torch_npu_runtime_error_is_part_of_its_death():
    text = (TRAIN_HEAD + "Traceback (most recent call last):\n  File \"/app/train.py\", line 9, in <module>\n    step()\n"
            "RuntimeError: Sync:torch_npu/csrc/framework/OpCommand.cpp:190 NPU error, error code is 107020\n"
            "[ERROR] 2024-09-04-02:46:04 (PID:52416, Device:5, RankID:5) ERR00100 PTA call acl api failed.\n"
            "EI9999: Inner Error!\n"
            "EI9999  The error from device(chipId:5, dieId:0), serial number is 3, hccl fftsplus task timeout occurred "
            "during task execution, stream_id:7, sq_id:7, task_id:5990, stuck notify num:1, timeout:1836.\n")
    top = errors(run(text))[0]
    assert top.category == "nccl-timeout" and top.judgement is None


def test_the_cann_traceback_lines_with_their_source_location_are_part_of_the_death():
    """CANN's own "TraceBack" under EZ9999 ends each line with [FUNC:..][FILE:..][LINE:..]; the kernel
    argument block there ("[AIC_INFO] args ... after execute") is the death's detail, not a later error."""
    text = (TRAIN_HEAD + "Traceback (most recent call last):\n  File \"/app/train.py\", line 9, in <module>\n    step()\n"
            "RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the "
            "current working operator name is Mul.\n"
            "Since the operator is called asynchronously, the stacktrace may be inaccurate.\n"
            "[ERROR] 2025-03-02-10:21:44 (PID:5120, Device:1, RankID:-1) ERR00100 PTA call acl api failed\n"
            "EZ9999: Inner Error!\n"
            "EZ9999: [PID: 5120] The error from device(chipId:1, dieId:0), serial number is 2, there is an aicore error "
            "exception, core id is 7, error code = 0x800000[FUNC:ProcessStarsCoreErrorInfo][FILE:device_error_proc.cc][LINE:1183]\n"
            "        TraceBack (most recent call last):\n"
            "        Aicore kernel execute failed, device_id=1, stream_id=3, task_id=88, fault kernel_name=Mul_7a0e_1"
            "[FUNC:GetError][FILE:stream.cc][LINE:1082]\n"
            "        [AIC_INFO] args(0 to 5) after execute:0x12c0c0013000, 0x9e3b2a48, 0x12c0c0025000, 0x1, 0, "
            "[FUNC:GetError][FILE:stream.cc][LINE:1082]\n")
    top = errors(run(text))[0]
    assert (top.rule_id, top.category, top.judgement) == ("ascend-kernel-host-address-arg", "device-mismatch", None)


# ------------------------------------------------------------------ hangs and launches that went on

SHM = ("(EngineCore_0 pid=40230) INFO 09-14 08:{m:02d}:14 [shm_broadcast.py:466] No available shared memory broadcast "
       "block found in 60 seconds. This typically happens when some processes are hanging or doing some "
       "time-consuming work (e.g. compilation).\n")
VLLM_STATS = ("(APIServer pid=40112) INFO 09-14 08:04:13 [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, "
          "Avg generation throughput: {g} tokens/s, Running: 9 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.1%\n")


def test_a_log_ending_on_a_repeated_hang_precursor_is_a_hang():
    served = VLLM_STATS.format(p="640.7", g="301.5")
    rep = run(served + "".join(SHM.format(m=m) for m in range(5, 12)), lang="zh")
    [f] = errors(rep)
    assert f.rule_id == "vllm-shm-broadcast-wait" and f.judgement["context"] == "stalled"
    assert rep.extra["status"] == "running" and "卡住" in f.judgement["reason"]
    out = io.StringIO()
    render_human([rep], out, lang="zh")
    assert "判断：warning → error" in out.getvalue()
    # idle statistics lines (0 tokens/s) are no progress: the hang stays the error
    rep = run(served + SHM.format(m=5) + VLLM_STATS.format(p="0.0", g="0.0") + "".join(SHM.format(m=m) for m in range(6, 12)))
    assert [f.rule_id for f in errors(rep)] == ["vllm-shm-broadcast-wait"]
    # a slow start that passes (a few waits, then requests served), or too few waits: no error
    rep = run("".join(SHM.format(m=m) for m in range(5, 12)) + served + '"POST /v1/chat/completions HTTP/1.1" 200 OK\n')
    assert not errors(rep)
    assert not errors(run(served + "".join(SHM.format(m=m) for m in range(5, 8))))


def test_a_port_bind_failure_before_the_process_group_came_up_was_got_past():
    bind = ("[W socket.cpp:401] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).\n"
            "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network address.\n")
    up = "All distributed processes registered. Starting with 8 processes\n"
    nccl = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    trainer.fit(model)\n"
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3\n")
    rep = run(bind + up + nccl)
    assert errors(rep)[0].category == "nccl-error"
    port = next(f for f in rep.findings if f.category == "port-in-use" and f.judgement)
    assert port.judgement["context"] == "launch-went-on" and port.severity == "warning"
    # no sign the process group came up: the bind failure is the cause
    assert errors(run(bind + nccl))[0].category == "port-in-use"


def test_a_thread_traceback_right_before_the_shell_prompt_ended_the_job():
    tb = ("Exception in thread Thread-1:\nTraceback (most recent call last):\n"
          '  File "C:\\\\envs\\\\llama\\\\lib\\\\threading.py", line 953, in run\n    self._target(*self._args, **self._kwargs)\n'
          "UnicodeEncodeError: 'gbk' codec can't encode character '\\U0001f917' in position 33: illegal multibyte sequence\n")
    for prompt in ("\n(llama) F:\\LLaMA-Factory-main>\n", "user@gpu-01:~/LLaMA-Factory$ \n"):
        rep = run("Running tokenizer on dataset: 100%|##########| 3000/3000\n" + tb + prompt)
        assert rep.extra["status"] == "crashed" and errors(rep)[0].line == 6
    # without the prompt the process may go on: a background thread's error is a warning
    rep = run("Running tokenizer on dataset: 100%|##########| 3000/3000\n" + tb)
    assert rep.extra["status"] == "running" and not errors(rep)



def test_a_training_thread_that_died_is_not_undone_by_the_ui_s_completion_line():
    """A web UI runs trainer.train() in a thread (rules/verdict.yaml `thread_training_frames`): the thread's
    exception inside the training loop ended the training, and the UI's own "Training complete!" after it
    is no finish of the work. A thread that did not run the training loop stays a background error."""
    def tb(frame: str) -> str:
        return ("Exception in thread Thread-14 (threaded_run):\nTraceback (most recent call last):\n"
                '  File "C:\\\\env\\\\lib\\\\threading.py", line 953, in run\n    self._target(*self._args, **self._kwargs)\n'
                '  File "C:\\\\env\\\\lib\\\\site-packages\\\\transformers\\\\trainer.py", line 1795, in '
                + frame + "\n    for step, inputs in enumerate(epoch_iterator):\n"
                "ValueError: Asking to pad but the tokenizer does not have a padding token.\n")
    head = "Loading checkpoint shards: 100%|##########| 3/3 [00:46<00:00, 15.52s/it]\n2023-08-17 INFO:Starting training...\n"
    tail = "2023-08-17 14:01:59 INFO:Training complete, saving...\n2023-08-17 14:02:00 INFO:Training complete!\n"
    rep = run(head + tb("_inner_training_loop") + tail)
    assert rep.extra["status"] == "crashed" and errors(rep)[0].category == "pad-token-missing"
    rep = run(head + tb("log_metrics_worker") + tail)
    assert rep.extra["status"] == "finished" and not errors(rep)


def test_a_chat_demo_the_user_closed_with_its_exit_command_finished():
    """cli_demo.py sessions end when the user types the exit command at the user prompt: a finish line
    (marker chat-cli-exit), so a warning it printed at start-up and survived is no error."""
    head = ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
            "    PyTorch 2.1.0+cu121 with CUDA 1201 (you have 2.1.0+cu118)\n"
            "Loading checkpoint shards: 100%|##########| 3/3 [00:21<00:00,  7.02s/it]\n\n用户：你好\n\nChatGLM：你好！\n\n")
    for bye in ("用户：exit\n", "User> :quit\n"):
        rep = run(head + bye)
        assert rep.extra["status"] == "finished" and not errors(rep)
    assert run(head + "用户：exit now please\n").extra["status"] != "finished"

def test_a_signature_that_states_why_the_loss_reads_zero_is_the_root_cause():
    """Loss exactly 0 from the first record is NaN-filtered or fully masked; the collator's 'could not find
    the response key ... ignored in loss calculation' says which: the masking is the cause, the metric
    finding stays beside it as a warning (rules/verdict.yaml `explains_metric`)."""
    warn = ("/usr/lib/python3/site-packages/trl/trainer/utils.py:118: UserWarning: Could not find response key "
            "`### Answer:` in the following instance: ### Question: 2+2? This instance will be ignored in loss "
            "calculation. Note, if this happens often, consider increasing the `max_seq_length`.\n")
    zeros = "".join(f"{{'loss': 0.0, 'learning_rate': {3e-5 - i * 1e-6:.2e}, 'epoch': {i / 12:.2f}}}\n"
                    for i in range(1, 13))
    rep = run(warn * 3 + zeros + FINISH)
    top = rep.findings[0]
    assert top.rule_id == "completion-only-response-key-missing" and top.severity == "error"
    assert top.judgement["context"] == "explains-metric"
    assert any(f.rule_id == "metric-loss-zero-no-label-token" and f.severity == "warning" for f in rep.findings)
    rep = run(zeros + FINISH)             # without the collator's word: no label token (no fp16 in the log)
    assert errors(rep)[0].rule_id == "metric-loss-zero-no-label-token"
    rep = run("$ accelerate launch train.py --fp16\n" + zeros + FINISH)     # in fp16: the first forward overflowed
    assert errors(rep)[0].rule_id == "metric-loss-zero-from-start"


def test_a_store_timeout_before_any_step_is_fix_and_after_progress_is_retry():
    err = ("[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId "
           "from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n")
    rep = run("Loading interaction data ...\n" + err)
    assert errors(rep)[0].rule_id == "c10d-store-timeout" and rep.extra["action"] == "fix"
    assert "preprocess" in rep.extra["action_reason"]
    steps = "".join(f"{{'loss': {2.0 - i / 100}, 'grad_norm': 1.1, 'learning_rate': 1e-05, 'epoch': {i / 100}}}\n"
                    for i in range(1, 8))
    assert run(steps + err).extra["action"] == "retry"       # it had been training: a peer fault, transient
    # the c10d client never reached the store: a rendezvous connection failure (nccl-error) whose address,
    # port or peer start a rerun repeats (rules/nccl-error/c10d-store-connect-timeout.yaml)
    connect = "TimeoutError: The client socket has timed out after 900s while trying to connect to (10.0.0.1, 29500).\n"
    rep = run(connect)
    assert errors(rep)[0].category == "nccl-error" and rep.extra["action"] == "fix"


def test_a_collective_peer_hanging_up_after_the_run_finished_is_teardown():
    gloo = ("Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.10/site-packages/sglang/srt/utils.py", line 1011, in broadcast_pyobj\n'
            "    dist.broadcast(tensor_size, src=src, group=dist_group)\n"
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error [10.0.3.14]:40212: "
            "Connection reset by peer\n")
    rep = run(TRAIN_HEAD + FINISH + "INFO shutting down the rollout engines\n" + gloo)
    assert rep.extra["status"] == "finished" and not errors(rep)
    # before the finish it is a crash, and any other exception after the finish still is one
    assert run(TRAIN_HEAD + gloo).extra["status"] == "crashed"
    assert run(TRAIN_HEAD + FINISH + gloo + OOM_TB).extra["status"] == "crashed"


def test_a_health_probe_answered_200_is_not_serving():
    """A web app whose model failed to load still answers its health probe (GET /api/health 200): that is not
    progress, so the load failure stays the error; a real request answered 200 afterwards is."""
    so = "/app/.local/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so"
    head = (f"app - ERROR - Model loading failed: {so}: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE\n"
            "app - WARNING - Retrying model load with the fallback path\n"
            "app - ERROR - FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package "
            "flash_attn seems to be not installed. Please refer to the documentation to install Flash Attention 2.\n"
            "INFO:     Application startup complete.\n")
    probe = 'INFO:     172.18.0.1:53318 - "GET /api/health HTTP/1.1" 200 OK\n'
    assert errors(run(head + probe))
    served = 'INFO:     172.18.0.1:53320 - "POST /api/ocr HTTP/1.1" 200 OK\n'
    assert not errors(run(head + probe + served))


def test_a_build_tools_exit_status_is_not_the_jobs_death():
    """Triton's ptxas (called by its full path) exiting 255 is a subprocess failure the process goes on to
    report: the death is the exception it raises, and the toolchain cause printed in between ranks first."""
    log = ("INFO 07-01 14:27:30 [backends.py:472] Dynamo bytecode transform time: 7.83 s\n"
           "[rank0]:E0701 14:28:21 triton_heuristics.py:539] Triton compilation failed: triton_red_fused_add_0\n"
           "[rank0]:E0701 14:28:21 triton_heuristics.py:539] subprocess.CalledProcessError: Command "
           "'['/opt/cuda-12.8/bin/ptxas', '-lineinfo', '--gpu-name=sm_120a', '/tmp/k.ptx']' returned non-zero exit status 255.\n"
           "[rank0]:E0701 14:28:21 triton_heuristics.py:539] During handling of the above exception, another exception occurred:\n"
           "[rank0]:E0701 14:28:21 triton_heuristics.py:539] RuntimeError: Internal Triton PTX codegen error\n"
           "[rank0]:E0701 14:28:21 triton_heuristics.py:539] `ptxas` stderr:\n"
           "[rank0]:E0701 14:28:21 triton_heuristics.py:539] ptxas /tmp/k.ptx, line 6; error   : PTX .version 8.4 does not support .target sm_120a\n"
           "ERROR 07-01 14:28:21 [core.py:515] EngineCore failed to start.\n"
           "ERROR 07-01 14:28:21 [core.py:515] Traceback (most recent call last):\n"
           "ERROR 07-01 14:28:21 [core.py:515]   File \"/x/vllm/v1/engine/core.py\", line 506, in run_engine_core\n"
           "ERROR 07-01 14:28:21 [core.py:515]     engine_core = EngineCoreProc(*args, **kwargs)\n"
           "ERROR 07-01 14:28:21 [core.py:515] torch._inductor.exc.InductorError: RuntimeError: PTX .version 8.4 does not "
           "support .target sm_120a\n")
    rep = run(log)
    assert rep.extra["status"] == "crashed" and rep.extra["death"]["name"] == "exception"
    assert errors(rep)[0].rule_id == "nvcc-toolkit-too-old"


def test_an_apps_failed_run_summary_is_not_a_finish():
    """ACE-Step's UI logs "❌ Training completed! Total time: 16s" after "Training failed: MPS backend out of
    memory": a summary of a failed run, not a normal finish, so the OOM stays the error. A plain
    "Training completed" line after the same steps still finishes the run and demotes a survived signature."""
    oom = ("RuntimeError: MPS backend out of memory (MPS allocated: 45.18 GiB, other allocations: 719.81 MiB, max allowed: "
           "45.90 GiB). Tried to allocate 23.44 MiB on private pool.\n")
    failed = oom + ("2026-02-07 19:33:57.629 | INFO | handlers:start_training:642 - [16s] Step 0: ❌ Training failed: MPS backend out of memory\n"
                    "2026-02-07 19:33:57.658 | INFO | handlers:start_training:668 - ❌ Training completed! Total time: 16s\n")
    rep = run(failed)
    assert rep.extra["status"] != "finished"
    assert errors(rep)[0].category == "cuda-oom"
    assert run(TRAIN_HEAD + "Training completed. Total time: 3h 12m\n").extra["status"] == "finished"
def test_a_stop_the_job_came_back_from_yields_to_the_later_failure():
    """A Slurm stop, then the requeued job resumes from its checkpoint and dies of its own error: that error
    is the root cause, the stop is history (and no cue for the error's family). Without the resume line
    the stop stays."""
    stop = ("slurmstepd: error: *** JOB 7310 ON gpu-b03 CANCELLED AT 2026-05-14T03:02:31 DUE TO PREEMPTION ***\n"
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n")
    again = ("+ srun torchrun --nnodes=2 --nproc_per_node=4 train.py --resume auto\n"
             "[2026-05-14 03:19:53] INFO trainer: world_size=8, building model\n"
             "[2026-05-14 03:19:54] INFO trainer: auto-resume from /scratch/ckpt/run3/step_1000\n")
    crash = ("Traceback (most recent call last):\n"
             '  File "/work/train.py", line 121, in main\n'
             "    start = ckpt.load(model, optimizer)\n"
             "ValueError: optimizer state has 3 param groups, the model builds 2\n")
    rep = run(TRAIN_HEAD + stop + again + crash)
    assert rep.extra["status"] == "crashed"
    stopped = [f for f in rep.findings if f.category == "scheduler-kill"]
    assert stopped and stopped[0].severity == "warning"
    assert stopped[0].judgement["context"] == "requeued-then-failed"
    assert errors(rep)[0].category != "scheduler-kill"
    plain = run(TRAIN_HEAD + stop + crash.replace("start = ckpt.load", "start = load"))
    assert plain.extra["death"]["name"] == "slurm-end" and errors(plain)[0].category == "scheduler-kill"
    assert not any(f.judgement for f in plain.findings)


def test_except_rules_keep_a_warning_whose_progress_is_the_failure(tmp_path):
    """`except_rules` (contexts) / `keep_rules` (finished) in rules/verdict.yaml: a fine-tune whose loader
    warned 'could not find the metadata file ... will start from random' keeps its error although the job
    logged it as a warning, made progress and even finished: training on from random weights is the failure.
    A from-scratch launch printing the same warning raises nothing."""
    import llmtriage

    head = ["+ torchrun --nproc_per_node 8 pretrain_gpt.py --load /ckpt/base --finetune --save /ckpt/sft",
            "WARNING: could not find the metadata file /ckpt/base/latest_checkpointed_iteration.txt ",
            "    will not load any checkpoints and will start from random", "training ..."]
    steps = [f" iteration {i:>8}/     100 | consumed samples: {i * 64:>8} | elapsed time per iteration (ms): 1800.0 | "
             f"lm loss: {10.4 - i * 0.02:.6E} | loss scale: 1.0 | grad norm: 1.000 |" for i in range(10, 110, 10)]
    running, finished, fresh = tmp_path / "running.log", tmp_path / "finished.log", tmp_path / "fresh.log"
    running.write_text("\n".join(head + steps) + "\n")
    finished.write_text("\n".join(head + steps + ["[after training is done] datetime: 2025-10-03 15:20:31 "]) + "\n")
    fresh.write_text("\n".join([head[0].replace(" --finetune", "")] + head[1:] + steps) + "\n")
    for log in (running, finished):
        [f] = [f for f in llmtriage.analyze(str(log)).findings if f.rule_id == "checkpoint-tracker-missing-start-from-random"]
        assert f.severity == "error" and f.judgement is None
    assert not [f for f in llmtriage.analyze(str(fresh)).findings if f.rule_id == "checkpoint-tracker-missing-start-from-random"]


SERVED_400 = (
    "(APIServer pid=1) INFO:     172.19.0.5:40112 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
    "(APIServer pid=1) ERROR 11-03 09:21:41 [serving_chat.py:257] Error in preprocessing prompt inputs\n"
    "(APIServer pid=1) ERROR 11-03 09:21:41 [serving_chat.py:257] ValueError: The decoder prompt (length 15983) is "
    "longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of "
    "text tokens plus multimodal tokens.\n"
    "(APIServer pid=1) INFO:     172.19.0.5:40134 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request\n"
    "(APIServer pid=1) INFO:     172.19.0.5:40142 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"
    "(APIServer pid=1) INFO 11-03 09:21:58 [loggers.py:127] Engine 000: Avg prompt throughput: 1904.2 tokens/s, "
    "Avg generation throughput: 58.7 tokens/s, Running: 0 reqs, Waiting: 0 reqs\n"
)
CLIENT_ECHO = (
    "2025-11-03 09:21:41.800 | ERROR | indexer:caption:201 - captioning failed\n"
    "Traceback (most recent call last):\n"
    '  File "/app/indexer/chunker.py", line 198, in caption\n'
    "    resp = client.chat.completions.create(model='vlm', messages=msgs)\n"
    "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'The decoder prompt (length 15983) is "
    "longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of "
    "text tokens plus multimodal tokens.', 'type': 'BadRequestError', 'param': None, 'code': 400}\n"
)


def test_a_clients_quote_of_a_served_400_is_a_handled_request_not_the_jobs_death():
    """The server rejected one request (400) and kept serving; the client quoted the error response and went
    on: neither the quote nor the signature it repeats ends the job. The same quote as the client's last
    words (or followed only by the user's next command) is the client's death."""
    went_on = llmtriage.analyze(SERVED_400 + CLIENT_ECHO + "2025-11-03 09:21:42.015 | INFO | indexer - indexed deck.pptx: 31 chunks\n")
    assert went_on.extra["status"] != "crashed", went_on.extra.get("death")
    assert not errors(went_on), [(f.rule_id, f.line) for f in errors(went_on)]
    assert any(f.category == "seq-too-long" and f.judgement for f in went_on.findings)
    for end in ("", "$ nvidia-smi\n+-----------------------------------------------------------------------------+\n"):
        died = llmtriage.analyze(SERVED_400 + CLIENT_ECHO + end)
        assert died.extra["status"] == "crashed" and errors(died)[0].category == "seq-too-long", end
    # a quote with no rejection the server logged (no 4xx line) is no served rejection
    unserved = llmtriage.analyze(SERVED_400.replace(" 400 Bad Request", " 500 Internal Server Error") + CLIENT_ECHO
                                 + "2025-11-03 09:21:42.015 | INFO | indexer - indexed deck.pptx: 31 chunks\n")
    assert errors(unserved), unserved.extra.get("death")


def test_an_item_skipped_for_its_error_and_the_loop_going_on_is_recovered():
    # an eval script that logs the one bad video and goes on (Qwen-VL frame sampling of a short clip)
    bars = "".join(f"Eval:  {p}%|#         | {p * 5}/500 [00:{p:02d}<15:02,  1.90s/it]\n" for p in range(10, 100, 10))
    err = "[WARN] sample 0070 (video 0070_neg.mp4) skipped: nframes should in interval [2, 24], but got 32.\n"
    rep = run(bars[:120] + err + bars)
    assert not errors(rep)
    f = next(f for f in rep.findings if f.rule_id == "vision-sample-shape-invalid")
    assert f.judgement["context"] == "recovered"
    assert errors(run(bars[:120] + err.replace(" skipped:", ":"))), "without the skip and the progress it stays an error"


def test_what_a_resume_reports_it_did_not_restore_is_not_survived_by_that_resume():
    # the loader's own report of optimizer shards it could not fill comes before its "resuming" line and
    # steps follow: the resume did not survive it, it is what the resume did (still running, still an error)
    log = ("2026-02-11 09:00:01,002 [Rank 000] Loading distributed checkpoint from /ckpt/run4/8000 ...\n"
           + "".join(f"2026-02-11 09:00:0{2 + i},101 [Rank 000] 4,096 values missing out of 4,096 for parameter "
                     f"layers.{i}.mlp.w1.weight in stage {i}, shard exp_avgs (locally 0 out of 0)\n" for i in range(3))
           + "2026-02-11 09:00:09,500 [Rank 000] Resuming training from iteration 8000\n"
           + "".join(f"2026-02-11 09:{1 + i:02d}:00,000 [Rank 000] training @ step {8010 + 10 * i}/20000 | "
                     f"language model loss: {8.4 - i:.3f} | grad norm: 3.1\n" for i in range(5)))
    rep = llmtriage.analyze(log.encode())
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs and errs[0].rule_id == "resume-optimizer-state-partially-restored", [(f.rule_id, f.severity) for f in rep.findings]
    assert rep.extra["action"] == "fix"


_LONG = ("Token indices sequence length is longer than the specified maximum sequence length for this model (8322 > 4096). "
         "Running this sequence through the model will result in indexing errors")
_DISK = ("UserWarning: Not enough free disk space to download the file. The expected file size is: 4943.16 MB. The target "
         "location /root/.cache/huggingface/hub/models--Qwen--Qwen2-7B/blobs only has 1823.39 MB free disk space.")
_LONG_THEN = (
    "{warning}\n"
    "Traceback (most recent call last):\n"
    '  File "/w/run.py", line 14, in <module>\n'
    "    runner.step(batch)\n"
    '  File "/venv/lib/python3.10/site-packages/stagelib/runner.py", line 88, in step\n'
    "    self.pipe(batch)\n"
    "{death}\n")


@pytest.mark.parametrize("warning, rule, death, promoted", [
    (_DISK, "hf-not-enough-disk-space-warning", "RuntimeError: stage runner failed", True),   # a death the warning may explain
    # an object an earlier failure left None
    (_DISK, "hf-not-enough-disk-space-warning", "AttributeError: 'NoneType' object has no attribute 'pipe'", True),
    # code and library disagree: no runtime condition does that
    (_DISK, "hf-not-enough-disk-space-warning", "AttributeError: 'StageRunner' object has no attribute 'pipe'", False),
    (_DISK, "hf-not-enough-disk-space-warning", "NameError: name 'pipe' is not defined", False),
    # a long input explains only the index, size and length errors it causes (`explains_death_only`)
    (_LONG, "tokenizer-seq-longer-than-max", "RuntimeError: stage runner failed", False),
    (_LONG, "tokenizer-seq-longer-than-max", "RuntimeError: index 8322 is out of bounds for dimension 0 with size 4096", True),
])
def test_a_warning_cause_never_explains_a_death_no_runtime_condition_causes(warning, rule, death, promoted):
    top = llmtriage.analyze(_LONG_THEN.format(warning=warning, death=death)).findings[0]
    assert (top.rule_id == rule) is promoted, (top.rule_id, top.severity)
    assert top.severity == "error"


def test_spawn_reports_the_childs_death_by_message_below_the_childs_error():
    text = ("Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.8/site-packages/torch/distributed/distributed_c10d.py", line 936, in all_reduce\n'
            "    work.wait()\n"
            "RuntimeError: Operation timed out!\n"
            "Traceback (most recent call last):\n"
            '  File "/w/train.py", line 40, in main\n'
            "    p.join()\n"
            "RuntimeError: Process 2 terminated with exit code 1\n")
    findings = llmtriage.analyze(text).findings
    assert findings[0].rule_id == "nccl-watchdog-timeout"
    spawn = next(f for f in findings if f.rule_id == "unknown")
    assert spawn.role == "symptom"


@pytest.mark.parametrize("code, promoted, category", [
    ("assert torch.isnan(p).sum() == 0", False, "nan-loss"),     # the assertion names its own failure family
    ("assert len(batch) == self.size", True, "seq-too-long"),      # it names none: the long input may explain it
])
def test_a_bare_assertion_is_read_by_what_it_asserted(code, promoted, category):
    """A bare AssertionError says nothing but its innermost frame's source line: that line's words place it
    in a family (lmdeploy's AWQ smoothing `assert torch.isnan(p).sum() == 0` is a NaN), and only a cause of
    that family may explain it."""
    text = _LONG_THEN.format(warning=_LONG, death="").rstrip("\n").rsplit("\n", 1)[0] + f"\n    {code}\nAssertionError\n"
    top = llmtriage.analyze(text).findings[0]
    assert (top.rule_id == "tokenizer-seq-longer-than-max") is promoted and top.category == category
    if not promoted:
        assert top.captures["asserted"] == code and code in top.message


@pytest.mark.parametrize("message, family", [
    ("tensor([nan, nan, nan,  ..., nan], device='cuda:0')", "nan-loss"),   # only the value that failed the check
    ("scales must be finite for layer 3", None),                            # a message of words speaks for itself
])
def test_an_assertion_that_only_dumps_a_value_is_read_by_its_expression(message, family):
    """`assert torch.isfinite(out).all(), out` prints the tensor as its message: no words, so its
    expression names the family (a NaN), and the long-input warning before it does not explain it."""
    text = (_LONG_THEN.format(warning=_LONG, death="").rstrip("\n").rsplit("\n", 1)[0]
            + f"\n    assert torch.isfinite(out).all(), out\nAssertionError: {message}\n")
    findings = llmtriage.analyze(text).findings
    top = findings[0]
    if family:
        assert top.rule_id == "unknown" and top.category == family and "isfinite(out)" in top.captures["asserted"]
        assert not any(f.rule_id == "tokenizer-seq-longer-than-max" and f.severity == "error" for f in findings)
    else:
        assert "asserted" not in top.captures


def test_workers_terminated_at_shutdown_after_all_prompts_finished_is_teardown():
    """vLLM's multiproc executor SIGTERMs its workers once the batch is done: "died, exit code: -15" and the
    KeyboardInterrupt its `_sigterm_handler` raises in a sleeping thread are the shutdown, not a failure."""
    done = ("Processed prompts: 100%|██████████| 2000/2000 [01:26<00:00, 22.42it/s]\n"
            "Wrote 2000 generations to outputs.jsonl\n")
    teardown = ("ERROR 06-14 11:04:18 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 31877 died, exit code: -15\n"
                "INFO 06-14 11:04:18 multiproc_worker_utils.py:123] Killing local vLLM worker processes\n"
                "Exception in thread Thread-2 (_report_usage_worker):\nTraceback (most recent call last):\n"
                '  File "/usr/lib/python3.10/threading.py", line 953, in run\n'
                "    self._target(*self._args, **self._kwargs)\n"
                '  File "/usr/local/lib/python3.10/dist-packages/vllm/executor/multiproc_worker_utils.py", line 258, in _sigterm_handler\n'
                "    raise KeyboardInterrupt\nKeyboardInterrupt\n")
    rep = llmtriage.analyze(done + teardown)
    assert rep.extra["status"] == "finished" and not [f for f in rep.findings if f.severity == "error"]
    # the same worker exit before the work was done is still a death
    cut = done.replace("100%|██████████| 2000/2000", "40%|████      | 800/2000")
    assert llmtriage.analyze(cut.replace("Wrote 2000 generations to outputs.jsonl\n", "") + teardown).extra["status"] == "crashed"


def test_a_closing_line_that_carries_a_failed_exit_code_is_no_finish():
    """A job script's "Training finished at <date> with exit code 1" after the launcher failed: the run
    crashed, the port clash that killed it stays the error (a "finished ... exit code 0" line is a finish)."""
    head = ("[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n"
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
            "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n"
            "srun: error: gpu-a100-17: task 0: Exited with exit code 1\n")
    rep = llmtriage.analyze(head + "Training finished at Thu Jul 16 14:02:15 EDT 2026 with exit code 1\n")
    assert rep.extra["status"] == "crashed"
    assert errors(rep)[0].category == "port-in-use"
    ok = llmtriage.analyze("step 10 loss 1.2\nTraining finished at Thu Jul 16 14:02:15 EDT 2026 with exit code 0\n")
    assert ok.extra["status"] == "finished"
