"""Autograd misuse: backward through a freed graph a second time; in-place edit of a saved tensor."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="autograd-backward-twice",
        module=__name__,
        category="autograd-misuse",
        devices=("cpu", "cuda"),
        description="Soft-prompt embeddings computed once outside the loop and reused every step",
        fail=Variant("prompt-outside-loop", "prompt = proj(prompt_params) before the loop"),
        fixes=(Variant("prompt-inside-loop", "recompute the prompt inside the loop"),),
        checks=(checks.finite_losses, checks.loss_decreases),
    ),
    Scenario(
        name="autograd-inplace",
        module=__name__,
        category="autograd-misuse",
        devices=("cpu", "cuda"),
        description="Attention-style probabilities edited in place after softmax, then backward",
        fail=Variant("inplace-softmax", "probs[..., 0] = 0 after softmax"),
        fixes=(Variant("masked-fill", "probs.masked_fill(mask, 0) (out of place)"),),
        checks=(checks.finite_losses, checks.loss_decreases),
    ),
]


def _soft_prompt(kit, inside: bool):
    import torch

    model = kit.llama().to(kit.device)
    for p in model.parameters():
        p.requires_grad_(False)
    emb = model.get_input_embeddings()
    prompt_params = torch.nn.Parameter(torch.randn(4, 32, device=kit.device) * 0.02)
    proj = torch.nn.Linear(32, 32).to(kit.device)
    optimizer = torch.optim.AdamW([prompt_params, *proj.parameters()], lr=1e-2)
    data = kit.batch(4, 16, seed=10).to(kit.device)
    labels = torch.cat([torch.full((4, 4), -100, device=kit.device), data], dim=1)
    prompt = proj(prompt_params)
    losses = []
    for step in range(1, 5):
        if inside:
            prompt = proj(prompt_params)
        inputs = torch.cat([prompt.unsqueeze(0).expand(4, -1, -1), emb(data)], dim=1)
        loss = model(inputs_embeds=inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.4f}")
        kit.result(losses=losses)


def prompt_outside_loop(kit):
    _soft_prompt(kit, inside=False)


def prompt_inside_loop(kit):
    _soft_prompt(kit, inside=True)


def _inplace(kit, out_of_place: bool):
    import torch

    torch.manual_seed(0)
    scores = torch.nn.Linear(32, 61).to(kit.device)
    x = torch.randn(8, 16, 32, device=kit.device)
    target = torch.randint(1, 61, (8, 16), device=kit.device)
    optimizer = torch.optim.SGD(scores.parameters(), lr=1.0)
    losses = []
    for step in range(1, 5):
        probs = torch.softmax(scores(x), dim=-1)
        if out_of_place:
            mask = torch.zeros(61, dtype=torch.bool, device=kit.device)
            mask[0] = True
            probs = probs.masked_fill(mask, 0.0)
        else:
            probs[..., 0] = 0  # never predict the pad id
        loss = torch.nn.functional.nll_loss(torch.log(probs + 1e-9).reshape(-1, 61), target.reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.4f}")
        kit.result(losses=losses)


def inplace_softmax(kit):
    _inplace(kit, out_of_place=False)


def masked_fill(kit):
    _inplace(kit, out_of_place=True)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
