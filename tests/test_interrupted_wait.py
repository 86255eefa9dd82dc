"""detect/interrupted_wait.py: a job the user stopped with Ctrl-C while it waited, with no error of its own."""
from __future__ import annotations

from llmtriage import analyze

_HUB_STACK = """\
Loading model from Qwen/Qwen2.5-7B-Instruct ...
^CTraceback (most recent call last):
  File "/home/u/sft/train.py", line 41, in <module>
    tok = AutoTokenizer.from_pretrained(args.model)
  File "/opt/venv/lib/python3.11/site-packages/transformers/utils/hub.py", line 424, in cached_files
    hf_hub_download(
  File "/opt/venv/lib/python3.11/site-packages/huggingface_hub/file_download.py", line 1010, in hf_hub_download
    return _hf_hub_download_to_cache_dir(
  File "/opt/venv/lib/python3.11/site-packages/requests/sessions.py", line 703, in send
    r = adapter.send(request, **kwargs)
  File "/opt/venv/lib/python3.11/site-packages/urllib3/connection.py", line 198, in _new_conn
    sock = connection.create_connection(
  File "/usr/lib/python3.11/socket.py", line 836, in create_connection
    sock.connect(sa)
KeyboardInterrupt
"""

_LOCAL_STACK = """\
step 12/400 loss 1.93
^CTraceback (most recent call last):
  File "/home/u/sft/train.py", line 88, in <module>
    loss.backward()
  File "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", line 581, in backward
    torch.autograd.backward(
KeyboardInterrupt
"""

_SHM = """\
$ df -h /dev/shm
Filesystem      Size  Used Avail Use% Mounted on
shm              64M     0   64M   0% /dev/shm
$ torchrun --nproc_per_node 2 train.py
Epoch 0:   0%|          | 0/800 [00:00<?, ?it/s]
^C
[rank: 0] Received SIGINT, terminating...
"""


def _errors(text):
    return [f for f in analyze(text).findings if f.severity == "error"]


def test_interrupt_inside_a_hub_clients_socket_connect_is_a_hub_hang():
    errors = _errors(_HUB_STACK)
    assert errors[0].rule_id == "verdict-interrupted-in-hub-request" and errors[0].category == "hub-unreachable"
    assert errors[0].action == "fix"
    assert "huggingface_hub" in errors[0].captures["client"]


def test_interrupt_in_the_users_own_compute_is_no_hub_hang():
    assert _errors(_LOCAL_STACK) == []


def test_interrupt_before_the_first_step_with_a_tiny_dev_shm_is_an_shm_stall():
    errors = _errors(_SHM)
    assert errors[0].rule_id == "verdict-stalled-first-step-small-shm" and errors[0].category == "shm-exhausted"


def test_a_loop_that_advanced_before_the_interrupt_is_no_shm_stall():
    log = _SHM.replace("^C\n", "Epoch 0:   1%|          | 8/800 [00:41<1:07:12,  5.09s/it]\n^C\n")
    assert _errors(log) == []


def test_a_large_dev_shm_explains_nothing():
    assert _errors(_SHM.replace("64M     0   64M", " 16G     0   16G")) == []


def test_no_interrupt_is_no_stall():
    assert _errors(_SHM.replace("^C\n[rank: 0] Received SIGINT, terminating...\n", "")) == []


def test_interrupt_while_a_download_reads_is_no_hub_hang():
    # the response was arriving (a slow download the user gave up on), not a connection never answered
    log = _HUB_STACK.replace('  File "/usr/lib/python3.11/socket.py", line 836, in create_connection\n    sock.connect(sa)\n',
                             '  File "/usr/lib/python3.11/ssl.py", line 1134, in read\n    return self._sslobj.read(len, buffer)\n')
    assert _errors(log) == []


