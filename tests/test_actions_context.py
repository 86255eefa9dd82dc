"""Actions decided from the log's context: a hub that never answered vs a flaky one, launchers racing for one port."""
from __future__ import annotations

import llmtriage

COULDNT_CONNECT = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.10/site-packages/transformers/utils/hub.py", line 409, in cached_file\n'
    "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files "
    "and it looks like bert-base-uncased is not the path to a directory containing a file named config.json.\n"
)
CONNECT_TIMEOUT = (
    "urllib3.exceptions.ConnectTimeoutError: (<urllib3.connection.HTTPSConnection object at 0x7f2>, "
    "'Connection to huggingface.co timed out. (connect timeout=10)')\n"
)
PORT_RACE = (
    "RuntimeError: The server socket has failed to listen on any local network address. port: 12355, useIpv6: 0, "
    "code: -98, name: EADDRINUSE, message: address already in use\n"
)


def action(text: str) -> tuple[str, str]:
    rep = llmtriage.analyze(text)
    return rep.extra["action"], rep.extra["action_reason"]


def test_a_hub_that_never_answered_is_fix():
    act, reason = action(CONNECT_TIMEOUT + COULDNT_CONNECT)
    assert act == "fix" and "HF_ENDPOINT" in reason


def test_signs_of_a_reachable_but_flaky_hub_stay_retry():
    # a read timeout (the hub accepted the connection), a 5xx, or files downloaded earlier in the same run
    read = ("requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', port=443): "
            "Read timed out. (read timeout=10)\n")
    assert action(read + COULDNT_CONNECT)[0] == "retry"
    server = "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: https://huggingface.co/api/models/x\n"
    assert action(server + COULDNT_CONNECT)[0] == "retry"
    earlier = "model-00001-of-00002.safetensors: 100%|██████████| 4.97G/4.97G [01:02<00:00, 79.6MB/s]\n"
    assert action(earlier + COULDNT_CONNECT)[0] == "retry"


def test_a_mirror_that_never_answered_is_left_to_the_default():
    mirror = "export HF_ENDPOINT=https://hf-mirror.com\n"
    failed = COULDNT_CONNECT.replace("https://huggingface.co", "https://hf-mirror.com")
    assert action(mirror + failed)[0] == "retry"


def test_launchers_of_several_slurm_tasks_racing_for_master_port_is_fix():
    sbatch = "#SBATCH --ntasks-per-node=4\n+ srun bash -c 'torchrun --nproc_per_node 4 --master_port 12355 train.py'\n"
    act, reason = action(sbatch + PORT_RACE * 3)
    assert act == "fix" and "--ntasks-per-node=1" in reason
    # srun reporting several tasks of one node failing together says the same without the sbatch header
    tasks = "+ srun torchrun --nnodes 2 --master_port 12355 train.py\nsrun: error: gpu-a01: tasks 1-3: Exited with exit code 1\n"
    assert action(tasks + PORT_RACE)[0] == "fix"


def test_one_port_clash_under_slurm_stays_retry():
    # one launcher per node (the intended set-up) colliding once with a port a finished job still holds
    one = "#SBATCH --ntasks-per-node=1\n+ srun torchrun --nnodes 2 --master_port 12355 train.py\n"
    assert action(one + PORT_RACE)[0] == "retry"
    # several tasks per node but no per-task launcher: srun starts the ranks itself, one binds the port
    direct = "#SBATCH --ntasks-per-node=8\n+ srun python train.py\n"
    assert action(direct + PORT_RACE)[0] == "retry"


def test_device_plugin_missing_a_torch_symbol_is_a_version_pairing():
    npu = ("ImportError: /usr/local/lib/python3.9/site-packages/torch_npu/lib/libtorch_npu.so: "
           "undefined symbol: _ZN5torch10ValueErrorC1EPKcz\n")
    top = [f for f in llmtriage.analyze(npu).findings if f.severity == "error"][0]
    assert (top.rule_id, top.category) == ("torch-device-plugin-undefined-torch-symbol", "dependency-mismatch")
    # the same plugin missing a symbol of its vendor SDK stays with the CUDA/SDK build rule
    atb = npu.replace("_ZN5torch10ValueErrorC1EPKcz", "MsprofSysCycleTime")
    assert [f for f in llmtriage.analyze(atb).findings if f.severity == "error"][0].category == "cuda-version-mismatch"


def test_a_ray_actor_temporarily_unavailable_is_retry_but_a_dead_actor_is_not():
    unavailable = (
        "Traceback (most recent call last):\n"
        '  File "/root/slime/slime/ray/rollout.py", line 71, in init\n'
        "    ray.get(init_handles)\n"
        "ray.exceptions.ActorUnavailableError: The actor 3c0a94e2b1f75d6e0c19e88f02000000 is unavailable: The actor is "
        "temporarily unavailable: RpcError: RPC Error message: Socket closed; RPC Error details: . The task may or may "
        "not have been executed on the actor.\n"
    )
    act, reason = action(unavailable)
    assert act == "retry" and "temporarily unavailable" in reason
    died = (
        "Traceback (most recent call last):\n"
        '  File "/root/slime/slime/ray/rollout.py", line 71, in init\n'
        "    ray.get(init_handles)\n"
        "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
        "ray::SGLangEngine.__init__() (pid=61840, ip=10.20.0.5)\n"
    )
    assert action(died)[0] != "retry" or "temporarily unavailable" not in action(died)[1]


