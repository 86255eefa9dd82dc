"""Environment problems shown without uninstalling anything: a missing optional package
(FlashAttention 2 requested), code written for an older transformers (`from transformers
import AdamW`), and `.to("cuda")` on a CPU-only torch build."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="missing-dependency-flash-attn",
        module=__name__,
        category="missing-dependency",
        devices=("cpu",),
        description="attn_implementation='flash_attention_2' without the flash_attn package",
        fail=Variant("flash-attention-2", "from_pretrained(..., attn_implementation='flash_attention_2')"),
        fixes=(Variant("sdpa", "attn_implementation='sdpa' (built into torch)"),),
        checks=(checks.loaded, checks.generated),
    ),
    Scenario(
        name="dependency-mismatch-adamw",
        module=__name__,
        category="dependency-mismatch",
        devices=("cpu", "cuda"),
        description="`from transformers import AdamW` (removed in transformers 5) as in older tutorials",
        fail=Variant("transformers-adamw", "from transformers import AdamW"),
        fixes=(Variant("torch-adamw", "from torch.optim import AdamW"),),
        checks=(checks.finite_losses, checks.loss_decreases),
    ),
    Scenario(
        name="cuda-unavailable",
        module=__name__,
        category="cuda-unavailable",
        devices=("cpu",),
        requires_no_cuda=True,
        description="model.to('cuda') on a CPU-only torch build",
        fail=Variant("to-cuda", "model.to('cuda') unconditionally"),
        fixes=(Variant("device-fallback", "device = 'cuda' if torch.cuda.is_available() else 'cpu'"),),
        checks=(checks.generated,),
    ),
]


def _load(kit, attn):
    import torch
    from transformers import AutoModelForCausalLM

    kit.llama().save_pretrained("model")
    model = AutoModelForCausalLM.from_pretrained("model", attn_implementation=attn).eval()
    kit.result(loaded=True)
    tok = kit.tokenizer()
    enc = tok("the model", return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    print("generated:", text)
    kit.result(generated=text)


def flash_attention_2(kit):
    _load(kit, "flash_attention_2")


def sdpa(kit):
    _load(kit, "sdpa")


def _train(kit, AdamW):
    import torch

    model = kit.llama().to(kit.device)
    optimizer = AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    data = kit.batch(4, 16, seed=11).to(kit.device)
    losses = []
    for step in range(1, 5):
        loss = model(input_ids=data, labels=data).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.4f}")
    kit.result(losses=losses)


def transformers_adamw(kit):
    import transformers

    if hasattr(transformers, "AdamW"):     # (deprecated, still shipped before transformers 4.5x removed it)
        kit.skip(f"transformers {transformers.__version__} still ships AdamW: the import only fails where it was removed")
    from transformers import AdamW

    _train(kit, AdamW)


def torch_adamw(kit):
    from torch.optim import AdamW

    _train(kit, AdamW)


def _generate_on(kit, device):
    import torch

    tok = kit.tokenizer()
    model = kit.llama().to(device).eval()
    enc = tok("the model", return_tensors="pt", return_token_type_ids=False).to(device)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    print(f"generated on {device}:", text)
    kit.result(generated=text)


def to_cuda(kit):
    _generate_on(kit, "cuda")


def device_fallback(kit):
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    _generate_on(kit, device)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
