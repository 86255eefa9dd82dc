"""Runs that hit an error and went on (a retried attempt that completed, a backend that loaded anyway, a
replica healed), runs that had completed before an exit crash, and the contrasts that still failed:
rules/verdict.yaml `survived-while-running`, `exit_after_completion` (detect/exit_crash.py) and the
`recovered` context when the signature came back after its last retry."""
from __future__ import annotations

import llmtriage

STEPS = "".join(f"{{'loss': {2.0 - i / 100:.3f}, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}\n"
                for i in range(1, 30))
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.15 GiB of which 1.10 GiB is free.\n")


def _errors(rep: llmtriage.Report) -> list:
    return [f for f in rep.findings if f.severity == "error"]


def test_error_of_a_first_attempt_then_a_retry_that_trains_on_is_survived() -> None:
    text = ("[wrapper] attempt 1: tail of slurm-100.out\n    " + OOM
            + "[wrapper] OOM: resubmitting with batch_size=4\n" + STEPS)
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "running"
    assert not _errors(rep) and rep.extra["action"] == "none"
    oom = next(f for f in rep.findings if f.category == "cuda-oom")
    assert oom.judgement["context"] == "survived-while-running"


def test_error_at_the_end_of_a_running_log_stays_the_failure() -> None:
    rep = llmtriage.analyze(STEPS + "    " + OOM)
    assert [f.category for f in _errors(rep)] == ["cuda-oom"]


def test_silent_failure_categories_are_not_survived_by_running_on() -> None:
    nan = "".join(f"{{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}\n" for i in range(1, 40))
    rep = llmtriage.analyze(STEPS + nan)
    assert any(f.category == "nan-loss" and f.severity == "error" for f in rep.findings)


COMPLETE = ("Train: 100%|██████████| 74/74 [32:09<00:00, 26.08s/it]\n"
            "[INFO:swift] End time of running main: 2025-09-11 16:19:22.473503\n")
ABORT = ("E0911 16:21:58.831000 325 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) "
         "local_rank: 0 (pid: 470) of binary: /opt/conda/bin/python\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
         "  exitcode  : -6 (pid: 470)\n"
         "  traceback : Signal 6 (SIGABRT) received by PID 470\n")


def test_exit_abort_after_the_run_reached_its_end_is_teardown() -> None:
    text = ("[INFO:swift] Saving model checkpoint to /out/checkpoint-50\n" + STEPS
            + "[INFO:swift] Saving model checkpoint to /out/checkpoint-74\n" + COMPLETE + ABORT)
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "finished"
    assert not _errors(rep) and rep.extra["action"] == "none"


def test_abort_after_a_finish_short_of_the_end_still_crashed() -> None:
    short = COMPLETE.replace("100%", "99%").replace("74/74 [32:09<00:00", "73/74 [32:09<00:26")
    text = "[INFO:swift] Saving model checkpoint to /out/checkpoint-50\n" + STEPS + short + ABORT
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "crashed"
    assert any(f.category == "native-crash" for f in _errors(rep))


def test_final_save_after_the_last_step_then_segfault_at_exit_is_teardown() -> None:
    text = (STEPS + "Saving model to runs/exp1/final.pth\nTraining finished. Total episodes: 3000\n"
            "Segmentation fault (core dumped)\n")
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "finished" and not _errors(rep)


def test_application_exception_after_the_finish_keeps_the_death() -> None:
    text = (STEPS + "Saving model to runs/exp1/final.pth\nTraining finished.\n"
            "Traceback (most recent call last):\n  File \"push.py\", line 3, in <module>\n"
            "OSError: [Errno 28] No space left on device\nSegmentation fault (core dumped)\n")
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "crashed" and _errors(rep)


def test_signature_that_came_back_after_its_last_retry_is_the_death() -> None:
    err = ("[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2027, remote process "
           "exited or there was a network error, NCCL version 2.21.5\n"
           "[rank1]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n")
    text = (STEPS + err + "[WARNING] api: [default] Worker group FAILED. 1/1 attempts left; will restart worker group\n"
            + "restart_count=1\n" + STEPS + err
            + "[ERROR] api: [default] Worker group FAILED. 0/1 attempts left; will not restart\n")
    rep = llmtriage.analyze(text)
    assert _errors(rep) and _errors(rep)[0].category == "nccl-error"


def test_crash_in_a_save_begun_after_the_finish_line_keeps_the_death() -> None:
    text = (STEPS + "100%|██████████| 250/250 [29:40<00:00,  7.12s/it]\nTraining completed.\n"
            "Saving model checkpoint to saves/full/sft\nSegmentation fault (core dumped)\n")
    rep = llmtriage.analyze(text)
    assert rep.extra["status"] == "crashed" and any(f.category == "native-crash" for f in _errors(rep))



HOST_NOT_FOUND = ("Traceback (most recent call last):\n"
                  '  File "/usr/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 143, in _env_rendezvous_handler\n'
                  "    store = TCPStore(master_addr, master_port, start_daemon)\n"
                  "ValueError: host not found: Name or service not known\n")
POD_STEPS = "".join(f"2019-01-11 05:46:{i:02d},713 INFO     step={i * 100} loss={2.0 - i / 10:.4f}\n" for i in range(5))


def test_pod_listed_running_again_after_restarts_is_a_new_attempt() -> None:
    # a worker pod crash-looping until its master's service resolves, then listed Running after 4 restarts
    # and training (verdict.yaml new-attempt): the rendezvous errors of the earlier attempts were survived
    pods = ("NAME                 READY   STATUS    RESTARTS   AGE\n"
            "optimizer-worker-0   1/1     Running   4          2m44s\n")
    rep = llmtriage.analyze(HOST_NOT_FOUND + "$ kubectl logs optimizer-worker-0 --previous\n" + HOST_NOT_FOUND
                            + pods + POD_STEPS)
    assert not _errors(rep) and rep.extra["action"] == "none"
    hit = next(f for f in rep.findings if f.rule_id == "c10d-store-connect-failed")
    assert hit.count == 2 and hit.judgement["context"] == "resumed"


def test_pod_still_crash_looping_is_no_new_attempt() -> None:
    pods = ("NAME                 READY   STATUS             RESTARTS   AGE\n"
            "optimizer-worker-0   0/1     CrashLoopBackOff   4          2m44s\n")
    rep = llmtriage.analyze(HOST_NOT_FOUND + pods + HOST_NOT_FOUND)
    assert [f.rule_id for f in _errors(rep)] == ["c10d-store-connect-failed"]


def test_a_storage_error_the_library_continued_without_is_survived() -> None:
    # huggingface_hub cannot chmod a download on a read-only root filesystem, says it continues, and the server serves
    warn = ("Could not set the permissions on the file '/data/.cache/huggingface/download/a1.incomplete'. "
            "Error: [Errno 30] Read-only file system: '/tmp_6b3f'.\nContinuing without setting permissions.\n")
    served = ''.join(f'INFO:     10.244.1.17:4011{i} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n' for i in range(3))
    rep = llmtriage.analyze(warn * 3 + "Fetching 14 files: 100%|██████████| 14/14 [01:52<00:00,  8.04s/it]\n" + served)
    assert not [f for f in rep.findings if f.severity == "error"]
    # without the library's word that it went on, the same error stays the failure
    rep = llmtriage.analyze(warn.split("\n")[0] + "\n")
    assert rep.findings[0].category == "filesystem-error" and rep.findings[0].severity == "error"
