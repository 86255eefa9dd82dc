"""A chat loop whose input grew call after call until the GPU ran out of memory: the input length is the cause,
the out-of-memory its symptom (detect/input_growth.py, `input_growth` in rules/verdict.yaml)."""
from __future__ import annotations

import llmtriage

WARN = "Input length of input_ids is {n}, but `max_length` is set to 256. This can lead to unexpected behavior. You should consider increasing `max_new_tokens`.\n"
OOM = (
    "Traceback (most recent call last):\n"
    '  File "/home/u/demo/chat.py", line 44, in respond\n'
    "    out = model.generate(**inputs, max_length=256)\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.20 GiB (GPU 0; 11.00 GiB total capacity; "
    "7.10 GiB already allocated; 2.90 GiB free; 7.30 GiB reserved in total by PyTorch)\n"
)


def _errors(sizes: list[int]):
    rep = llmtriage.analyze("".join(WARN.format(n=n) for n in sizes) + OOM)
    return [f for f in rep.findings if f.severity == "error"]


def test_growing_history_makes_the_length_the_cause():
    errs = _errors([180, 900, 3100, 9800, 30500])
    assert errs[0].category == "seq-too-long" and errs[0].role == "cause"
    assert errs[0].captures["last_input"] == "30500"
    oom = next(f for f in errs if f.category == "cuda-oom")
    assert oom.role == "symptom"


def test_steady_inputs_leave_the_oom_the_cause():
    """Each call's input about the same size: the memory ran out for another reason."""
    errs = _errors([5200, 5100, 5300, 5250])
    assert errs[0].category == "cuda-oom"
