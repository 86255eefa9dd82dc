"""Damaged data shard: a .jsonl.gz shard cut short by an interrupted download aborts loading."""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="data-corrupt",
        module=__name__,
        category="data-corrupt",
        rules=("compressed-shard-truncated",),
        devices=("cpu",),
        description="Three gzip JSONL shards; the last was only partly downloaded, so reading it hits EOF mid-stream",
        fail=Variant("truncated-shard", "train straight from the shards, one of them truncated"),
        fixes=(Variant("spot-check-refetch", "test every shard (decompress + parse each line) before training and "
                       "fetch the damaged one again from the pristine source"),),
        checks=(checks.completed, checks.finite_losses),
    ),
]

N_SHARDS = 3
ROWS = 400


def _prepare(kit):
    """A 'remote' copy of the dataset and a local download in which the last shard was interrupted."""
    import gzip
    import json
    import random
    from pathlib import Path

    remote, local = Path("remote"), Path("data")
    remote.mkdir(exist_ok=True)
    local.mkdir(exist_ok=True)
    rng = random.Random(0)
    for s in range(N_SHARDS):
        name = f"train-{s:05d}-of-{N_SHARDS:05d}.jsonl.gz"
        with gzip.open(remote / name, "wt", encoding="utf-8") as f:
            for i in range(ROWS):
                row = {"id": f"{s}-{i}", "instruction": kit.text(8, seed=rng.randrange(10**6)),
                       "output": kit.text(12, seed=rng.randrange(10**6))}
                f.write(json.dumps(row) + "\n")
        blob = (remote / name).read_bytes()
        if s == N_SHARDS - 1:  # the download of the last shard was interrupted part-way
            blob = blob[: len(blob) * 3 // 5]
        (local / name).write_bytes(blob)
        print(f"Downloading {name}: {len(blob)} bytes")
    return remote, local


def _read_shards(local):
    import gzip
    import json

    rows = []
    for path in sorted(local.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                rows.append(json.loads(line))
        print(f"loaded {path.name}: {len(rows)} rows so far")
    return rows


def _check_shard(path) -> str | None:
    """Decompress the whole shard and parse every line; the problem, or None."""
    import gzip
    import json

    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                json.loads(line)
    except (EOFError, OSError, ValueError) as exc:
        return str(exc)
    return None


def _train(kit, rows, steps=2):
    import torch

    tok = kit.tokenizer(model_max_length=32)
    model = kit.llama().to(kit.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    texts = [r["instruction"] + " " + r["output"] for r in rows]
    losses = []
    for step in range(1, steps + 1):
        batch = tok(texts[(step - 1) * 8: step * 8], padding=True, truncation=True, return_tensors="pt", return_token_type_ids=False).to(kit.device)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        print(f"step {step}: loss {loss.item():.4f}")
        kit.result(losses=losses)


def truncated_shard(kit):
    _, local = _prepare(kit)
    rows = _read_shards(local)
    _train(kit, rows)


def spot_check_refetch(kit):
    import shutil

    remote, local = _prepare(kit)
    for path in sorted(local.glob("*.jsonl.gz")):
        problem = _check_shard(path)
        if problem is None:
            print(f"ok   {path.name}")
            continue
        print(f"BAD  {path.name}: {problem}; fetching it again")
        shutil.copyfile(remote / path.name, path)  # re-download (resume) from the source
        problem = _check_shard(path)
        if problem is not None:
            raise SystemExit(f"{path.name} is still damaged after re-download: {problem}")
        print(f"ok   {path.name} (re-fetched)")
    rows = _read_shards(local)
    kit.result(rows=len(rows))
    _train(kit, rows)


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