_COLLECTIVE = """\
W0612 08:01:02.511000 77120 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1
[rank0]: 2025-06-12 08:01:41,611 INFO Training: 3 epochs, 1250 steps
^CW0612 08:19:55.004000 77120 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGINT death signal, shutting down workers
[rank0]: Traceback (most recent call last):
[rank0]:   File "/home/ml/ft/finetune.py", line 187, in main
[rank0]:     loss.backward()
[rank0]:   File "/opt/conda/lib/python3.11/site-packages/torch/nn/parallel/distributed.py", line 1401, in _delay_all_reduce
[rank0]:     self.reducer._rebuild_buckets()
[rank0]: KeyboardInterrupt
Traceback (most recent call last):
  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 84, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 77120 got signal: 2
"""


def test_interrupt_inside_a_collective_before_any_step_is_a_collective_hang():
    errors = _errors(_COLLECTIVE)
    assert errors[0].rule_id == "verdict-interrupted-in-collective" and errors[0].category == "nccl-timeout"
    assert errors[0].action == "fix" and errors[0].captures["gap"] == "18"


def test_torchrun_sigint_alone_is_an_interrupt_not_a_failure():
    # the launcher's SignalException for signal 2 is the user's Ctrl-C relayed, like a KeyboardInterrupt
    assert _errors(_COLLECTIVE.replace("distributed.py", "autograd/graph.py")) == []


def test_interrupt_seconds_after_the_last_line_is_a_user_stop():
    assert _errors(_COLLECTIVE.replace("^CW0612 08:19:55", "^CW0612 08:01:52")) == []


def test_interrupt_after_logged_steps_is_a_user_stop():
    log = _COLLECTIVE.replace("1250 steps\n", "1250 steps\n[rank0]: 2025-06-12 08:02:30,118 INFO step 10/1250 loss 1.9214\n")
    assert _errors(log) == []


def test_step_bar_at_zero_with_gpus_pinned_then_interrupt_is_a_collective_stall():
    log = ("$ torchrun --nproc_per_node 8 sft.py\n"
           "Train:   0%|          | 0/94 [00:00<?, ?it/s]\n"
           "index, utilization.gpu [%], memory.used [MiB]\n0, 100 %, 9876 MiB\n1, 100 %, 9812 MiB\n"
           "^CW0815 11:16:42.118000 2204 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGINT death signal\n"
           "torch.distributed.elastic.multiprocessing.api.SignalException: Process 2204 got signal: 2\n")
    errors = _errors(log)
    assert errors[0].rule_id == "verdict-stalled-first-step-gpus-pinned" and errors[0].action == "fix"
    assert _errors(log.replace("100 %", "3 %")) == []


_PINNED = """\
$ srun torchrun --nnodes 4 --nproc_per_node 8 megatron_gpt_pretraining.py
Epoch 0: :   0%|          | 196/300000 [03:51<90:15:28, reduced_train_loss=7.048, global_step=195.0]
Epoch 0: :   0%|          | 197/300000 [03:52<90:15:28, reduced_train_loss=7.043, global_step=196.0]
$ srun --jobid=812442 --overlap -w dgx-h100-01 nvidia-smi --query-gpu=index,utilization.gpu,power.draw,memory.used --format=csv
index, utilization.gpu [%], power.draw [W], memory.used [MiB]
0, 100 %, 117.12 W, 61218 MiB
1, 100 %, 103.10 W, 61529 MiB
$ scancel 812442
slurmstepd: error: *** JOB 812442 ON dgx-h100-01 CANCELLED AT 2024-05-21T10:53:07 ***
"""


def test_a_cancel_after_progress_stopped_with_gpus_pinned_is_a_collective_hang():
    errors = _errors(_PINNED)
    assert errors[0].rule_id == "verdict-stopped-while-gpus-pinned" and errors[0].category == "nccl-timeout"
    assert errors[0].action == "fix"


def test_a_cancel_with_gpus_idle_or_a_time_limit_stays_a_scheduler_kill():
    assert _errors(_PINNED.replace("100 %", "0 %"))[0].category == "scheduler-kill"
    limit = _PINNED.replace("CANCELLED AT 2024-05-21T10:53:07 ***", "CANCELLED AT 2024-05-21T10:53:07 DUE TO TIME LIMIT ***")
    assert _errors(limit)[0].category == "scheduler-kill"
