"""Tokenizer problems: no pad token, and added tokens beyond the embedding matrix."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="pad-token-missing",
        module=__name__,
        category="pad-token-missing",
        devices=("cpu", "cuda"),
        description="Batched tokenizer call with padding=True on a tokenizer that has no pad token",
        fail=Variant("no-pad-token", "tokenizer(batch, padding=True) without a pad token"),
        fixes=(Variant("eos-as-pad", "tokenizer.pad_token = tokenizer.eos_token (left padding for generation)"),),
        checks=(checks.generated,),
    ),
    Scenario(
        name="token-ids-beyond-embedding",
        module=__name__,
        category="index-out-of-range",
        devices=("cpu", "cuda"),  # CUDA: the same lookup fails as a device-side assert
        description="Three special tokens added to the tokenizer, the model's embeddings not resized",
        fail=Variant("added-tokens", "add_special_tokens without resize_token_embeddings"),
        fixes=(Variant("resize-embeddings", "model.resize_token_embeddings(len(tokenizer))"),),
        checks=(checks.finite_logits,),
    ),
    Scenario(
        name="classifier-labels-beyond-num-labels",
        module=__name__,
        category="index-out-of-range",
        devices=("cpu", "cuda"),  # CPU: "Target 3 is out of bounds"; CUDA: the nll_loss kernel's assertion
        description="Sequence classifier built with num_labels=3 trained on a dataset whose labels run 0..4",
        fail=Variant("num-labels-too-small", "LlamaForSequenceClassification(num_labels=3), labels 0..4"),
        fixes=(Variant("num-labels-from-data", "num_labels = max(label) + 1 = 5"),),
        checks=(checks.finite_losses,),
    ),
]

PROMPTS = ["the model is small", "we train the tiny model with a long sequence of tokens"]


def _generate(kit, tok):
    import torch

    model = kit.llama().to(kit.device).eval()
    enc = tok(PROMPTS, padding=True, return_tensors="pt", return_token_type_ids=False).to(kit.device)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    for t in texts:
        print("generated:", t)
    kit.result(generated=" | ".join(texts))


def no_pad_token(kit):
    tok = kit.tokenizer(pad=False)
    _generate(kit, tok)


def eos_as_pad(kit):
    tok = kit.tokenizer(pad=False)
    tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    _generate(kit, tok)


def _forward_with_added(kit, resize: bool):
    import torch

    tok = kit.tokenizer()
    model = kit.llama().to(kit.device).eval()
    n = tok.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|assistant|>", "<|end|>"]})
    print(f"added {n} tokens, tokenizer size {len(tok)}, embedding rows {model.get_input_embeddings().num_embeddings}")
    if resize:
        model.resize_token_embeddings(len(tok))
    enc = tok("<|user|> the model is small <|end|> <|assistant|> yes", return_tensors="pt", return_token_type_ids=False).to(kit.device)
    with torch.no_grad():
        logits = model(**enc).logits
    kit.result(logits_finite=bool(torch.isfinite(logits).all()))
    print("logits", tuple(logits.shape))


def added_tokens(kit):
    _forward_with_added(kit, resize=False)


def resize_embeddings(kit):
    _forward_with_added(kit, resize=True)


def _classify(kit, num_labels: int):
    import torch
    from transformers import LlamaForSequenceClassification

    tok = kit.tokenizer()
    cfg = kit.llama_config(num_labels=num_labels, pad_token_id=tok.pad_token_id)
    model = LlamaForSequenceClassification(cfg).to(kit.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    labels = torch.tensor([0, 1, 2, 3, 4, 1, 0, 2])  # five classes in the data
    print(f"num_labels={num_labels}, labels in data: {sorted(set(labels.tolist()))}")
    enc = tok([kit.text(12, seed=i) for i in range(len(labels))], padding=True, return_tensors="pt",
              return_token_type_ids=False).to(kit.device)
    losses = []
    for step in range(3):
        loss = model(**enc, labels=labels.to(kit.device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss))  # a CUDA kernel assertion surfaces here at the latest
        print(f"step {step} loss {losses[-1]:.4f}")
    kit.result(losses=losses)


def num_labels_too_small(kit):
    _classify(kit, 3)


def num_labels_from_data(kit):
    _classify(kit, 5)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
