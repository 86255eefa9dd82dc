"""Stalls: the rank whose log stopped first in `job`, and the stuck frame of a thread dump in one log."""
from __future__ import annotations

from pathlib import Path

import pytest

import llmtriage
from llmtriage.job.analysis import analyze_job
from llmtriage.detect.threaddump import pick_frame

ROOT = Path(__file__).resolve().parents[1]
FR = ROOT / "fixtures" / "jobs" / "fr"


def test_real_gloo_hang_names_the_rank_that_stopped_logging():
    st = analyze_job([str(FR / "8rank-hang")]).stall
    assert st["stalled_rank"] == 5 and st["last_step"] == 3
    assert st["gap_s"] > 2 and 3.0 <= st["watchdog_gap_s"] <= 8.0      # gloo timeout of 4 s
    assert all(v["last_step"] == 3 for v in st["ranks"].values())
    assert st["text"].startswith("Rank 5 stopped logging first")


def test_nccl_job_gap_before_the_watchdog():
    res = analyze_job([str(FR / "16rank-nccl-xid")], lang="zh")
    st = res.stall
    assert st["stalled_rank"] == 6 and st["last_step"] == 811
    assert 595 <= st["watchdog_gap_s"] <= 605 and st["ranks"]["0"]["last_step"] == 811
    assert "最先停止输出日志" in st["text"]


def test_healthy_job_ending_at_different_times_reports_no_stall(tmp_path):
    for r, end in ((0, "10:05:09"), (1, "10:05:30")):
        lines = [f"[2025-03-01 10:0{m}:00,000] [rank{r}] step {m * 10} loss 1.{m}" for m in range(5)]
        lines.append(f"[2025-03-01 {end},000] [rank{r}] training finished")
        (tmp_path / f"rank{r}.log").write_text("\n".join(lines) + "\n")
    st = analyze_job([str(tmp_path)]).stall
    assert st is not None and "stalled_rank" not in st
    assert st["ranks"]["0"]["last_step"] == 40


def test_faulthandler_dump_reports_the_main_threads_frame():
    rep = llmtriage.analyze(ROOT / "fixtures" / "native-crash" / "sft-segfault-bitsandbytes-step1.log")
    td = rep.extra["thread_dump"]
    assert td["tool"] == "faulthandler" and td["threads"] == 2
    assert td["frame"] == "dequantize_4bit (/opt/venv/lib/python3.10/site-packages/bitsandbytes/functional.py:1396)"
    assert rep.findings[0].captures["stuck_frame"] == td["frame"]
    assert "thread_dump" in rep.to_dict()


PYSPY = """[rank3]: step 1200 loss 1.83
Process 48213: python train.py --config moe.yaml
Python v3.10.12 (/usr/bin/python3.10)

Thread 48390 (idle): "pin_memory"
    select (selectors.py:416)
    _poll (multiprocessing/connection.py:424)
Thread 48213 (idle): "MainThread"
    wait (threading.py:324)
    wait (threading.py:607)
    _wait_for_batch (/opt/venv/lib/python3.10/site-packages/torch/utils/data/dataloader.py:1133)
    __next__ (/opt/venv/lib/python3.10/site-packages/torch/utils/data/dataloader.py:631)
    train_epoch (/work/moe/train.py:212)
    main (/work/moe/train.py:388)
    <module> (/work/moe/train.py:402)
"""


def test_py_spy_dump_reports_the_main_threads_innermost_non_stdlib_frame():
    rep = llmtriage.analyze(PYSPY)
    td = rep.extra["thread_dump"]
    assert td["tool"] == "py-spy" and td["main_thread"] == "48213" and td["threads"] == 2
    assert td["frame"].startswith("_wait_for_batch (") and td["user_frame"] == "train_epoch (/work/moe/train.py:212)"



