"""Loss that looks too good: every supervised target is the same placeholder token.

An SFT preprocessing function reads the answer from the wrong field and falls back to the
tokenizer's placeholder token, so the only supervised tokens are ``<unk> </s>`` in every
example. The Trainer's loss drops from ~4.5 to near zero within a few dozen steps while the
model learns nothing; the post-training smoke test (answer held-out prompts) shows it.
"""
from __future__ import annotations

try:
    from ._harness import Scenario, Variant, checks
except ImportError:  # run as a script in the child
    from _harness import Scenario, Variant, checks

SCENARIOS = [
    Scenario(
        name="loss-suspicious",
        module=__name__,
        category="loss-suspicious",
        rules=("metric-fast-fall", "trainer-loss-near-zero-early"),
        devices=("cpu",),
        description="HF Trainer SFT whose preprocessing falls back to a placeholder answer for every example",
        fail=Variant("placeholder-targets", "answer read from a missing field -> every target is <unk>; the "
                     "smoke test after training fails", timeout=300.0),
        fixes=(Variant("real-targets", "read the answer from the right field (labels = real answer tokens)",
                       timeout=300.0),),
        checks=(checks.completed, checks.finite_losses),
    ),
]

MAX_STEPS = 100


def _rows(kit, n=4000):
    import random

    rng = random.Random(0)
    return [{"instruction": kit.text(10, seed=rng.randrange(10**6)),
             "response": kit.text(6, seed=rng.randrange(10**6))} for _ in range(n)]


def _run(kit, answer_key: str):
    import sys

    import torch
    from transformers import Trainer, TrainingArguments

    tok = kit.tokenizer(model_max_length=32)
    rows = _rows(kit)

    def preprocess(ex):
        prompt = tok(ex["instruction"], add_special_tokens=False)["input_ids"]
        answer = ex.get(answer_key) or tok.unk_token  # BUG in the failing variant: the field is "response"
        target = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        ids = [tok.bos_token_id] + prompt + target
        return {"input_ids": ids, "labels": [-100] * (1 + len(prompt)) + target}

    train = [preprocess(r) for r in rows]
    ex = train[0]
    shown = [t for t, l in zip(ex["input_ids"], ex["labels"]) if l != -100]
    print("example 0 supervised tokens:", tok.decode(shown))

    def collate(batch):
        n = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), n), tok.pad_token_id)
        labels = torch.full((len(batch), n), -100)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        for i, b in enumerate(batch):
            k = len(b["input_ids"])
            ids[i, :k] = torch.tensor(b["input_ids"])
            labels[i, :k] = torch.tensor(b["labels"])
            mask[i, :k] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    model = kit.llama()
    args = TrainingArguments(
        output_dir="out", per_device_train_batch_size=8, max_steps=MAX_STEPS, learning_rate=2e-3,
        lr_scheduler_type="constant", logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=kit.device == "cpu", seed=0, dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=collate)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    kit.result(losses=losses)

    # smoke test: answer a few held-out prompts
    model.eval()
    answers = []
    for r in _rows(kit, 3 + 4000)[-3:]:
        enc = tok(tok.bos_token + " " + r["instruction"], add_special_tokens=False, return_tensors="pt", return_token_type_ids=False).to(model.device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=6, min_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id)
        new = out[0, enc["input_ids"].shape[1]:]
        text = tok.decode(new, skip_special_tokens=True).strip()
        print(f"prompt: {r['instruction']!r} -> answer: {tok.decode(new)!r}")
        answers.append(text)
    kit.result(generated=" | ".join(answers))
    if not any(answers):
        print(f"smoke test failed: {len(answers)}/{len(answers)} held-out prompts answered with placeholder tokens only "
              f"(final train loss {losses[-1]:.4f})")
        sys.exit(1)


def placeholder_targets(kit):
    _run(kit, answer_key="output")


def real_targets(kit):
    _run(kit, answer_key="response")


if __name__ == "__main__":
    from _child import run_main

    run_main(globals())
