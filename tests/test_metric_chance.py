"""Every evaluation of a two-way (reward / preference / binary) model at chance (detect/metric_chance.py)."""
from __future__ import annotations

import llmtriage


def _run(train: list[float], evals: list[tuple[float, float]], per_eval: int = 2) -> str:
    """Trainer dicts: `per_eval` training records, then one evaluation (loss, accuracy)."""
    out = []
    for i, x in enumerate(train):
        ep = (i + 1) * 0.02
        out.append(f"{{'loss': {x:.4f}, 'learning_rate': 1e-05, 'epoch': {ep:.2f}}}\n")
        k = (i + 1) // per_eval
        if (i + 1) % per_eval == 0 and k <= len(evals):
            loss, acc = evals[k - 1]
            out.append(f"{{'eval_loss': {loss:.4f}, 'eval_accuracy': {acc:.4f}, 'eval_runtime': 211.5, 'epoch': {ep:.2f}}}\n")
    return "".join(out)


def _errors(text: str):
    return [f for f in llmtriage.analyze(text.encode()).findings if f.severity == "error"]


_CHANCE = [(0.6954, 0.5096), (0.6914, 0.5026), (0.6930, 0.4925), (0.6961, 0.5052), (0.6922, 0.4967),
           (0.6948, 0.5120), (0.6935, 0.4889), (0.6931, 0.5021)]


def test_a_reward_model_at_chance_at_every_evaluation_learns_nothing():
    # the training loss falls: the parameters train (it memorises the pairs), nothing reaches held-out pairs,
    # which no taxonomy category names
    train = [0.69 - 0.012 * i for i in range(16)]
    errs = _errors(_run(train, _CHANCE))
    assert errs and errs[0].rule_id == "metric-eval-at-chance" and errs[0].category == "unknown"
    assert "8 evaluations" in errs[0].message and "0.4889" in errs[0].message
    # the training loss flat at ln 2 too, with gradients: nothing is trained at all
    flat = [0.6931 + (0.002 if i % 2 else -0.002) for i in range(16)]
    errs = _errors(_run(flat, _CHANCE))
    assert errs and errs[0].category == "no-grad", [(e.rule_id, e.category) for e in errs]


def test_a_reward_model_that_starts_at_chance_and_improves_is_healthy():
    improving = [(0.6931, 0.50), (0.6870, 0.54), (0.6712, 0.58), (0.6540, 0.61), (0.6410, 0.63),
                 (0.6350, 0.64), (0.6301, 0.65), (0.6270, 0.655)]
    train = [0.69 - 0.01 * i for i in range(16)]
    assert not any(e.rule_id == "metric-eval-at-chance" for e in _errors(_run(train, improving)))
    # a few evaluations only: too early to say
    assert not any(e.rule_id == "metric-eval-at-chance" for e in _errors(_run(train[:6], _CHANCE[:3])))
    # at ln 2 but with an accuracy far from 0.5 (an imbalanced set): not a coin flip
    skewed = [(loss, 0.71 + 0.001 * i) for i, (loss, _) in enumerate(_CHANCE)]
    assert not any(e.rule_id == "metric-eval-at-chance" for e in _errors(_run(train, skewed)))
