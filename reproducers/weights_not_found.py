"""Weights not found: from_pretrained on a directory that has config.json but no weights,
and a hub repo id that is not in the local cache while offline."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="weights-not-found",
        module=__name__,
        category="weights-not-found",
        devices=("cpu", "cuda"),
        description="from_pretrained('output') where output/ holds config.json and the weights are in output/checkpoint-20",
        fail=Variant("config-only-dir", "the run directory, which has only config.json"),
        fixes=(Variant("checkpoint-dir", "the checkpoint directory that holds model.safetensors"),),
        checks=(checks.loaded, checks.generated),
    ),
    Scenario(
        name="hub-offline-uncached",
        module=__name__,
        category="hub-unreachable",
        devices=("cpu", "cuda"),
        description="HF_HUB_OFFLINE=1 and the repo id is not in the local HF cache",
        fail=Variant("offline-uncached", "from_pretrained('acme/llama-tiny') offline with an empty cache"),
        fixes=(Variant("seeded-cache", "seed the HF cache (models--acme--llama-tiny/snapshots/<rev> + refs/main), stay offline"),),
        checks=(checks.loaded, checks.generated),
    ),
]

REPO = "acme/llama-tiny"


def _save_run(kit):
    model = kit.llama()
    model.save_pretrained("output/checkpoint-20")
    model.config.save_pretrained("output")


def _load(kit, where):
    from transformers import AutoModelForCausalLM

    tok = kit.tokenizer()
    model = AutoModelForCausalLM.from_pretrained(where).to(kit.device).eval()
    kit.result(loaded=True)
    kit.generate(model, tok)


def config_only_dir(kit):
    _save_run(kit)
    _load(kit, "output")


def checkpoint_dir(kit):
    _save_run(kit)
    _load(kit, "output/checkpoint-20")


def offline_uncached(kit):
    _load(kit, REPO)


def seeded_cache(kit):
    """Place a local copy in the hub cache layout, as `hf download` would have left it."""
    import os

    from huggingface_hub import constants

    rev = "0123456789abcdef0123456789abcdef01234567"
    repo_dir = os.path.join(constants.HF_HUB_CACHE, "models--" + REPO.replace("/", "--"))
    snap = os.path.join(repo_dir, "snapshots", rev)
    kit.llama().save_pretrained(snap)
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", "main"), "w") as f:
        f.write(rev)
    print(f"seeded {REPO} at {os.path.relpath(snap)}")
    _load(kit, REPO)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
