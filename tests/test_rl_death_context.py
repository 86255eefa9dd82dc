"""Judgements about how an RL / launcher job died: a wrapper script's closing echo after its launcher
reported a failed child is no finish (verdict.yaml `death_closes_finish`), the command line echoed
before a native abort places no failure family (scanner `_COMMAND_LINE`), a glog/Ray CHECK failure is
the native crash itself (rule native-check-failed-abort), an AttributeError on a class's own state is
no version mismatch (families.yaml `own_class`), and a remote service that stopped answering mid-run
is retried (actions.yaml remote-service-dropped-mid-run)."""
from __future__ import annotations

import llmtriage
from llmtriage.detect.family import raised_in_own_class, shape_cues


def _report(text: str):
    rep = llmtriage.analyze(text.encode())
    errs = [f for f in rep.findings if f.severity == "error"]
    return rep, (errs[0] if errs else None)


_LAUNCHER_FAILED = """\
Traceback (most recent call last):
  File "/ws/src/train_rl.py", line 7, in <module>
    import math_verify
ModuleNotFoundError: No module named 'math_verify'
E1102 08:00:03.100000 411 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 420) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 420)
"""


def test_a_wrapper_scripts_echo_after_a_failed_launcher_is_no_finish():
    rep, top = _report(_LAUNCHER_FAILED + "Training completed for qwen2.5-7b-grpo\n")
    assert rep.extra.get("status") == "crashed"
    assert top is not None and top.rule_id == "python-module-not-found"


def test_a_finish_after_the_run_made_progress_again_still_counts():
    # the launcher restarted the workers and the run went on to train: the failure was survived
    rerun = "".join(f"{{'loss': 0.01, 'reward': 0.{i}, 'epoch': 0.{i}}}\n" for i in range(1, 6))
    rep, _ = _report(_LAUNCHER_FAILED + rerun + "Training completed for qwen2.5-7b-grpo\n")
    assert rep.extra.get("status") == "finished"


def test_the_echoed_command_line_places_no_family_for_a_native_abort():
    log = (
        "+ python3 -m verl.trainer.main_ppo data.train_files=/d/train.parquet data.val_files=/d/val.parquet "
        "data.truncation=error actor_rollout_ref.rollout.name=vllm\n"
        "(TaskRunner pid=7) step:1 - critic/score/mean:0.41\n"
        "(TaskRunner pid=7) *** SIGABRT received at time=1751786067 on cpu 3 ***\n"
        "(TaskRunner pid=7) Fatal Python error: Aborted\n")
    _, top = _report(log)
    assert top is not None and top.category == "native-crash"
    assert "family" not in top.captures


def test_a_ray_check_failure_is_the_native_crash_not_a_host_oom():
    log = (
        "(TaskRunner pid=2915) [2025-07-06 07:14:27,052 C 2915 2915] task_receiver.cc:219:  Check failed: objects_valid\n"
        "(TaskRunner pid=2915) *** SIGABRT received at time=1751786067 on cpu 41 ***\n"
        "(TaskRunner pid=2915) Fatal Python error: Aborted\n"
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are "
        "some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.\n")
    _, top = _report(log)
    assert (top.rule_id, top.category) == ("native-check-failed-abort", "native-crash")
    assert top.captures["where"] == "task_receiver.cc" and top.captures["check"] == "objects_valid"


def test_an_attribute_of_the_classs_own_state_is_no_version_mismatch():
    assert raised_in_own_class("'MegatronPolicyWorker' object has no attribute 'reference_state_dict'",
                               "/ws/nemo_rl/models/policy/workers/megatron_policy_worker.py")
    assert raised_in_own_class("'DTensorPolicyWorker' object has no attribute 'x'", "/ws/dtensor_policy_worker.py")
    assert not raised_in_own_class("'AdamW' object has no attribute 'train'", "/app/train.py")
    own = shape_cues("AttributeError", "'ZzRolloutWorker' object has no attribute 'ref_state'",
                     ["/py/site-packages/zzrl/workers/base.py", "/py/site-packages/zzrl/workers/zz_rollout_worker.py"])
    assert sum(w for fam, w, _ in own if fam == "dependency-mismatch") == 0
    log = ("Traceback (most recent call last):\n"
           '  File "/app/run.py", line 9, in <module>\n    main()\n'
           '  File "/py/site-packages/zzrl/workers/zz_rollout_worker.py", line 88, in step\n    sd = self.ref_state\n'
           "AttributeError: 'ZzRolloutWorker' object has no attribute 'ref_state'\n")
    _, top = _report(log)
    assert top.rule_id == "unknown" and top.category == "unknown"
    # the same AttributeError raised in the caller's file still reads as two releases that do not match
    caller = log.replace("zz_rollout_worker.py", "trainer_loop.py")
    _, top = _report(caller)
    assert top.category == "dependency-mismatch"


_JUDGE_FAILS = (
    "Traceback (most recent call last):\n"
    '  File "/ws/reward/judge.py", line 40, in compute_score\n    resp = client.chat.completions.create(**kw)\n'
    "openai.APIConnectionError: Connection error.\n")
_STEPS = "".join(f"Training Progress:   {i}%|          | {i}/468 [0{i}:00<43:00:12, 331.50s/it]\n" for i in range(1, 4))


def test_a_remote_service_that_stops_answering_mid_run_is_retried():
    rep, top = _report(_STEPS + _JUDGE_FAILS)
    assert top.rule_id == "unknown" and rep.extra.get("action") == "retry"
    # never reached at all (no progress before it): an address or setup to fix, not a passing outage
    rep, _ = _report(_JUDGE_FAILS)
    assert rep.extra.get("action") == "fix"
