"""Checkpoint shape mismatch: loading a vocab-68 checkpoint with vocab_size=96 in the config."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="weights-shape-mismatch",
        module=__name__,
        category="weights-shape-mismatch",
        devices=("cpu", "cuda"),
        description="from_pretrained(ckpt, vocab_size=96) on a checkpoint saved with a smaller vocabulary",
        fail=Variant("vocab-override", "vocab_size=96 passed to from_pretrained"),
        fixes=(Variant("resize-after-load", "load with the checkpoint's own config, then resize_token_embeddings(96)"),),
        checks=(checks.loaded, checks.finite_logits),
    ),
]

NEW_VOCAB = 96


def _prepare(kit):
    kit.llama().save_pretrained("checkpoints/base")


def _check(kit, model):
    import torch

    ids = kit.batch(2, 16, vocab=NEW_VOCAB, seed=6).to(kit.device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    print(f"vocab {model.get_input_embeddings().weight.shape[0]}, logits {tuple(logits.shape)}")
    kit.result(loaded=True, logits_finite=bool(torch.isfinite(logits).all()))


def vocab_override(kit):
    from transformers import AutoModelForCausalLM

    _prepare(kit)
    model = AutoModelForCausalLM.from_pretrained("checkpoints/base", vocab_size=NEW_VOCAB).to(kit.device)
    _check(kit, model)


def resize_after_load(kit):
    from transformers import AutoModelForCausalLM

    _prepare(kit)
    model = AutoModelForCausalLM.from_pretrained("checkpoints/base")
    model.resize_token_embeddings(NEW_VOCAB)
    _check(kit, model.to(kit.device))


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
