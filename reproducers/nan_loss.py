"""NaN loss: a learning rate far too high, and float16 weights with AdamW (no AMP)."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="nan-loss-lr",
        module=__name__,
        category="nan-loss",
        devices=("cpu", "cuda"),
        description="Plain training loop, SGD lr=1e3, no clipping; the loop stops on a non-finite loss",
        fail=Variant("lr-1e3", "SGD lr=1e3 without gradient clipping"),
        fixes=(Variant("lower-lr-clip", "lr=0.5 and clip_grad_norm_(..., 1.0)"),),
        checks=(checks.finite_losses, checks.loss_decreases),
    ),
    Scenario(
        name="nan-loss-fp16",
        module=__name__,
        category="nan-loss",
        devices=("cpu", "cuda"),
        description="model.half() trained with AdamW (eps=1e-8 underflows in float16)",
        fail=Variant("fp16-adamw", "float16 weights and AdamW, no autocast / GradScaler"),
        fixes=(Variant("bf16-weights", "bfloat16 weights (float32 exponent range), same optimizer"),),
        checks=(checks.finite_losses,),
    ),
]


def _loop(kit, *, lr, clip=None, opt="sgd", dtype=None, steps=8):
    import math
    import sys

    import torch

    model = kit.llama().to(kit.device)
    if dtype is not None:
        model = model.to(dtype)
    model.train()
    if opt == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    data = kit.batch(8, 32, seed=4).to(kit.device)
    losses = []
    for step in range(1, steps + 1):
        loss = model(input_ids=data, labels=data).loss
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            sys.exit(1)
        loss.backward()
        if clip is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        else:
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss_value)
        print(f"step {step}: loss {loss_value:.4f} grad_norm {float(grad_norm):.4g} lr {lr:g}")
        kit.result(losses=losses)


def lr_1e3(kit):
    _loop(kit, lr=1e3)


def lower_lr_clip(kit):
    _loop(kit, lr=0.5, clip=1.0)


def fp16_adamw(kit):
    import torch

    _loop(kit, lr=1e-3, opt="adamw", dtype=torch.float16)


def bf16_weights(kit):
    import torch

    _loop(kit, lr=1e-3, opt="adamw", dtype=torch.bfloat16)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
