"""LlmtriageCallback in a real transformers Trainer on the CPU (tiny random GPT-2, no downloads)."""
from __future__ import annotations

import io

import pytest

# Real Trainer runs: the slow tier. torch/transformers are imported by the tests, not at collection,
# so that the fast tier (`-m "not slow"`) never pays for importing them.
pytestmark = pytest.mark.slow


def _data(torch, n: int, seq: int, vocab: int, labels: str):
    class _Data(torch.utils.data.Dataset):
        def __init__(self):
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(0, vocab, (n, seq), generator=g)

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict:
            ids = self.ids[i]
            # "none": every label masked (-100) - no supervised token, the classic silent failure
            lab = ids.clone() if labels == "ok" else torch.full_like(ids, -100)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": lab}

    return _Data()


def _train(tmp_path, labels: str, action: str, max_steps: int = 12, poison_at: int = 0):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    pytest.importorskip("accelerate")   # the Trainer needs it (extra `repro`)
    from llmtriage.workflows.integrations import LlmtriageCallback

    torch.manual_seed(0)
    torch.set_num_threads(1)
    cfg = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=1, n_head=2,
                                bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / labels), max_steps=max_steps, per_device_train_batch_size=4, logging_steps=1,
        learning_rate=1e-3, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=0)
    stream = io.StringIO()
    cb = LlmtriageCallback(action=action, stream=stream)
    class Poison(transformers.TrainerCallback):   # a diverged run: NaN weights from step `poison_at` on
        def on_step_end(self, args, state, control, model=None, **kw):
            if poison_at and state.global_step == poison_at:
                with torch.no_grad():
                    model.transformer.ln_f.weight.fill_(float("nan"))

    trainer = transformers.Trainer(model=model, args=args, train_dataset=_data(torch, 64, 16, 64, labels),
                                   callbacks=[Poison(), cb])
    trainer.train()
    return trainer, cb, stream.getvalue()


def test_callback_stops_a_run_with_no_supervised_tokens_and_stays_quiet_on_a_healthy_one(tmp_path):
    trainer, cb, out = _train(tmp_path, "none", "stop")
    ids = {f.rule_id for f in cb.findings}
    # all labels masked: the loss is NaN (or 0) and grad_norm NaN/0 - caught, training stopped early
    assert ids & {"trainer-loss-nan", "trainer-grad-norm-nan", "trainer-zero-loss-zero-grad",
                  "trainer-flat-loss-zero-grad"}, (ids, trainer.state.log_history)
    assert cb.stopped_by is not None and cb.stopped_by.severity == "error"
    assert trainer.state.global_step < 12
    assert "llmtriage: error [" in out

    trainer, cb, out = _train(tmp_path, "ok", "warn", max_steps=6)
    assert trainer.state.global_step == 6
    assert [f for f in cb.findings if f.severity == "error"] == [], [f.rule_id for f in cb.findings]


def test_callback_stops_on_nan_after_divergence(tmp_path):
    trainer, cb, out = _train(tmp_path, "ok", "stop", max_steps=12, poison_at=3)
    assert cb.stopped_by is not None and cb.stopped_by.category == "nan-loss", [f.rule_id for f in cb.findings]
    assert 3 < trainer.state.global_step < 12
