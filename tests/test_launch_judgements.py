"""Distributed launch judgements: two nodes' outputs pasted one after the other are no rerun (detect/rerun.py
`node_identity`), a MASTER_PORT in the ephemeral range (actions.yaml `master-port-in-ephemeral-range`), a rank that
ran out of data before the others' collective timed out (detect/rank_left.py), an HCCL link that waited for a late
rank (detect/hccl_skew.py) and a serving engine interrupted while its tensor-parallel workers initialised
(detect/interrupted_wait.py `tp_workers`)."""
from __future__ import annotations

import llmtriage

TORCHRUN = "+ torchrun --rdzv_backend c10d --rdzv_endpoint 10.1.0.1:29500 --nnodes 2 --node_rank {n} --nproc_per_node 8 train.py\n"
CONNECT = (
    "[E114 10:22:12.583101274 socket.cpp:957] [c10d] The client socket has timed out after 60s while trying to connect to (10.1.0.1, 29500).\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 159, in _create_tcp_store\n'
    "    store = TCPStore(\n"
    "torch.distributed.DistNetworkError: The client socket has timed out after 60s while trying to connect to (10.1.0.1, 29500).\n"
)
RDZV_TIMEOUT = (
    "W0114 10:36:12.840000 139874102560576 torch/distributed/elastic/agent/server/api.py:553] The node 'a100-0_2418_0' has failed to join the rendezvous 'none' within 900 seconds.\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", line 667, in run\n'
    "    raise RendezvousTimeoutError\n"
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
)


def _top(text: str):
    return next(f for f in llmtriage.analyze(text).findings if f.severity == "error")


def test_two_nodes_pasted_in_turn_are_no_rerun():
    """Node 1 cannot reach the store; node 0's own timeout is what that caused: the connect failure leads."""
    top = _top("==> node1.out <==\n" + TORCHRUN.format(n=1) + CONNECT + "\n==> node0.out <==\n" + TORCHRUN.format(n=0) + RDZV_TIMEOUT)
    assert top.rule_id == "c10d-store-connect-timeout" and top.judgement is None


def test_the_same_node_launched_again_is_a_rerun():
    top = _top(TORCHRUN.format(n=1) + CONNECT + TORCHRUN.format(n=1) + RDZV_TIMEOUT)
    assert top.category == "nccl-timeout"


BIND = (
    "Traceback (most recent call last):\n"
    '  File "/opt/NeMo/examples/train.py", line 43, in main\n'
    "    torch.distributed.init_process_group('nccl')\n"
    '  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/rendezvous.py", line 278, in _env_rendezvous_handler\n'
    "    store = _create_c10d_store(\n"
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
    "port: {port}, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n"
)


def test_master_port_in_the_ephemeral_range_is_fixed():
    top = _top("+ srun python train.py\n" + BIND.format(port=57062))
    assert top.category == "port-in-use" and top.action == "fix" and "ephemeral" in top.action_reason


def test_a_port_below_the_ephemeral_range_is_no_such_clash():
    top = _top("+ srun python train.py\n" + BIND.format(port=23456))
    assert top.category == "port-in-use" and "ephemeral" not in top.action_reason


def _watchdog(rank: int) -> str:
    return (f"[rank{rank}]:[E1119 09:21:54.118230918 ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=19, OpType=ALLREDUCE, NumelIn=124439808, NumelOut=124439808, Timeout(ms)=1800000) "
            "ran for 1800093 milliseconds before timing out.\n")


def _steps() -> str:
    return "".join(f"[rank{r}] epoch 0 batch {b} loss {3.9 - b * 0.05:.4f}\n" for b in range(6) for r in range(4))


def test_a_rank_out_of_data_before_the_timeout_is_fixed():
    top = _top(_steps() + "[rank3] epoch 0 finished after 6 batches, running validation\n"
               + "".join(_watchdog(r) for r in (0, 1, 2)))
    assert top.category == "nccl-timeout" and top.action == "fix" and "numbers of batches" in top.action_reason


def test_a_waiting_rank_that_reported_its_epoch_is_no_leaver():
    """The rank that printed the end of its epoch is itself among the waiting ranks: nothing left early."""
    top = _top(_steps() + "[rank2] epoch 0 finished after 6 batches, running validation\n"
               + "".join(_watchdog(r) for r in (0, 1, 2, 3)))
    assert top.category == "nccl-timeout" and "numbers of batches" not in top.action_reason


def _hccl(late_s: int) -> str:
    late = f"2023-06-08-15:{11 + late_s // 60:02d}:{40 + late_s % 60 - (60 if 40 + late_s % 60 >= 60 else 0):02d}"
    return (
        "[WARNING] PRE_ACT(2931541,ffff3f7fe1e0,python):2023-06-08-15:11:40.318.224 [mindspore/ccsrc/backend/common/pass/communication_op_fusion.cc:198] GetAllReduceSplitSegment] Split threshold is 0.\n"
        f"[WARNING] PRE_ACT(1183307,ffff9f7fe1e0,python):{late}.220.617 [mindspore/ccsrc/backend/common/pass/communication_op_fusion.cc:198] GetAllReduceSplitSegment] Split threshold is 0.\n"
        "[ERROR] HCCL(2931541,python):2023-06-08-15:14:27.891.006 [hccl_socket_manager.cc:816] [2931600][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[3] timeout[120 s]\n"
    )


