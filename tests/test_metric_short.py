"""Short-window divergence (detect/metric_short.py): a large shift seen in four records."""
from __future__ import annotations

import llmtriage


def _log(losses: list[float], head: str = "") -> str:
    return head + "".join(f"{{'loss': {x}, 'learning_rate': 0.0002, 'epoch': {i / 100:.2f}}}\n"
                          for i, x in enumerate(losses))


def _top(text: str):
    found = [f for f in llmtriage.analyze(text).findings if f.severity == "error"]
    return found[0] if found else None


def test_four_records_each_higher_ending_tenfold_is_a_divergence():
    top = _top(_log([2.183, 3.385, 9.204, 50.79]))
    assert top is not None and top.rule_id == "metric-loss-diverging" and top.category == "nan-loss"


def test_a_short_climb_below_tenfold_or_back_under_the_start_is_not():
    assert _top(_log([2.1, 2.6, 3.4, 5.0])) is None                          # 2.4x: noise a short window cannot tell
    assert _top(_log([2.0, 1.2, 0.6, 0.05, 0.09, 0.2, 0.6, 0.9, 1.3])) is None   # a bounce from a low, below where it began


def test_a_level_shift_that_never_came_back_needs_only_four_records():
    base = [1.81, 1.02, 0.86, 0.82, 0.80, 0.79, 0.81, 0.78]
    top = _top(_log(base + [6.22, 6.19, 6.25, 6.20]))
    assert top is not None and top.rule_id == "metric-loss-jumped-and-stayed"
    assert _top(_log(base + [6.22, 6.19, 1.9, 6.20])) is None                # one record came back: not a clean shift
    assert _top(_log(base + [6.22, 6.19, 6.25])) is None                     # three records are too few


def test_rl_losses_are_left_alone():
    text = "".join(f"{{'loss': {x}, 'reward': 0.5, 'kl': 0.01, 'epoch': 0.1}}\n" for x in [0.1, 0.3, 1.2, 4.0])
    assert _top(text) is None


def _eval(loss: float, epoch: float) -> str:
    return f"{{'eval_loss': {loss}, 'eval_runtime': 40.1, 'epoch': {epoch}}}\n"


def test_train_loss_a_third_of_a_flat_eval_loss_inside_the_first_epoch():
    """detect/metric_gap.py: three evaluations inside the first epoch, the training loss <= eval / 3 at each."""
    rows = [(1.70, 0.0), (1.11, 0.04), (0.62, 0.09), (0.44, 0.13), (0.36, 0.17)]
    text = "".join(f"{{'loss': {x}, 'grad_norm': 1.5, 'learning_rate': 2e-05, 'epoch': {e}}}\n" for x, e in rows)
    text += _eval(1.4108, 0.2) + "{'loss': 0.31, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': 0.34}\n"
    text += _eval(1.3862, 0.4) + "{'loss': 0.28, 'grad_norm': 1.0, 'learning_rate': 2e-05, 'epoch': 0.56}\n"
    top = _top(text + _eval(1.3755, 0.6))
    assert top is not None and top.rule_id == "metric-train-loss-far-below-eval" and top.category == "loss-suspicious"
    # past the first epoch the model has seen every batch: a gap is overfitting, not this finding
    later = text.replace("'epoch': 0.56", "'epoch': 1.56")
    assert _top(later + _eval(1.3755, 1.6)) is None
    # the evaluation loss followed the training loss down: the gap is closing, nothing to report
    assert _top(text + _eval(1.05, 0.6)) is None
