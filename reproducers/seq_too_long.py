"""Sequence too long: a 72-token input into a GPT-2 with 32 learned positions."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="seq-too-long",
        module=__name__,
        category="seq-too-long",
        devices=("cpu",),  # on CUDA the IndexError becomes a device-side assert
        description="Tokenizer warning, then IndexError in the position embedding (GPT-2, n_positions=32)",
        fail=Variant("no-truncation", "72-token text encoded without truncation"),
        fixes=(Variant("truncation", "tokenizer(..., truncation=True, max_length=32)"),),
        checks=(checks.finite_logits, checks.generated),
    ),
]


def _run(kit, **enc_kw):
    import torch

    tok = kit.tokenizer(model_max_length=32)
    model = kit.gpt2(n_positions=32).to(kit.device).eval()
    text = kit.text(72, seed=3)
    enc = tok(text, return_tensors="pt", **enc_kw).to(kit.device)
    print(f"encoded {enc['input_ids'].shape[1]} tokens")
    with torch.no_grad():
        out = model(**enc)
    next_ids = out.logits[0, -8:].argmax(-1)
    kit.result(logits_finite=bool(torch.isfinite(out.logits).all()),
               generated=tok.decode(next_ids, skip_special_tokens=True))
    print("next tokens:", tok.decode(next_ids, skip_special_tokens=True))


def no_truncation(kit):
    _run(kit)


def truncation(kit):
    _run(kit, truncation=True, max_length=32)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