ZMQ_BIND = ("Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/zmq/sugar/socket.py", line 311, in bind\n'
            "    super().bind(addr)\n"
            "zmq.error.ZMQError: Address already in use (addr='tcp://*:5559')\n")


def test_a_fixed_zmq_endpoint_bound_by_every_tp_rank_is_fix():
    server = 'INFO dynamo.sglang.main: Starting prefill worker: model=/models/m tp=2 kv_events_config={"endpoint": "tcp://*:5559"}\n'
    act, reason = action(server + ZMQ_BIND)
    assert act == "fix" and "rank" in reason
    assert action("vllm serve /models/m --tensor-parallel-size 4\n" + ZMQ_BIND)[0] == "fix"


def test_a_zmq_bind_clash_without_tp_ranks_stays_retry():
    # one process, one bind: a leftover server from an earlier run held the port
    assert action("INFO Starting worker: model=/models/m tp=1\n" + ZMQ_BIND)[0] == "retry"


ONECCL_NO_PROVIDER = (
    "2025:06:02-11:40:13:(77120) |CCL_ERROR| atl_ofi_helper.cpp:1635 atl_ofi_open_nw_provs: can not open network providers\n"
    "2025:06:02-11:40:13:(77120) |CCL_ERROR| atl_ofi.cpp:237 init: can't find suitable provider\n"
)
ONECCL_TRANSFER_FAILED = (
    "[rank0] step 400 loss 3.2011\n"
    "2025:04:09-14:02:51:(55310) |CCL_ERROR| atl_ofi.cpp:1391 wait: atl_status: FAILURE\n"
)


def test_oneccl_without_a_usable_provider_is_fix_and_a_failed_transfer_stays_retry():
    # no libfabric provider could be opened at start-up: the transport set-up, which a rerun meets again
    act, reason = action(ONECCL_NO_PROVIDER)
    assert act == "fix" and "FI_PROVIDER" in reason
    # a transfer failing after training started: a dead peer or a link, the category's retry
    assert action(ONECCL_TRANSFER_FAILED)[0] == "retry"


_NCCL_REFUSED = (
    "node161:1187:1248 [0] NCCL INFO NET/Socket : Using [0]bond0:192.168.1.161<0> {bridge}\n"
    "node161:1187:1248 [0] NCCL INFO Using network Socket\n"
    "{progress}"
    "node161:1187:1251 [0] misc/socket.cc:456 NCCL WARN Net : Connect to 172.19.0.1<48013> failed : Connection refused\n"
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, "
    "NCCL version 2.12.12\n")


def test_a_refused_nccl_connection_over_a_container_bridge_before_any_step_is_fix():
    """NCCL lists a docker network's br-<id> among its socket interfaces and a connection is refused before any
    step: the wrong interface (NCCL_SOCKET_IFNAME), not a peer slow to listen; mid-run, or with no bridge, retry."""
    bridge = "[1]br-05ab815fa14e:172.19.0.1<0> [2]veth1a2b3c4:fe80::1%veth1a2b3c4<0>"
    act, reason = action(_NCCL_REFUSED.format(bridge=bridge, progress=""))
    assert act == "fix" and "NCCL_SOCKET_IFNAME" in reason and "bridge" in reason
    steps = "".join(f"{{'loss': 2.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n" for i in range(1, 6))
    assert "bridge" not in action(_NCCL_REFUSED.format(bridge=bridge, progress=steps))[1]
    assert "bridge" not in action(_NCCL_REFUSED.format(bridge="[1]ib0:10.0.0.161<0>", progress=""))[1]


def test_a_watchdog_stack_trace_through_a_save_is_a_collective_timeout_in_a_save():
    """torch 2.6+ prints the timed-out collective's Python stack under the watchdog line ("#8 save_final from
    .../checkpoint.py:141"): the hang is in the save, which the next save repeats."""
    text = ("[rank9]:[E607 23:46:59.257715643 ProcessGroupNCCL.cpp:689] [Rank 9] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=190346, OpType=_ALLGATHER_BASE, NumelIn=19447808, NumelOut=311164928, "
            "Timeout(ms)=600000) ran for 600050 milliseconds before timing out.\n"
            "[rank9]:[E607 23:46:59.259637513 ProcessGroupNCCL.cpp:733] Stack trace of the failed collective: \n"
            "#0 all_gather_into_tensor from /env/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py:4186\n"
            "#5 unshard from /env/lib/python3.12/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py:276\n"
            "{frame} from /work/src/checkpoint.py:141\n")
    act, reason = action(text.format(frame="#8 save_final"))
    assert act == "fix" and "save" in reason
    assert action(text.format(frame="#8 train_step"))[0] == "retry"