def test_a_link_that_waited_for_a_late_rank_is_a_timeout():
    top = _top(_hccl(318))
    assert top.rule_id == "hccl-socket-link-establish-timeout" and top.category == "nccl-timeout"
    assert top.action == "fix" and "HCCL_CONNECT_TIMEOUT" in top.action_reason


def test_ranks_that_arrived_together_leave_the_link_error():
    top = _top(_hccl(20))
    assert top.rule_id == "hccl-socket-link-establish-timeout" and top.category == "nccl-error"


VLLM = (
    "(venv) user@box:~/vllm$ python3 -m vllm.entrypoints.openai.api_server --model m --tensor-parallel-size {tp}\n"
    "2023-11-27 12:46:36,779\tINFO worker.py:1673 -- Started a local Ray instance.\n"
    "^CTraceback (most recent call last):\n"
    '  File "/home/user/vllm/vllm/engine/llm_engine.py", line 108, in __init__\n'
    "    self._init_workers_ray(placement_group)\n"
    '  File "/home/user/vllm/vllm/engine/llm_engine.py", line 195, in _init_workers_ray\n'
    "    self._run_workers(\n"
    '  File "/home/user/vllm/vllm/engine/llm_engine.py", line 732, in _run_workers_in_batch\n'
    "    all_outputs = ray.get(all_outputs)\n"
    '  File "/home/user/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 2547, in get\n'
    "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)\n"
    '  File "python/ray/_raylet.pyx", line 401, in ray._raylet.check_status\n'
    "KeyboardInterrupt\n"
    "2023-11-27 13:18:02,515\tERROR worker.py:405 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
    "The worker died unexpectedly while executing this task.\n"
)


def test_tensor_parallel_workers_that_never_initialised_are_a_failure():
    top = _top(VLLM.format(tp=2))
    assert top.rule_id == "verdict-interrupted-waiting-tp-workers" and top.action == "fix"


def test_one_gpu_interrupted_is_a_user_stop():
    errors = [f for f in llmtriage.analyze(VLLM.format(tp=1)).findings
              if f.severity == "error" and f.rule_id == "verdict-interrupted-waiting-tp-workers"]
    assert not errors


def _steps_then(tail: str) -> str:
    return ("".join(f"[1,0]<stdout>:NCCL INFO step {s}, loss = {3.0 - s / 1e4:.4f}, 1830.2 samples/sec\n" for s in range(100, 1100, 100))
            + "[1,0]<stdout>:node-a:31407:31571 [0] NCCL INFO comm 0x7f3b2c001e40 rank 0 nranks 8 - Init COMPLETE\n" + tail)


def test_user_stop_after_gpus_pinned_without_progress_is_a_collective_hang():
    top = _top(_steps_then("$ nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv\n"
                           "index, utilization.gpu [%], memory.used [MiB]\n0, 100 %, 14876 MiB\n1, 100 %, 14876 MiB\n"
                           "^C[node-a:31398] mpirun: Forwarding signal 2 to job\n"))
    assert top.rule_id == "verdict-stopped-while-gpus-pinned" and top.category == "nccl-timeout"


def test_user_stop_with_idle_gpus_is_no_hang():
    rep = llmtriage.analyze(_steps_then("$ nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv\n"
                                        "index, utilization.gpu [%], memory.used [MiB]\n0, 3 %, 14876 MiB\n"
                                        "^C[node-a:31398] mpirun: Forwarding signal 2 to job\n"))
    assert not any(f.rule_id == "verdict-stopped-while-gpus-pinned" for f in rep.findings)


def _bind(port: int, before: str = "") -> str:
    return (before + f"[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:{port} (errno: 98 - Address already in use).\n"
            f"[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:{port} (errno: 98 - Address already in use).\n"
            "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.\n"
            "Traceback (most recent call last):\n"
            '  File "/srv/app.py", line 34, in <module>\n'
            "    deepspeed.init_distributed()\n"
            "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed "
            f"to bind to [::]:{port} (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:{port} "
            "(errno: 98 - Address already in use).\n")


def test_debug_reloader_binding_the_port_twice_is_fixed():
    top = _top(_bind(10086, " * Serving Flask app 'app'\n * Debug mode: on\n * Restarting with stat\n"))
    assert top.category == "port-in-use" and top.action == "fix" and "reloader" in top.action_reason


def test_torchrun_default_rendezvous_port_is_a_fixed_default():
    top = _top(_bind(29400))
    assert top.category == "port-in-use" and top.action == "fix" and "29400" in top.action_reason
