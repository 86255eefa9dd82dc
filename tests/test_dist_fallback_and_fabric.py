"""Distributed-training judgements: a handled fallback printed on the error's own line is not the death, a
bare KeyError naming a parameter in checkpoint / sharding code is a key-set mismatch, an HCCL timeout during
ACL graph capture is deterministic, NVLS multicast failures are node faults, ROCm page faults have their rule."""
from __future__ import annotations

import llmtriage

WATCHDOG = (
    "[rank6]:[E908 05:24:11.571310624 ProcessGroupNCCL.cpp:629] [Rank 6] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1782692, OpType=_REDUCE_SCATTER_BASE, NumelIn=778567680, NumelOut=19464192, Timeout(ms)=600000) "
    "ran for 600011 milliseconds before timing out.\n"
    "terminate called after throwing an instance of 'c10::DistBackendError'\n"
    "  what():  [PG ID 1 PG GUID 1 Rank 6] Process group watchdog thread terminated with exception: [Rank 6] Watchdog "
    "caught collective operation timeout: WorkNCCL(SeqNum=1782692, OpType=_REDUCE_SCATTER_BASE, NumelIn=778567680, "
    "NumelOut=19464192, Timeout(ms)=600000) ran for 600011 milliseconds before timing out.\n"
    "E0908 05:24:20.112000 2211 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: -6) "
    "local_rank: 6 (pid: 2294) of binary: /usr/bin/python\n"
)
STEP = "{'loss': 0.70114315, 'grad_norm': 1.08, 'learning_rate': 6.21e-06, 'epoch': 0.42, 'global_step/max_steps': '600/1421'}\n"


def top(text: str):
    rep = llmtriage.analyze(text)
    errs = [f for f in rep.findings if f.severity == "error"]
    return rep, (errs[0] if errs else None)


def test_fallback_on_the_error_line_yields_to_the_later_collective_timeout():
    line = "video_reader_backend decord error, use torchvision as default, msg: nframes should in interval [2, 1], but got 0.\n"
    rep, root = top(STEP + line + "\n" * 3 + WATCHDOG)
    assert root is not None and root.category == "nccl-timeout"
    sample = [f for f in rep.findings if f.category == "data-corrupt"]
    assert sample and sample[0].severity == "warning"
    assert sample[0].judgement["context"] == "fallback-announced-on-its-line"


def test_the_same_error_without_a_fallback_stays_the_cause():
    line = "ValueError: nframes should in interval [2, 1], but got 0.\n"
    _, root = top(STEP + line + "\n" * 3 + WATCHDOG)
    assert root is not None and root.category == "data-corrupt"


def test_a_hint_to_fall_back_is_no_fallback_taken():
    text = (
        "[rank0]: torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "[rank0]: AssertionError:\n"
        "[rank0]: You can suppress this exception and fall back to eager by setting:\n"
        "[rank0]:     import torch._dynamo\n"
        "[rank0]:     torch._dynamo.config.suppress_errors = True\n"
    )
    rep = llmtriage.analyze(text)
    assert not any((f.judgement or {}).get("context") == "fallback-announced-on-its-line" for f in rep.findings)


def _keyerror(key: str, path: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/run.py", line 10, in <module>\n'
        "    main()\n"
        f'  File "{path}", line 402, in _write_overall_metadata_file\n'
        "    weight_map[fqn] = output_files[fqn_to_index_mapping[fqn]]\n"
        f"KeyError: '{key}'\n"
    )


def test_keyerror_naming_a_parameter_in_checkpoint_code_is_state_dict_keys():
    _, root = top(_keyerror("model.layers.27.mlp.gate.e_score_correction_bias",
                            "/opt/app/checkpoint/consolidate_hf_safetensors.py"))
    assert root is not None and root.category == "state-dict-keys" and root.action == "fix"


def test_keyerror_of_a_plain_key_or_outside_checkpoint_code_is_not():
    _, root = top(_keyerror("input_ids", "/opt/app/checkpoint/consolidate_hf_safetensors.py"))
    assert root is None or root.category != "state-dict-keys"
    _, root = top(_keyerror("model.layers.0.mlp.weight", "/opt/app/data/collator.py"))
    assert root is None or root.category != "state-dict-keys"


def test_hccl_timeout_during_acl_graph_capture_is_fix():
    text = (
        "INFO 10-11 14:48:40 [platform.py:176] Full graph mode enabled on NPU (ACL Graph). Compiling graphs for 4 batch sizes.\n"
        "INFO 10-11 14:49:12 [model_runner_v1.py:2490] Capturing graph for batch size 128 ...\n"
        "EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 The wait execution of the Notify register times out. Reason: The "
        "Notify register has not received the Notify record from remote rank: [24]. base information: [streamID:[109], "
        "taskID[38], taskType[Notify Wait], tag[AllReduce_group_name_1654NHRAllReduceComm_device]]\n"
        "RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: "
        "AclrtSynchronizeDeviceWithTimeout, error code is 507048\n"
    )
    _, root = top(text)
    assert root is not None and root.category == "nccl-timeout" and root.action == "fix"


def test_nvls_multicast_bind_failure_is_a_node_fault():
    text = (
        "[rank0]:torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.29.3\n"
        "[rank0]:ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank0]:Last error:\n"
        "[rank0]:Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation "
        "cannot be performed in the present state'.\n"
    )
    # without the node's fabric state the same error may be a host that cannot do multicast: NCCL's error
    _, root = top(text)
    assert root is not None and root.rule_id != "nccl-nvls-multicast-bind-failed"
    _, root = top(text + "    Fabric\n        State                             : Completed\n"
                  "        Status                            : Failure\n")
    assert root is not None and root.rule_id == "nccl-nvls-multicast-bind-failed" and root.action == "replace-node"


def test_rocm_null_address_fault_has_its_rule_and_a_driver_fault_keeps_the_node_action():
    fault = ("Memory access fault by GPU node-1 (Agent handle: 0x5616f3c1d2a0) on address (nil). "
             "Reason: Page not present or supervisor privilege.\nAborted (core dumped)\n")
    _, root = top(fault)
    assert root is not None and root.rule_id == "rocm-memory-access-fault" and root.action == "fix"
    _, root = top(fault + "[ 8812.442280] amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE\n")
    assert root is not None and root.category == "gpu-hardware-fault" and root.action == "replace-node"
