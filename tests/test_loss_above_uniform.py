"""detect/loss_above_uniform.py: a fine-tune whose first losses sit above ln(vocab) logs a scaled loss."""
from __future__ import annotations


def _swift(losses: list[float], head: str = "") -> str:
    lines = [head, "[INFO:swift] Loading the model using model_dir: /models/Qwen2-7B-Instruct\n",
             "Loading checkpoint shards: 100%|##########| 4/4 [00:06<00:00,  1.52s/it]\n"]
    lines += [f"{{'loss': {loss:.5f}, 'acc': 0.52, 'grad_norm': 9.1, 'learning_rate': 9.9e-05, 'epoch': {i / 100:.2f}, "
              f"'global_step/max_steps': '{i}/371'}}\n" for i, loss in enumerate(losses, 1)]
    return "".join(lines)


def test_a_loss_above_a_uniform_guess_is_scaled_and_named_by_the_transformers_release():
    import llmtriage

    losses = [22.58, 21.94, 19.20, 17.85, 17.11, 16.79, 16.42, 16.20]
    plain = llmtriage.analyze(_swift(losses))
    [f] = [f for f in plain.findings if f.rule_id == "metric-loss-above-uniform"]
    assert (f.category, f.severity, f.line) == ("loss-suspicious", "error", 3)
    named = llmtriage.analyze(_swift(losses, "# ms-swift 2.5.1, transformers 4.46.0, torch 2.4.0\n"))
    [g] = [g for g in named.findings if g.rule_id == "metric-loss-above-uniform"]
    assert g.category == "dependency-mismatch" and "transformers 4.46.0" in g.message and "{" not in g.title
    zh = llmtriage.analyze(_swift(losses, "transformers==4.46.1\n"), lang="zh")
    assert any(h.rule_id == "metric-loss-above-uniform" and "transformers==4.46.1" in h.message for h in zh.findings)


def test_ordinary_fine_tunes_and_runs_without_a_pretrained_load_are_left_alone():
    import llmtriage

    normal = llmtriage.analyze(_swift([2.41, 2.30, 2.25, 2.20, 2.15, 2.10]))
    assert not any(f.rule_id == "metric-loss-above-uniform" for f in normal.findings)
    # one spike above the bound among ordinary losses is not a scaled loss
    spike = llmtriage.analyze(_swift([2.41, 15.3, 2.25, 2.20, 2.15, 2.10]))
    assert not any(f.rule_id == "metric-loss-above-uniform" for f in spike.findings)
    scratch = "".join(f"{{'loss': {loss:.3f}, 'grad_norm': 3.0, 'learning_rate': 1e-4, 'epoch': 0.{i}}}\n"
                      for i, loss in enumerate([16.0, 15.8, 15.5, 15.1, 14.9, 14.5], 1))
    assert not any(f.rule_id == "metric-loss-above-uniform" for f in llmtriage.analyze(scratch).findings)