def test_a_registry_name_that_never_resolved_is_fixed_not_retried():
    """ollama's pull that cannot resolve the registry's host name (DNS or the server's proxy settings) fails the
    same way on every rerun; one cut off mid-download (EOF after layers came) is transient."""
    dns = ('Error: pull model manifest: Get "https://registry.ollama.ai/v2/library/qwen/manifests/0.5b": '
           "dial tcp: lookup registry.ollama.ai: i/o timeout\n")
    got, why = action(dns)
    assert got == "fix" and "HTTPS_PROXY" in why
    assert action(dns.replace("i/o timeout", "no such host"))[0] == "fix"
    eof = "pulling 8934d96d3f08...  45% ▕████        ▏ 1.7 GB/3.8 GB\nError: max retries exceeded: unexpected EOF\n"
    assert action(eof)[0] == "retry"


STALE = "[rank3]: OSError: [Errno 116] Stale file handle\n"


def test_a_stale_handle_in_a_kernel_compile_cache_is_fix():
    # several nodes compiling Triton kernels into one cache directory on a shared mount race there on every cold start
    frame = ('[rank3]:   File "/opt/app-root/lib64/python3.12/site-packages/triton/runtime/cache.py", line 70, '
             "in get_group\n")
    act, reason = action("[rank3]: Traceback (most recent call last):\n" + frame + STALE)
    assert act == "fix" and "TRITON_CACHE_DIR" in reason
    # a linker failing in a JIT extension build directory named by its cache variable
    jit = ("building batch_prefill in /shared/home/u/.cache/tvm-ffi (TVM_FFI_CACHE_DIR)\n"
           "/usr/bin/ld: final link failed: Stale file handle\ncollect2: error: ld returned 1 exit status\n")
    rep = llmtriage.analyze(jit)
    assert rep.findings[0].category == "filesystem-error" and rep.extra["action"] == "fix"


def test_a_stale_handle_outside_any_cache_stays_transient():
    frame = '  File "/usr/lib/python3/dist-packages/torch/serialization.py", line 652, in save\n'
    assert action("Traceback (most recent call last):\n" + frame + STALE)[0] == "retry"


GID_GONE = ("gpu-node-17:1184:1312 [3] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Invalid "
            "argument, on dev mlx5_3:1, curr state INIT, next state RTR, local GID index 3, local GID ::, "
            "remote GID ::ffff:10.20.3.35\n")


def test_a_roce_gid_that_vanished_after_progress_is_replace_node():
    steps = "".join(f" iteration {i:>8}/  250000 | lm loss: 2.11E+00 |\n" for i in range(41200, 41240, 10))
    act, reason = action(steps + GID_GONE)
    assert act == "replace-node" and "GID" in reason


def test_an_empty_gid_before_any_progress_is_the_configuration():
    # the same wording at start-up: the configured index is wrong on every node, a rerun fails the same way
    assert action(GID_GONE)[0] == "fix"
def test_a_watchdog_stack_trace_under_a_ray_actor_prefix_is_read_too():
    """verl's Megatron workers print the failed collective's stack under Ray's actor prefix; a Megatron
    dist-checkpoint save frame there is the same hang in a save."""
    pre = "(WorkerDict pid=90316, ip=10.8.0.11) "
    text = (pre + "[rank5]:[E627 12:46:40.073434468 ProcessGroupNCCL.cpp:629] [Rank 5] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=29, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            "for 600013 milliseconds before timing out.\n"
            + pre + "[rank5]:[E627 12:46:40.074084476 ProcessGroupNCCL.cpp:664] Stack trace of the failed collective: \n"
            + pre + "#0 all_reduce from /usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py:2806\n"
            + pre + "{frame} from /usr/lib/python3.10/site-packages/megatron/core/dist_checkpointing/serialization.py:404\n")
    act, reason = action(text.format(frame="#5 save"))
    assert act == "fix" and "save" in reason
    assert action(text.format(frame="#5 forward_step"))[0] == "retry"


RDZV = (
    "I0603 14:02:53.702000 1396 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1132] The node "
    "'gpu07_2314461_0' attempts to join the next round of the rendezvous 'none'.\n"
    "Traceback (most recent call last):\n"
    '  File "/env/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", line 660, in run\n'
    "    raise RendezvousTimeoutError\n"
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
)


def test_a_rendezvous_that_never_completed_is_fix():
    """The elastic agent waited its whole rendezvous timeout and too few nodes joined: a node was never launched
    or cannot reach the endpoint, which the same launch repeats. A store client's timeout stays the default."""
    act, reason = action(RDZV)
    assert act == "fix" and "--node_rank" in reason
    store = ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.\n")
    assert action(store)[1] != reason