def test_py_spy_dump_under_a_bracketed_host_tag_is_read():
    """A wrapper that tags every line with its host (`... | sed "s/^/[gpu11] /"`): the frames are read as frames."""
    tagged = "".join(f"[gpu11] {line}\n" for line in PYSPY.splitlines())
    td = llmtriage.analyze(tagged).extra["thread_dump"]
    assert td["main_thread"] == "48213" and td["user_frame"] == "train_epoch (/work/moe/train.py:212)"

FAULTHANDLER = """Timeout (0:10:00)!
Thread 0x00007f2a8c9ff640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/usr/lib/python3.11/threading.py", line 629 in wait
  File "/opt/conda/lib/python3.11/site-packages/tqdm/_monitor.py", line 60 in run

Thread 0x00007f2b9d1f3740 (most recent call first):
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2501 in all_reduce
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/workspace/moe/train.py", line 311 in train_step
  File "/workspace/moe/train.py", line 402 in <module>
"""


def test_faulthandler_later_dump_picks_the_thread_running_module_code():
    td = llmtriage.analyze(FAULTHANDLER).extra["thread_dump"]
    assert td["main_thread"] == "0x00007f2b9d1f3740"
    assert td["frame"] == "all_reduce (/opt/conda/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:2501)"
    assert td["user_frame"] == "train_step (/workspace/moe/train.py:311)"


def test_pick_frame_skips_stdlib_paths():
    frames = [("wait", "/usr/lib/python3.10/threading.py", 324), ("get", "queue.py", 180),
              ("step", "/work/a.py", 3)]
    assert pick_frame(frames) == ("step (/work/a.py:3)", "step (/work/a.py:3)")


def test_log_without_thread_dump_has_no_entry():
    assert "thread_dump" not in llmtriage.analyze("[rank0] step 1 loss 2.0\nall good\n").extra


# ------------------------------------------------------------------ a hang named from a thread dump alone
def _errors(rep):
    return [f for f in rep.findings if f.severity == "error"]


def test_thread_dump_waiting_in_a_collective_with_no_progress_after_is_a_hang():
    rep = llmtriage.analyze("[rank0] step 11 loss 2.1\n[rank0] step 12 loss 2.0\n" + FAULTHANDLER)
    errs = _errors(rep)
    assert rep.extra["status"] == "running"
    assert [(f.category, f.rule_id) for f in errs] == [("nccl-timeout", "thread-dump-collective-hang")]
    assert "all_reduce" in errs[0].message and "train_step (/workspace/moe/train.py:311)" in errs[0].message
    assert errs[0].action == "fix" and "never entered" in errs[0].action_reason   # override hang-seen-in-a-thread-dump


def test_thread_dump_with_progress_after_it_is_not_a_hang():
    # a dump taken to look at a running job, which then went on training
    later = "".join(f"[rank0] step {s} loss 1.9\n" for s in range(13, 40))
    rep = llmtriage.analyze("[rank0] step 12 loss 2.0\n" + FAULTHANDLER + later)
    assert _errors(rep) == []


def test_thread_dump_outside_a_collective_is_no_hang_finding():
    # the main thread in the DataLoader: where it is stuck is reported, but it names no collective
    rep = llmtriage.analyze(PYSPY)
    assert rep.extra["thread_dump"]["collective"] is None
    assert all(f.rule_id != "thread-dump-collective-hang" for f in rep.findings)


ZERO_DUMP = """[before the start of training step] datetime: 2021-11-05 12:31:15
$ py-spy dump --pid 2301466
Process 2301466: python -u pretrain_gpt.py --deepspeed --zero-stage 1
Python v3.8.12 (/opt/conda/bin/python3.8)

Thread 2301466 (active): "MainThread"
    get_grad_norm_direct (deepspeed/runtime/zero/stage2.py:1512)
    step (deepspeed/runtime/zero/stage2.py:1645)
    _take_model_step (deepspeed/runtime/engine.py:1538)
    train_step (megatron/training.py:405)
    <module> (pretrain_gpt.py:237)
Thread 2301601 (idle): "Thread-1"
    wait (threading.py:306)
    run (tqdm/_monitor.py:60)
"""


