"""Damaged checkpoint: a truncated model.safetensors / pytorch_model.bin.

The fix verifies every file against the sha256 manifest written at save time and restores
a mismatching file from the pristine local copy, resuming from the bytes already present
when they are a valid prefix (like an interrupted download), then loads the model.
"""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

_fix = Variant("verify-and-restore",
               "sha256 check against the save-time manifest, resume/restore from the pristine copy, load")

SCENARIOS = [
    Scenario(
        name="checkpoint-corrupt-safetensors",
        module=__name__,
        category="checkpoint-corrupt",
        devices=("cpu", "cuda"),
        description="from_pretrained on a model.safetensors cut to half its size",
        fail=Variant("truncated-safetensors", "model.safetensors truncated to 50%"),
        fixes=(_fix,),
        checks=(checks.loaded, checks.generated),
    ),
    Scenario(
        name="checkpoint-corrupt-bin",
        module=__name__,
        category="checkpoint-corrupt",
        devices=("cpu", "cuda"),
        description="from_pretrained on a torch.save zip (pytorch_model.bin) cut to 90%",
        fail=Variant("truncated-bin", "pytorch_model.bin truncated to 90%"),
        fixes=(_fix,),
        checks=(checks.loaded, checks.generated),
    ),
]

CKPT = "checkpoints/final"
PRISTINE = "mirror/final"


def _sha256(path):
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _prepare(kit, fmt: str, damage: bool = True):
    """Save a tiny model + manifest into the pristine mirror, copy it to CKPT, then damage the copy."""
    import json
    import os
    import shutil

    import torch

    model = kit.llama()
    os.makedirs(PRISTINE, exist_ok=True)
    if fmt == "safetensors":
        model.save_pretrained(PRISTINE)
        name = "model.safetensors"
    else:  # v5 save_pretrained always writes safetensors: write the .bin like older trainers did
        model.config.save_pretrained(PRISTINE)
        torch.save(model.state_dict(), os.path.join(PRISTINE, "pytorch_model.bin"))
        name = "pytorch_model.bin"
    kit.tokenizer().save_pretrained(PRISTINE)
    manifest = {f: _sha256(os.path.join(PRISTINE, f)) for f in sorted(os.listdir(PRISTINE))}
    with open(os.path.join(PRISTINE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    shutil.copytree(PRISTINE, CKPT)
    if damage:
        path = os.path.join(CKPT, name)
        size = os.path.getsize(path)
        keep = size // 2 if fmt == "safetensors" else size * 9 // 10
        with open(path, "r+b") as f:
            f.truncate(keep)
    return name


def _load_and_generate(kit):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(CKPT)
    model = AutoModelForCausalLM.from_pretrained(CKPT).to(kit.device).eval()
    kit.result(loaded=True)
    kit.generate(model, tok)


def _verify_and_restore(ckpt: str, pristine: str) -> None:
    """Check sha256 against the manifest; restore bad files from the pristine copy (resuming)."""
    import json
    import os

    with open(os.path.join(pristine, "manifest.json")) as f:
        manifest = json.load(f)
    for name, want in manifest.items():
        path, src = os.path.join(ckpt, name), os.path.join(pristine, name)
        if os.path.exists(path) and _sha256(path) == want:
            continue
        have = os.path.getsize(path) if os.path.exists(path) else 0
        print(f"{name}: sha256 differs from manifest.json ({have} of {os.path.getsize(src)} bytes present);"
              f" restoring from {pristine}")
        # resume semantics: keep the bytes already there if they are a prefix of the good file
        with open(src, "rb") as s:
            prefix_ok = have > 0 and os.path.exists(path) and open(path, "rb").read() == s.read(have)
        mode, offset = ("ab", have) if prefix_ok else ("wb", 0)
        with open(src, "rb") as s, open(path, mode) as d:
            s.seek(offset)
            for chunk in iter(lambda: s.read(1 << 20), b""):
                d.write(chunk)
        print(f"{name}: {'resumed at byte ' + str(offset) if prefix_ok else 're-fetched'}, sha256 OK")
        if _sha256(path) != want:
            raise RuntimeError(f"sha256 still wrong after restore: {name}")
    print(f"checksums OK: {len(manifest)} files")


def truncated_safetensors(kit):
    _prepare(kit, "safetensors")
    _load_and_generate(kit)


def truncated_bin(kit):
    _prepare(kit, "bin")
    _load_and_generate(kit)


def verify_and_restore(kit):
    import sys

    fmt = "bin" if "bin" in kit.scenario else "safetensors"
    _prepare(kit, fmt)
    _verify_and_restore(CKPT, PRISTINE)
    sys.stdout.flush()
    _load_and_generate(kit)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
