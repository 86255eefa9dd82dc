"""Nothing trains: every parameter frozen, so the loss has no grad_fn."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="no-grad-frozen",
        module=__name__,
        category="no-grad",
        devices=("cpu", "cuda"),
        description="Backbone frozen with a loop that also catches lm_head; loss.backward() has nothing to differentiate",
        fail=Variant("all-frozen", "requires_grad_(False) on every parameter"),
        fixes=(Variant("unfreeze-head", "unfreeze lm_head and the last decoder layer, optimise only trainable params"),),
        checks=(checks.loss_decreases, checks.grads_flow),
    ),
]


def _train(kit, unfreeze: bool):
    import torch

    model = kit.llama().to(kit.device)
    for name, p in model.named_parameters():  # "freeze the backbone" -- but this matches lm_head too
        p.requires_grad_(False)
    if unfreeze:
        for p in model.lm_head.parameters():
            p.requires_grad_(True)
        for p in model.model.layers[-1].parameters():
            p.requires_grad_(True)
    trainable = [p for p in model.parameters() if p.requires_grad]
    total = sum(p.numel() for p in model.parameters())
    print(f"trainable params: {sum(p.numel() for p in trainable)} || all params: {total}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = kit.batch(8, 32, seed=5).to(kit.device)
    losses = []
    for step in range(1, 7):
        loss = model(input_ids=data, labels=data).loss
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.4f} grad_norm {float(grad_norm):.4g}")
        kit.result(losses=losses, grad_norm=float(grad_norm))


def all_frozen(kit):
    _train(kit, unfreeze=False)


def unfreeze_head(kit):
    _train(kit, unfreeze=True)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
