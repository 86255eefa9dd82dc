"""detect/new_keys_trained.py: newly initialised weights followed by training from a pretrained loss are added modules."""
from __future__ import annotations


def _log(keys: str, losses: list[float], head: str = "") -> str:
    lines = [head, "Loading checkpoint shards: 100%|##########| 3/3 [00:07<00:00,  2.44s/it]\n",
             "Some weights of MistralForCausalLM were not initialized from the model checkpoint at "
             f"mistralai/Mistral-7B-v0.1 and are newly initialized: [{keys}]\n",
             "You should probably TRAIN this model on a down-stream task to be able to use it for predictions and inference.\n",
             "***** Running training *****\n", "  Num examples = 90,412\n", "  Total optimization steps = 11,302\n"]
    lines += [f"{{'loss': {loss:.4f}, 'grad_norm': 1.1, 'learning_rate': 4.9e-05, 'epoch': {i / 100:.2f}}}\n"
              for i, loss in enumerate(losses, 1)]
    return "".join(lines)


_ADDED = "'model.layers.0.self_attn.extra_k_proj.weight', 'model.layers.0.self_attn.extra_v_proj.weight'"


def _finding(report):
    [f] = [f for f in report.findings if f.rule_id == "hf-core-weights-newly-initialized"]
    return f


def test_added_modules_trained_from_a_pretrained_loss_are_a_warning():
    import llmtriage

    report = llmtriage.analyze(_log(_ADDED, [2.56, 2.54, 2.49, 2.46, 2.45, 2.43, 2.37, 2.32]))
    f = _finding(report)
    assert f.severity == "warning" and f.judgement["context"] == "new-keys-trained"
    assert "2.56" in f.judgement["reason"]
    assert not any(g.severity == "error" for g in report.findings)
    zh = _finding(llmtriage.analyze(_log(_ADDED, [2.56, 2.54, 2.49, 2.46, 2.45, 2.43]), lang="zh"))
    assert zh.severity == "warning" and "预训练" in zh.judgement["reason"]


def test_random_core_weights_a_rising_loss_or_no_training_stay_errors():
    import llmtriage

    # a random lm_head: the first loss is a uniform guess over 32k tokens (ln 32000 = 10.4)
    head = "'lm_head.weight'"
    assert _finding(llmtriage.analyze(_log(head, [10.6, 9.8, 9.1, 8.7, 8.2, 7.9]))).severity == "error"
    # the vocabulary size printed: the bound follows it (0.45 x ln(152064) = 5.4); 6.1 is above it
    vocab = "  \"vocab_size\": 152064\n"
    assert _finding(llmtriage.analyze(_log(_ADDED, [6.1, 5.9, 5.8, 5.6, 5.5, 5.4], vocab))).severity == "error"
    # the loss rose over the run: not a run that trained normally
    assert _finding(llmtriage.analyze(_log(_ADDED, [2.5, 2.7, 3.1, 3.6, 4.2, 4.9]))).severity == "error"
    # too few records after the line: no judgement
    assert _finding(llmtriage.analyze(_log(_ADDED, [2.5, 2.4, 2.3]))).severity == "error"
