"""Log forms from zh_CN machines and shared clusters: full-width punctuation folded before matching, bytes paths
in OSErrors, and next actions decided from launch evidence (a launch that names no port, a rendezvous store
that rejected the launcher or belonged to another job, a hub that never answered shown by source context)."""
from __future__ import annotations

import llmtriage
from llmtriage.engine.logparse import fold_fullwidth, match_view


def report(text: str) -> llmtriage.Report:
    return llmtriage.analyze(text)


def action(text: str) -> tuple[str, str]:
    rep = report(text)
    return rep.extra["action"], rep.extra["action_reason"]


def top(text: str) -> tuple[str, str]:
    f = report(text).findings[0]
    return f.rule_id, f.category


# ----------------------------------------------------------------- full-width forms

def test_fold_fullwidth_maps_punctuation_letters_and_the_ideographic_space():
    raw = "第 41 行： 2183377 已杀死　段错误（核心已转储）ＡＢｚ～".encode()
    assert fold_fullwidth(raw).decode() == "第 41 行: 2183377 已杀死 段错误(核心已转储)ABz~"
    assert fold_fullwidth(b"plain ascii: nothing to do") == b"plain ascii: nothing to do"


def test_match_view_keeps_newlines_and_equal_lengths_of_lines_and_view():
    raw = "a：b\r\nc（d）\n".encode()
    lines, view = match_view(raw)
    assert lines.count(b"\n") == raw.count(b"\n") and len(lines) == len(view)


def test_zh_bash_kill_with_a_fullwidth_colon_after_a_bar_is_host_oom():
    log = (" 12%|█▏        | 88/720 [10:01<1:12:00,  6.84s/it]run.sh: 第 9 行： 51234 已杀死"
           "               torchrun --nproc_per_node 4 sft.py\n")
    rep = report(log)
    assert (rep.findings[0].rule_id, rep.findings[0].category) == ("process-sigkilled", "host-oom")
    assert rep.findings[0].captures.get("pid") == "51234"


def test_zh_segfault_words_are_a_death():
    rep = report("Epoch: 1 Learning rate: 1.000\n段错误 (核心已转储)\n")
    assert rep.extra["status"] == "crashed"


# ----------------------------------------------------------------- bytes paths

def test_bytes_path_of_a_lost_mount_is_a_storage_error():
    log = "OSError: [Errno 107] Transport endpoint is not connected: b'/mnt/juicefs/runs/a/events.out.tfevents.1.h'\n"
    rep = report(log)
    assert rep.findings[0].rule_id == "storage-io-error"
    assert rep.findings[0].captures.get("path") == "/mnt/juicefs/runs/a/events.out.tfevents.1.h"


def test_bytes_path_of_a_full_disk_is_captured():
    rep = report("OSError: [Errno 28] No space left on device: b'/data/run/events.out.tfevents.9'\n")
    assert rep.findings[0].category == "disk-full"
    assert rep.findings[0].captures.get("path") == "/data/run/events.out.tfevents.9"


# ----------------------------------------------------------------- port named by omission

LAUNCH_FAIL = ("Traceback (most recent call last):\n"
               '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/'
               'static_tcp_rendezvous.py", line 55, in next_rendezvous\n'
               "    multi_tenant=True,\n"
               "RuntimeError: Address already in use\n")


def test_a_launch_without_a_port_whose_bind_fails_before_progress_is_fix():
    act, reason = action("(env) u@srv:~/proj$ torchrun --nproc_per_node=2 train.py --bf16\n" + LAUNCH_FAIL)
    assert act == "fix" and "names no port" in reason


# A port the user fixed that is already taken before any progress is held by a leftover process or another job:
# the same command binds it again (actions.yaml `fixed-port-held-at-launch`; session 32 reversed the earlier
# "explicit port stays retry" from an unseen log whose rerun failed the same way); under Slurm it stays retry.

def test_a_launch_with_its_own_port_held_before_progress_is_fix():
    log = "(env) u@srv:~/proj$ torchrun --nproc_per_node=2 --master_port 29611 train.py\n" + LAUNCH_FAIL
    act, reason = action(log)
    assert act == "fix" and "leftover process" in reason


def test_an_exported_master_port_held_before_progress_is_fix():
    log = "+ export MASTER_PORT=29733\n+ python -m torch.distributed.launch --nproc_per_node=2 train.py\n" + LAUNCH_FAIL
    assert action(log)[0] == "fix"


def test_an_explicit_port_clash_after_progress_stays_retry():
    log = ("(env) u@srv:~/proj$ torchrun --nproc_per_node=2 --master_port 29611 train.py\n"
           + "".join(f"{{'loss': {2.0 - i / 10:.2f}, 'learning_rate': 1e-05, 'epoch': {i / 10:.1f}}}\n" for i in range(1, 8))
           + LAUNCH_FAIL)
    assert action(log)[0] == "retry"


# ----------------------------------------------------------------- rendezvous evidence

RDZV_RESET = ("Traceback (most recent call last):\n"
              '  File "/usr/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",'
              " line 156, in _create_tcp_store\n"
              "    store = TCPStore(\n"
              "torch.distributed.DistNetworkError: Connection reset by peer\n"
              "\nThe above exception was the direct cause of the following exception:\n\n"
              "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
              "has failed. See inner exception for details.\n")


def test_a_rendezvous_reset_while_the_launcher_sets_up_is_fix():
    act, reason = action("+ torchrun --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=head:29400 train.py\n" + RDZV_RESET)
    assert act == "fix" and "rendezvous" in reason


def test_a_peer_reset_after_training_progress_stays_retry():
    steps = "".join(f"{{'loss': {2.0 - i / 50:.3f}, 'learning_rate': 1e-05, 'epoch': {i / 10:.1f}}}\n" for i in range(1, 9))
    log = steps + "[rank1]: torch.distributed.DistNetworkError: Connection reset by peer\n"
    assert action(log)[0] == "retry"


def test_a_local_rendezvous_store_refused_mid_run_belonged_to_another_job():
    log = ("2024-01-02 10:00:00 INFO Epoch 1 TRAIN Batch 1/200 loss 0.24\n"
           "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29400 "
           "(errno: 111 - Connection refused).\n"
           "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
           "has failed. See inner exception for details.\n")
    act, reason = action(log)
    assert act == "fix" and "another job" in reason


# ----------------------------------------------------------------- hub never reached

def test_connection_aborted_in_ipython_source_context_is_no_transient_sign():
    log = ("File ~/env/lib/python3.10/site-packages/urllib3/connectionpool.py:841, in HTTPConnectionPool.urlopen(self)\n"
           '    839     new_e = ProtocolError("Connection aborted.", new_e)\n'
           "--> 841 retries = retries.increment(\n"
           "MaxRetryError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded with url: "
           "/bert-base-uncased/resolve/main/config.json (Caused by NewConnectionError('<urllib3.connection."
           "HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno 101] Network is unreachable'))\n"
           "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached "
           "files and it looks like bert-base-uncased is not the path to a directory containing a file named config.json.\n")
    assert action(log)[0] == "fix"


def test_a_real_connection_aborted_keeps_the_hub_failure_transient():
    log = ("requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote end closed "
           "connection without response'))\n"
           "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached "
           "files and it looks like bert-base-uncased is not the path to a directory containing a file named config.json.\n")
    assert action(log)[0] == "retry"
