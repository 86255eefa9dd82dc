"""An impossible allocation size that is the only error: its category comes from where the size came from."""
from __future__ import annotations

import llmtriage

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.\n"


def _top(text: str):
    rep = llmtriage.analyze(text)
    errors = [f for f in rep.findings if f.severity == "error"]
    return rep, errors[0]


def test_a_garbage_size_in_the_compute_path_alone_is_a_device_memory_fault_not_oom():
    text = ("Traceback (most recent call last):\n"
            '  File "/home/u/model/attn.py", line 81, in forward\n'
            "    scratch = q.new_empty((max_len, self.num_heads, self.head_dim))\n" + OOM)
    rep, top = _top(text)
    assert top.rule_id == "cuda-oom-absurd-allocation"
    assert top.category == "gpu-hardware-fault" and top.judgement["category_was"] == "cuda-oom"
    assert rep.extra["action"] == "fix", rep.extra.get("action_reason")


def test_a_garbage_size_received_in_a_collective_alone_is_a_desync():
    text = ("Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/fsdp/_optim_utils.py", line 1652, '
            "in _gather_all_orig_param_state\n"
            "    gathered_state = _allgather_orig_param_states(\n" + OOM)
    rep, top = _top(text)
    assert top.category == "nccl-timeout"
    assert rep.extra["action"] == "fix", rep.extra.get("action_reason")


def test_a_garbage_size_beside_a_recognised_cause_keeps_its_category():
    # a real cause elsewhere in the log (here a watchdog timeout, which also vetoes the rule, or a disk error):
    # the symptom is not re-read
    disk = "OSError: [Errno 28] No space left on device: '/ckpt/step_100'\n"
    text = disk + "Traceback (most recent call last):\n  File \"/home/u/m.py\", line 3, in f\n    x = t.new_empty(n)\n" + OOM
    rep = llmtriage.analyze(text)
    garbage = [f for f in rep.findings if f.rule_id == "cuda-oom-absurd-allocation"]
    assert all(f.category == "cuda-oom" for f in garbage)
