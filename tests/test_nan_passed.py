"""A NaN loss that did not stick (detect/nan_passed.py) and healthy-trap judgements of session 50:
a benchmark's closing result ends the run, a loss printed at a model version is progress."""
from __future__ import annotations

import llmtriage

HEAD = "***** Running training *****\n  Num examples = 52002\n"


def _records(losses: list[str]) -> str:
    return "".join(f"  0%|          | {i}/13000 [00:{i:02d}<38:00:00, 11.00s/it]{{'loss': {v}, 'reward': 1.5, "
                   f"'learning_rate': 5e-05}}\n" for i, v in enumerate(losses, start=1))


def _errors(text: str) -> list[llmtriage.Finding]:
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_isolated_nan_records_followed_by_finite_losses_are_survived():
    losses = ["0.33", "nan", "0.25", "0.15", "0.23", "0.35", "nan", "0.27", "0.31", "0.26", "0.30", "0.28", "0.22"]
    rep = llmtriage.analyze(HEAD + _records(losses))
    nan = [f for f in rep.findings if f.rule_id == "trainer-loss-nan"]
    assert nan and nan[0].severity == "warning"
    assert nan[0].judgement["context"] == "nan-passed"
    assert not [f for f in rep.findings if f.severity == "error"]


def test_a_question_pasted_after_the_records_is_no_record():
    # the tracker reads `loss = nan` in the pasted question as a record; a comment line is not one
    losses = ["0.33", "nan", "0.25", "0.15", "0.23", "0.35", "0.27", "0.31", "0.26"]
    text = HEAD + _records(losses) + "# some loss = nan, is it rational? (training continues)\n"
    assert not _errors(text)


def test_nan_that_sticks_stays_an_error():
    losses = ["0.33", "0.30", "0.29", "0.27", "nan", "nan", "nan", "nan", "nan", "nan", "nan"]
    assert [f.category for f in _errors(HEAD + _records(losses))][:1] == ["nan-loss"]


def test_nan_followed_by_a_blown_up_loss_stays_an_error():
    # finite again after the NaN, but at ten times the level before it: the weights were damaged
    losses = ["0.33", "0.30", "0.29", "nan", "3.1", "2.9", "3.4", "3.3", "3.0", "3.2"]
    assert [f.category for f in _errors(HEAD + _records(losses))][:1] == ["nan-loss"]


BENCH = ("Model: ResNet50\nBatch size: 32\nNumber of GPUs: 16\nRunning warmup...\nRunning benchmark...\n"
         + "".join(f"Iter #{i}: 245.{i % 10} img/sec per GPU\n" for i in range(0, 1000, 50))
         + "Img/sec per GPU: 246.8 +-3.9\n")
ABORT = ("[07:38:51] src/van.cc:361: Check failed: (recv_bytes) > (0)  zmq_msg_recv: Socket operation on non-socket\n"
         "terminate called after throwing an instance of 'dmlc::Error'\n"
         "  what():  [07:38:51] src/van.cc:361: Check failed: (recv_bytes) > (0)  zmq_msg_recv: Socket operation on non-socket\n"
         "Aborted (core dumped)\n")


def test_abort_after_a_benchmark_printed_its_total_is_exit_teardown():
    assert not _errors(BENCH + "Total img/sec on 16 GPU(s): 3948.8 +-62.4\n" + ABORT)


def test_abort_before_the_benchmark_total_is_the_crash():
    assert [f.category for f in _errors(BENCH + ABORT)][:1] == ["native-crash"]


POD = ("$ kubectl get pods -l job-name=edl\nNAME           READY   STATUS    RESTARTS      AGE\n"
       "edl-worker-1   1/1     Running   1 (41m ago)   3h12m\n"
       "$ kubectl describe pod edl-worker-1 | grep -A4 \"Last State\"\n"
       "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n"
       "$ kubectl logs edl-worker-1\n"
       "[2019-12-16 11:44:20,101] [INFO] [worker.py:112:__init__] Starting worker 1 (relaunched by master after OOMKilled, relaunch count 1)\n")


def test_relaunched_worker_training_on_at_later_model_versions_survived_the_oom_kill():
    text = POD + "".join(f"[2019-12-16 12:{i:02d}:10,883] [INFO] [worker.py:688:_process_minibatch] Loss is 1.8{i} at model "
                         f"version {4400 + 200 * i}\n" for i in range(1, 5))
    assert not _errors(text)


def test_relaunched_worker_with_no_progress_keeps_the_oom_kill():
    assert [f.category for f in _errors(POD)][:1] == ["host-oom"]
