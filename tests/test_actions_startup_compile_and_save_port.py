"""Next actions decided from where a failure happened: a collective timeout while ranks still compile at start-up,
and a port bind that fails inside the job's own checkpoint save."""
from __future__ import annotations

import llmtriage


def action(text: str) -> tuple[str, str]:
    rep = llmtriage.analyze(text)
    return rep.extra["action"], rep.extra["action_reason"]


def watchdog(seq: int = 9) -> str:
    return (f"[rank2]:[E0301 11:02:07.551205033 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) "
            "ran for 600031 milliseconds before timing out.\n"
            "terminate called after throwing an instance of 'c10::DistBackendError'\n")


TRAINING = "".join(f"{{'loss': {1.5 - i / 100:.4f}, 'grad_norm': 0.91, 'learning_rate': 2e-05, 'epoch': {i / 100:.2f}}}\n"
                   for i in range(1, 8))


def test_timeout_while_a_rank_compiles_at_startup_is_fix():
    compiling = ("[2025-05-02 10:01:11 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
                 "[2025-05-02 10:01:12 TP0] Compiling a graph for torch.compile with bs=1 ...\n"
                 "[2025-05-02 10:05:40 TP0] Compiling a graph for torch.compile with bs=2 ...\n")
    act, reason = action(compiling + watchdog())
    assert act == "fix" and "compiling" in reason


def test_compile_at_startup_then_healthy_steps_then_timeout_stays_retry():
    compiled = "AUTOTUNE mm(4096x1024, 1024x4096)\n  triton_mm_3 0.0811 ms 100.0%\n"
    assert action("+ torchrun --nproc_per_node 8 train.py\n" + compiled + TRAINING + watchdog(seq=4812))[0] == "retry"


BIND = ("[W302 09:11:41.552841120 socket.cpp:752] [c10d] The server socket has failed to bind to 0.0.0.0:7001 "
        "(errno: 98 - Address already in use).\n"
        "RuntimeError: The server socket has failed to listen on any local network address. port: 7001, useIpv6: 0, "
        "code: -98, name: EADDRINUSE, message: address already in use\n")


def test_a_port_bind_inside_the_checkpoint_writer_is_fix():
    save = ("Traceback (most recent call last):\n"
            '  File "/opt/megatron-lm/megatron/core/dist_checkpointing/strategies/filesystem_async.py", line 233, '
            "in write_preloaded_data_multiproc\n"
            "    torch.distributed.TCPStore(host_name, port, world_size, is_master)\n")
    act, reason = action(TRAINING + save + BIND)
    assert act == "fix" and "checkpoint save" in reason


LAUNCH = ("Traceback (most recent call last):\n"
          '  File "/usr/lib/python3.10/site-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store\n'
          "    return TCPStore(\n")


def test_a_port_fixed_by_the_launch_command_and_taken_at_launch_is_fix():
    # --master_port names the port: a leftover run or another job holds it, and the same command binds it again
    act, reason = action("+ torchrun --nproc_per_node 8 --master_port 7001 train.py\n" + LAUNCH + BIND)
    assert act == "fix" and "fixed by the launch command" in reason


def test_a_port_fixed_in_the_init_method_is_fix():
    code = ('  File "/home/u/seg/train.py", line 53, in train\n'
            "    dist.init_process_group(backend='nccl', init_method='tcp://127.0.0.1:7001', world_size=2, rank=rank)\n")
    assert action(LAUNCH.replace("Traceback (most recent call last):\n", "Traceback (most recent call last):\n" + code)
                  + BIND)[0] == "fix"


def test_a_port_bind_after_progress_on_a_port_nobody_chose_stays_retry():
    assert action(TRAINING + LAUNCH + BIND)[0] == "retry"


def test_a_timeout_inside_a_distributed_checkpoint_save_seen_in_a_thread_dump_is_fix():
    dump = ("[rank0]:Thread 0x00007f13c65f5400 (most recent call first):\n"
            '[rank0]:  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3230 in scatter\n'
            '[rank0]:  File "/venv/lib/python3.11/site-packages/torch/distributed/checkpoint/state_dict_saver.py", '
            "line 120 in save\n")
    act, reason = action("+ torchrun --nproc_per_node 8 train.py\n" + TRAINING + watchdog(seq=2401) + dump)
    assert act == "fix" and "save" in reason
