"""Out of memory: a training step and an evaluation loop that do not fit a memory cap.

CPU: a real allocator failure under RLIMIT_AS (VmSize at the start of training + budget);
CUDA: a real torch.OutOfMemoryError under torch.cuda.set_per_process_memory_fraction.
"""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

# Address-space budgets above VmSize at the cap, calibrated uncapped (LLMTRIAGE_OOM_BUDGET_MIB=0) on
# torch 2.13.0+cpu / transformers 5.24.0, fresh venv, CI=true, 2 runs each (MiB of VmPeak growth):
#   train: fail 1058-1119, grad-checkpointing 468-616, grad-accum ~170       -> 760
#   eval:  fail 734-865,   bf16-weights ~555,          no-grad ~60           -> 645
# The fail growth varies run to run (glibc reuses address space reserved before the cap), so each
# budget sits between the largest fix and the smallest failing run seen.
TRAIN_BUDGET_MIB = 760
EVAL_BUDGET_MIB = 645
# CUDA budgets are allocator bytes above memory_allocated() at the cap (torch.cuda.max_memory_allocated
# growth), calibrated uncapped on an H200 with torch 2.11.0+cu130 under transformers 5.17.0 and 4.57.6
# (identical but for grad-checkpointing) on 2026-12-04. The CPU address-space budget does not carry over:
# CUDA's SDPA kernels never hold the 64x4x256x256 attention matrices that dominate the CPU peak, so the
# failing batch-64 step grew only 734 MiB and fitted under 760.
#   train: fail 734, grad-checkpointing 161-185, grad-accum 94                 -> 459 (the midpoint)
#   eval:  fail 679, bf16-weights 387,           no-grad 25                    -> 533
CUDA_TRAIN_BUDGET_MIB = 459
CUDA_EVAL_BUDGET_MIB = 533

_train_fixes = (
    Variant("grad-accum", "micro-batch 8 x 8 accumulation steps: the same global batch of 64"),
    Variant("grad-checkpointing", "model.gradient_checkpointing_enable(), same batch"),
)

SCENARIOS = [
    Scenario(
        name="host-oom",
        module=__name__,
        category="host-oom",
        devices=("cpu",),
        description="Training step of a tiny Llama with batch 64 x seq 256 under an address-space cap",
        fail=Variant("batch-64", "one micro-batch of 64 sequences of 256 tokens"),
        fixes=_train_fixes,
        checks=(checks.finite_losses, checks.under_cap),
    ),
    Scenario(
        name="cuda-oom",
        module=__name__,
        category="cuda-oom",
        devices=("cuda",),
        description="Training step of a tiny Llama with batch 64 x seq 256 under set_per_process_memory_fraction",
        fail=Variant("batch-64", "one micro-batch of 64 sequences of 256 tokens"),
        fixes=_train_fixes,
        checks=(checks.finite_losses, checks.under_cap),
    ),
    Scenario(
        name="host-oom-eval",
        module=__name__,
        category="host-oom",
        devices=("cpu",),
        description="Evaluation loop that keeps every batch's autograd graph alive (no torch.no_grad)",
        fail=Variant("eval-with-grad", "model(x) in the eval loop without no_grad; logits collected"),
        fixes=(Variant("no-grad", "the eval loop under torch.no_grad()"),
               Variant("bf16-weights", "model weights in bfloat16 (half the memory of float32), same loop")),
        checks=(checks.finite_losses, checks.under_cap),
    ),
    Scenario(
        name="cuda-oom-eval",
        module=__name__,
        category="cuda-oom",
        devices=("cuda",),
        description="Evaluation loop that keeps every batch's autograd graph alive (no torch.no_grad)",
        fail=Variant("eval-with-grad", "model(x) in the eval loop without no_grad; logits collected"),
        fixes=(Variant("no-grad", "the eval loop under torch.no_grad()"),
               Variant("bf16-weights", "model weights in bfloat16 (half the memory of float32), same loop")),
        checks=(checks.finite_losses, checks.under_cap),
    ),
]


def _model(kit):
    return kit.llama(vocab_size=512, hidden_size=64, intermediate_size=256, num_hidden_layers=6,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)


def _train(kit, *, micro: int, accum: int, checkpointing: bool = False, dtype=None):
    import torch

    model = _model(kit).to(kit.device)
    if dtype is not None:
        model = model.to(dtype)
    if checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = kit.batch(64, 256, vocab=512, seed=1).to(kit.device)
    # warm-up step on a tiny batch so that lazily created state exists before the cap
    model(data[:1, :8], labels=data[:1, :8]).loss.backward()
    opt.zero_grad(set_to_none=True)
    kit.cap_memory(CUDA_TRAIN_BUDGET_MIB if kit.device.startswith("cuda") else TRAIN_BUDGET_MIB)
    losses = []
    for step in range(2):
        total = 0.0
        for i in range(accum):
            x = data[i * micro:(i + 1) * micro]
            loss = model(input_ids=x, labels=x).loss / accum
            loss.backward()
            total += loss.item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total)
        print(f"step {step + 1}: loss {total:.4f}")
    kit.result(losses=losses, peak_mib=kit.peak_mib())


def batch_64(kit):
    _train(kit, micro=64, accum=1)


def grad_accum(kit):
    _train(kit, micro=8, accum=8)


def grad_checkpointing(kit):
    _train(kit, micro=64, accum=1, checkpointing=True)


def _eval(kit, *, no_grad: bool, dtype=None):
    import contextlib

    import torch

    model = _model(kit).to(kit.device)
    if dtype is not None:
        model = model.to(dtype)
    model.eval()
    data = kit.batch(64, 256, vocab=512, seed=2).to(kit.device)
    model(data[:1, :8])
    kit.cap_memory(CUDA_EVAL_BUDGET_MIB if kit.device.startswith("cuda") else EVAL_BUDGET_MIB)
    ctx = torch.no_grad() if no_grad else contextlib.nullcontext()
    losses, preds = [], []
    with ctx:
        for i in range(0, 64, 8):
            x = data[i:i + 8]
            out = model(input_ids=x, labels=x)
            losses.append(out.loss)  # keeps the whole graph of the batch alive without no_grad
            preds.append(out.logits.argmax(-1))
    vals = [v.item() for v in losses]
    print(f"eval loss {sum(vals) / len(vals):.4f} over {len(vals)} batches")
    kit.result(losses=vals, peak_mib=kit.peak_mib())


def eval_with_grad(kit):
    _eval(kit, no_grad=False)


def no_grad(kit):
    _eval(kit, no_grad=True)


def bf16_weights(kit):
    import torch

    _eval(kit, no_grad=False, dtype=torch.bfloat16)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
