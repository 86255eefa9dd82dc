"""Next actions of collective timeouts, port clashes and stale cache handles decided from evidence in the log:
a barrier, start-up host work, a failing socket transport, rank-0-only work, a fixed default port, a shared cache."""
from __future__ import annotations

import llmtriage


def action(text: str) -> tuple[str, str]:
    rep = llmtriage.analyze(text)
    return rep.extra["action"], rep.extra["action_reason"]


def watchdog(op: str = "ALLREDUCE", seq: int = 4812, numel: int = 1048576) -> str:
    line = (f"[rank1]:[E1203 10:41:07.551205033 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, Timeout(ms)=1800000) "
            "ran for 1800102 milliseconds before timing out.\n")
    return (line + "terminate called after throwing an instance of 'c10::DistBackendError'\n"
            "E1203 10:41:09.902000 2210551 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) "
            "local_rank: 1 (pid: 2210611) of binary: /usr/bin/python\n")


TRAINING = "".join(f"{{'loss': {1.5 - i / 100:.4f}, 'grad_norm': 0.91, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}\n"
                   for i in range(1, 8))


def test_mid_run_timeout_after_healthy_steps_stays_retry():
    act, reason = action("+ torchrun --nproc_per_node 8 train.py\n" + TRAINING + watchdog())
    assert act == "retry", reason


def test_a_barrier_that_timed_out_is_fix():
    act, reason = action("+ torchrun --nproc_per_node 8 train.py\n" + TRAINING + watchdog("BARRIER", numel=1))
    assert act == "fix" and "barrier" in reason
    # a gloo barrier of the job's own group, raised through torch.distributed.barrier
    gloo = ("+ python -m sglang.launch_server --tp 16 --nnodes 2 --node-rank 1\n"
            "Traceback (most recent call last):\n"
            '  File "/sgl/python/sglang/srt/distributed/parallel_state.py", line 1024, in barrier\n'
            "    torch.distributed.barrier(group=self.cpu_group)\n"
            '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 4551, in barrier\n'
            "    work.wait()\n"
            "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting "
            "1800000ms for send operation to complete\n")
    assert action(gloo)[0] == "fix"


def test_the_weight_sync_group_barrier_of_an_inference_server_is_not_the_jobs_barrier():
    # vLLM's stateless group (pynccl_comm.group.barrier -> store.get) after hours of GRPO steps: left to the default
    sync = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/site-packages/vllm/distributed/utils.py", line 198, in barrier\n'
            '    self.store.get(f"barrier/{i}")\n'
            "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /barrier/0\n")
    assert action("+ accelerate launch grpo.py\n" + TRAINING + sync)[0] == "retry"


def test_timeout_while_one_rank_tokenizes_at_startup_is_fix():
    startup = ("+ FORCE_TORCHRUN=1 NNODES=2 llamafactory-cli train sft.yaml\n"
               "[INFO|2025-03-08 09:13:00] llamafactory.data.loader:143 >> Loading dataset big_sft.json...\n"
               "Running tokenizer on dataset (num_proc=16):  38%|███▊      | 456000/1200000 "
               "[2:47:10<4:31:52, 45.61 examples/s]\n")
    act, reason = action(startup + watchdog(seq=7, numel=1))
    assert act == "fix" and "tokenizing" in reason
    # a resume that iterates past the batches already trained, before the first all-reduce
    resume = ("Loading model checkpoint from out/iter-890000-ckpt.pth\n"
              "resuming: skipping 890000 batches of the packed dataset to reach the saved iteration\n")
    assert action(resume + watchdog(seq=17, numel=1))[0] == "fix"


def test_preprocessing_long_before_a_mid_run_timeout_stays_retry():
    # the dataset was tokenized at start-up, then hundreds of steps ran: the timeout is not start-up work
    startup = "Running tokenizer on dataset (num_proc=16): 100%|██████████| 1000/1000 [00:02<00:00, 410.2 examples/s]\n"
    bar = "".join(f" {i}%|█         | {i * 10}/1000 [{i:02d}:00<40:00,  2.40s/it]\n" for i in range(1, 9))
    assert action(startup + bar + TRAINING + watchdog())[0] == "retry"


def test_timeout_over_a_failing_socket_transport_is_fix():
    nccl = ("n1:312247:319401 [0] NCCL INFO NET/IB : No device found.\n"
            "n1:312247:319401 [0] NCCL INFO NET/Socket : Using [0]eth0:10.124.137.109<0>\n"
            "n1:312247:319401 [0] NCCL INFO Using network Socket\n")
    failing = "".join(f"n1:312247:326969 [0] NCCL INFO misc/socket.cc:{n} -> 3\n" for n in (829, 881, 64))
    act, reason = action(nccl + TRAINING + failing + watchdog())
    assert act == "fix" and "NCCL_SOCKET_IFNAME" in reason
    # the socket transport alone (a healthy multi-node set-up without IB) says nothing: retry
    assert action(nccl + TRAINING + watchdog())[0] == "retry"