def test_a_dump_stuck_in_a_distributed_runtime_below_python_is_a_hang():
    # ZeRO's gradient-norm all_reduce runs in C++: py-spy shows only the runtime's Python frame
    rep = llmtriage.analyze(ZERO_DUMP)
    errs = _errors(rep)
    assert [f.rule_id for f in errs] == ["thread-dump-collective-hang"]
    assert "get_grad_norm_direct (deepspeed/runtime/zero/stage2.py:1512)" in errs[0].message
    assert "called from train_step (megatron/training.py:405)" in errs[0].message       # outside torch/deepspeed
    # the same dump in the model's own code is no hang finding
    # ZeRO-3's parameter fetch waits on a CUDA stream: the stream's frame is looked past
    z3 = ZERO_DUMP.replace("    get_grad_norm_direct (deepspeed/runtime/zero/stage2.py:1512)\n",
                           "    synchronize (torch/cuda/streams.py:224)\n"
                           "    fetch_sub_module (deepspeed/runtime/zero/partitioned_param_coordinator.py:332)\n")
    errs = _errors(llmtriage.analyze(z3))
    assert errs and "waiting in fetch_sub_module" in errs[0].message
    own = ZERO_DUMP.replace("deepspeed/runtime/zero/stage2.py", "deepspeed/runtime/fp16/loss_scaler.py")
    assert all(f.rule_id != "thread-dump-collective-hang" for f in llmtriage.analyze(own).findings)


DEEPEP_DUMP = """[2026-06-26 15:41:22 DP0 TP0 EP0] Prefill batch. #new-seq: 4, #new-token: 15872, #cached-token: 6144
[2026-06-26 15:41:44] Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.
Thread 0x7f3c2a9ff740 (active): "MainThread"
    dispatch (deep_ep/buffer.py:545)
    _dispatch_core (sglang/srt/layers/moe/token_dispatcher/deepep.py:412)
    forward_deepep (sglang/srt/models/deepseek_v2.py:688)
    run_batch (sglang/srt/managers/scheduler.py:1912)
[2026-06-26 15:44:04] Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.
"""


def test_a_dump_in_deepep_dispatch_then_a_sigterm_is_a_hang_the_stop_ended():
    """DeepEP's all-to-all runs below Python; a SIGTERM after the dump (a health check's restart) only ended the hang."""
    rep = llmtriage.analyze(DEEPEP_DUMP + "[2026-06-26 15:44:05] SIGTERM received. signum=None frame=None. Draining requests\n")
    errs = _errors(rep)
    assert rep.extra["status"] == "crashed" and [f.rule_id for f in errs] == ["thread-dump-collective-hang"]
    assert "dispatch (deep_ep/buffer.py:545)" in errs[0].message
    # a native crash after the same dump is its own death
    crash = llmtriage.analyze(DEEPEP_DUMP + "Fatal Python error: Segmentation fault\n")
    assert all(f.rule_id != "thread-dump-collective-hang" for f in crash.findings)


def test_a_recognised_error_keeps_the_root_cause_and_gets_the_stuck_frame():
    watchdog = ("[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=4101, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600081 "
                "milliseconds before timing out.\n")
    rep = llmtriage.analyze(FAULTHANDLER + watchdog)
    errs = _errors(rep)
    assert errs and errs[0].rule_id != "thread-dump-collective-hang"
    assert all(f.rule_id != "thread-dump-collective-hang" for f in rep.findings)


@pytest.mark.parametrize("prefix", ["(PolicyTrainerRayProcess pid=81502) ", "gpu-node-07: ", "3: ", "[rank3]: ",
                                    "2025-11-18T09:02:11.402812345Z "])
def test_dump_lines_behind_actor_host_rank_and_time_prefixes_are_parsed(prefix):
    text = "".join(f"{prefix}{line}\n" for line in FAULTHANDLER.splitlines())
    td = llmtriage.analyze(text).extra["thread_dump"]
    assert td["collective"].startswith("all_reduce (") and td["caller"] == "train_step (/workspace/moe/train.py:311)"
