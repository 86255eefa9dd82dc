"""dtype and device mismatches: a float32 head on a bfloat16 backbone; a model built on the
meta device and loaded without assign=True (CPU); inputs left on the CPU (CUDA)."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="dtype-mismatch",
        module=__name__,
        category="dtype-mismatch",
        devices=("cpu", "cuda"),
        description="LlamaModel in bfloat16 feeding a classification head left in float32",
        fail=Variant("bf16-backbone-fp32-head", "backbone .to(torch.bfloat16), head nn.Linear in float32"),
        fixes=(Variant("cast-head", "head.to(backbone.dtype)"),),
        checks=(checks.finite_logits,),
    ),
    Scenario(
        name="device-mismatch-meta",
        module=__name__,
        category="device-mismatch",
        devices=("cpu",),
        description="Model created under torch.device('meta'), load_state_dict without assign=True",
        fail=Variant("meta-load", "load_state_dict(state_dict) into meta parameters (a no-op)"),
        fixes=(Variant("assign-true", "load_state_dict(state_dict, assign=True) + re-create the rotary buffers"),),
        checks=(checks.generated, lambda r: None if r.get("matches_reference") else "output differs from the reference model"),
    ),
    Scenario(
        name="device-mismatch-cuda",
        module=__name__,
        category="device-mismatch",
        devices=("cuda",),
        description="Model on the GPU, input_ids left on the CPU",
        fail=Variant("inputs-on-cpu", "model.to('cuda'), inputs not moved"),
        fixes=(Variant("inputs-to-device", "inputs .to(model.device)"),),
        checks=(checks.finite_logits,),
    ),
]


def _head(kit, cast: bool):
    import torch
    from transformers import LlamaModel

    torch.manual_seed(0)
    backbone = LlamaModel(kit.llama_config()).to(kit.device, torch.bfloat16).eval()
    head = torch.nn.Linear(backbone.config.hidden_size, 3).to(kit.device)
    if cast:
        head = head.to(backbone.dtype)
    ids = kit.batch(4, 16, seed=7).to(kit.device)
    with torch.no_grad():
        hidden = backbone(input_ids=ids).last_hidden_state
        logits = head(hidden[:, -1])
    print("logits", tuple(logits.shape), logits.dtype)
    kit.result(logits_finite=bool(torch.isfinite(logits.float()).all()))


def bf16_backbone_fp32_head(kit):
    _head(kit, cast=False)


def cast_head(kit):
    _head(kit, cast=True)


def _meta(kit, assign: bool):
    import torch
    from transformers import LlamaForCausalLM

    reference = kit.llama().eval()
    state_dict = reference.state_dict()
    with torch.device("meta"):
        model = LlamaForCausalLM(reference.config)
    if assign:
        model.load_state_dict(state_dict, assign=True)
        # non-persistent buffers (rotary inv_freq) are not in the state dict: re-create them
        model.model.rotary_emb = type(model.model.rotary_emb)(config=model.config)
    else:
        model.load_state_dict(state_dict)
    model.eval()
    tok = kit.tokenizer()
    enc = tok("the model is small", return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
        ref = reference.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    print("generated:", text)
    kit.result(generated=text, matches_reference=bool(torch.equal(out, ref)))


def meta_load(kit):
    _meta(kit, assign=False)


def assign_true(kit):
    _meta(kit, assign=True)


def _cuda_inputs(kit, move: bool):
    import torch

    model = kit.llama().to("cuda").eval()
    ids = kit.batch(2, 16, seed=9)
    if move:
        ids = ids.to(model.device)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    kit.result(logits_finite=bool(torch.isfinite(logits).all()))
    print("logits", tuple(logits.shape), logits.device)


def inputs_on_cpu(kit):
    _cuda_inputs(kit, move=False)


def inputs_to_device(kit):
    _cuda_inputs(kit, move=True)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