def test_timeout_after_rank0_only_work_is_fix():
    log = ("+ torchrun --standalone --nproc_per_node=4 pipeline.py --train --test\n" + TRAINING +
           "[2025-01-22 14:58:46,002] INFO: Running predictions on the test set (rank 0 only)\n"
           " 61%|██████    | 244/400 [16:21<10:28,  4.03s/it]\n" + watchdog(seq=7031))
    act, reason = action(log)
    assert act == "fix" and "rank 0 only" in reason


def test_default_port_bound_elsewhere_in_the_log_is_fix():
    bind = ("[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:29500 "
            "(errno: 98 - Address already in use).\n"
            "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.\n")
    act, reason = action("+ torchrun --nproc_per_node 4 train.py\n" + bind)
    assert act == "fix" and "MASTER_PORT" in reason
    # the user's own `ss -ltnp` showing another process listening on the port
    ss = ("OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 10000): address already in use\n"
          "$ ss -ltnp | grep 10000\n"
          'LISTEN 0      2048       127.0.0.1:10000      0.0.0.0:*    users:(("python",pid=2219914,fd=31))\n')
    assert action(ss)[0] == "fix"


def test_an_ephemeral_port_race_stays_retry():
    race = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
            "port: 46571, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n")
    assert action(race)[0] == "retry"


def test_stale_handle_on_a_shared_dataset_cache_is_fix():
    cache = ("Traceback (most recent call last):\n"
             '  File "/usr/lib/python3.10/site-packages/datasets/arrow_dataset.py", line 3551, in _map_single\n'
             "OSError: [Errno 116] Stale file handle: '/mnt/share/hf_cache/datasets/json/default-1a2b/0.0.0/"
             "cache-5c6d7e8f.arrow'\n")
    act, reason = action(cache)
    assert act == "fix" and "HF_DATASETS_CACHE" in reason
    # a stale handle on a checkpoint being written stays the transient storage error
    ckpt = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/site-packages/torch/serialization.py", line 652, in save\n'
            "OSError: [Errno 116] Stale file handle\n")
    assert action(ckpt)[0] == "retry"


def test_stale_handle_on_a_cache_lock_file_is_fix():
    # the error line names no path: the filelock frames say a cache's lock file went stale (hub snapshot_download)
    lock = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.11/site-packages/huggingface_hub/_snapshot_download.py", line 296, in snapshot_download\n'
            "    with WeakFileLock(lock_path):\n"
            '  File "/usr/lib/python3.11/site-packages/filelock/_api.py", line 376, in __exit__\n'
            "    self.release()\n"
            '  File "/usr/lib/python3.11/site-packages/filelock/_unix.py", line 67, in _release\n'
            "    os.close(fd)\n"
            "OSError: [Errno 116] Stale file handle\n")
    act, reason = action(lock)
    assert act == "fix" and "lock file" in reason


def test_timeout_raised_from_a_save_is_fix():
    log = ("+ deepspeed train_sft.py --zero_stage 3\n" + TRAINING +
           "[rank0]: new best eval loss 0.9402 -> saving /ckpt/best_hf\n"
           "[rank6]: Traceback (most recent call last):\n"
           '[rank6]:   File "/workspace/train_sft.py", line 92, in save_logs_and_checkpoints\n'
           "[rank6]:     self.strategy.save_model(self.model, self.tokenizer, save_path)\n"
           '[rank6]:   File "/usr/lib/python3.10/site-packages/openrlhf/utils/deepspeed/deepspeed.py", line 352, in save_model\n'
           "[rank6]:     with deepspeed.zero.GatheredParameters(([v] if is_zero3 else []), enabled=is_zero3):\n"
           "[rank6]: torch.distributed.DistBackendError: [Rank 6] Work WorkNCCL(SeqNum=43379, OpType=_ALLGATHER_BASE, "
           "NumelIn=8069120, NumelOut=64552960, Timeout(ms)=600000) timed out in blocking wait.\n")
    act, reason = action(log)
    assert act == "fix" and "save" in reason


def test_bootstrap_connect_timing_out_before_any_step_is_fix():
    log = ("gpu-a-11:20588:20745 [0] NCCL INFO Using network Socket\n"
           "gpu-a-11:20588:20745 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.20.1.12<51423> "
           "failed : Connection timed out\n"
           "gpu-a-11:20588:20745 [0] NCCL INFO bootstrap.cc:256 -> 2\n"
           "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
           "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.22.3\n"
           "[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n")
    act, reason = action(log)
    assert act == "fix" and "firewall" in reason
