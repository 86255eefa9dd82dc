"""detect/metric_uniform.py (a loss parked at ln(vocab) while the optimizer steps), metric_start.low_start on a
fixed-decimal table that prints ~0 and -0, and untrained_start's Megatron load cues."""
from __future__ import annotations

import math


def _megatron(losses: list[float], head: str = " > padded vocab (size: 128256) with 0 dummy tokens (new size: 128256)\n",
              grad: float = 3.6, every: int = 5) -> str:
    lines = [head, "training ...\n"]
    for i, loss in enumerate(losses):
        it = 1 + i * every
        lines.append(f" iteration {it:8d}/    2000 | consumed samples: {it * 256:12d} | elapsed time per iteration (ms): 24950.1 | "
                     f"learning rate: 3.000000E-04 | global batch size:   256 | lm loss: {loss:.6E} | loss scale: 1.0 | "
                     f"grad norm: {grad:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    return "".join(lines)


def _flat(n: int, level: float) -> list[float]:
    return [level + 0.01 * math.sin(i) for i in range(n)]


def test_a_loss_parked_at_ln_vocab_while_the_optimizer_steps_is_no_grad():
    import llmtriage

    rep = llmtriage.analyze(_megatron(_flat(44, 11.92)))
    [f] = [f for f in rep.findings if f.rule_id == "metric-loss-at-uniform"]
    assert (f.category, f.severity) == ("no-grad", "error")
    assert "ln(128256) = 11.76" in f.message and "3.6" in f.message
    zh = llmtriage.analyze(_megatron(_flat(44, 11.92)), lang="zh")
    assert any(g.rule_id == "metric-loss-at-uniform" and "ln(128256)" in g.message for g in zh.findings)


def test_a_run_that_leaves_the_uniform_level_or_logs_no_vocabulary_is_left_alone():
    import llmtriage

    # from scratch: starts at ln(V) and falls (a healthy pre-training start, warm-up included)
    falling = [11.9 - 4.0 * (1 - math.exp(-i / 8)) for i in range(44)]
    assert not any(f.rule_id == "metric-loss-at-uniform" for f in llmtriage.analyze(_megatron(falling)).findings)
    # flat, but too short a span to say the run is not still warming up
    short = _megatron(_flat(25, 11.92), every=1)
    assert not any(f.rule_id == "metric-loss-at-uniform" for f in llmtriage.analyze(short).findings)
    # flat far below ln(V): a plateau of a model that learned (another detector's business)
    assert not any(f.rule_id == "metric-loss-at-uniform" for f in llmtriage.analyze(_megatron(_flat(44, 2.4))).findings)
    # no vocabulary size printed: ln(V) is unknown
    bare = _megatron(_flat(44, 11.92), head="building GPT model ...\n")
    assert not any(f.rule_id == "metric-loss-at-uniform" for f in llmtriage.analyze(bare).findings)
    # grad norm 0 on every record: nothing moves, the zero-gradient reading (not this detector) tells it
    zero = llmtriage.analyze(_megatron(_flat(44, 11.92), grad=0.0))
    assert not any(f.rule_id == "metric-loss-at-uniform" for f in zero.findings)


def test_a_fine_tune_table_printing_zero_and_minus_zero_from_step_one_is_loss_suspicious():
    import llmtriage

    vals = ["0.000000", "0.000000", "-0.000000", "0.000100", "0.000000", "-0.000100", "0.000000", "0.000000",
            "0.000000", "0.000000", "-0.000000", "0.000000"]
    log = "Step\tTraining Loss\n" + "".join(f"{i}\t{v}\n" for i, v in enumerate(vals, 1))
    [f] = [f for f in llmtriage.analyze(log).findings if f.rule_id == "metric-loss-near-zero-from-start"]
    assert (f.category, f.severity) == ("loss-suspicious", "error")
    # a policy loss that swings around 0 with either sign (an RL learner's own print) is no cross-entropy near 0
    swing = "".join(f"step: {i} | loss: {v:.4f} | grad_norm: 0.3 | entropy: 0.8\n"
                    for i, v in enumerate([-0.0002, 0.0001, -0.0004, -0.0009, 0.0008, 0.001, -0.0011, 0.0003, 0.0009, -0.0004], 1))
    assert not any(f.rule_id == "metric-loss-near-zero-from-start" for f in llmtriage.analyze(swing).findings)
    # a real loss that falls is no start near 0
    ok = "Step\tTraining Loss\n" + "".join(f"{i}\t{2.0 / i:.6f}\n" for i in range(1, 13))
    assert not any(f.rule_id == "metric-loss-near-zero-from-start" for f in llmtriage.analyze(ok).findings)


def test_megatron_weights_loaded_at_iteration_zero_count_as_a_pretrained_start():
    import llmtriage

    head = (" > padded vocab (size: 151936) with 0 dummy tokens (new size: 151936)\n"
            "  successfully loaded checkpoint from /ckpt/qwen-mcore [ t 1/1, p 1/1 ] at iteration 0\n")
    start = [13.2 - 0.08 * i for i in range(30)]
    rep = llmtriage.analyze(_megatron(start, head=head, grad=20.0))
    assert any(f.rule_id == "metric-loss-starts-untrained" and f.severity == "error" for f in rep.findings)
    # a resumed pre-training run loads its own checkpoint at a later iteration: not a pretrained start
    resumed = head.replace("at iteration 0", "at iteration 400")
    rep = llmtriage.analyze(_megatron(start, head=resumed, grad=20.0))
    assert not any(f.rule_id == "metric-loss-starts-untrained" for f in rep.findings)


def _meter(losses: list[float]) -> str:
    """A custom loop's print (no gradient norm): `Epoch 0 batch N loss X`."""
    return "".join(f"Epoch [1/5] step {i} train_loss {loss!r}\n" for i, loss in enumerate(losses))


def test_a_blind_loss_that_underflows_to_exact_zero_inside_the_first_epoch_is_a_collapse():
    import llmtriage

    # a binary task falls from ln 2 through 1e-3, 1e-5, 1e-7 and then prints exact zeros between tiny values
    falling = [0.66, 0.45, 0.2, 0.05, 0.003, 4e-4, 2.5e-05, 3e-06]
    tail = [0.0, 0.0, 4.9e-07, 0.0, 6.1e-07, 0.0, 0.0, 6.5e-07, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    rep = llmtriage.analyze(_meter(falling + tail))
    hits = [f for f in rep.findings if f.rule_id == "metric-loss-collapse"]
    assert len(hits) == 1 and (hits[0].category, hits[0].severity) == ("loss-suspicious", "error")
    # a real loss that jumps to an exact 0 and stays there (a mean over no token, a hidden NaN) is not this reading
    jump = [0.66, 0.65, 0.64, 0.63, 0.62, 0.61, 0.6, 0.6] + [0.0] * 16
    assert not any(f.rule_id == "metric-loss-collapse" for f in llmtriage.analyze(_meter(jump)).findings)


def _epoch_bars(losses: list[float]) -> str:
    """One tqdm bar per epoch, printed at 100% (the bar's counter restarts every epoch), then a summary line."""
    out = []
    for e, loss in enumerate(losses, 1):
        out.append(f"Epoch {e}/100: 100%|##########| 14658/14658 [12:40<00:00, 11.07it/s, loss={loss:.3f}, lr=0.000100]\n")
        out.append(f"Epoch {e}/100: 100%|##########| 619/619 [00:41<00:00, 15.02it/s, val_loss={loss - 0.01:.3f}]\n")
    return "".join(out)


def test_a_loss_that_never_moves_over_whole_epochs_from_the_first_is_stuck():
    import llmtriage

    flat = [5.85 + 0.005 * math.sin(i) for i in range(36)]
    [f] = [f for f in llmtriage.analyze(_epoch_bars(flat)).findings if f.rule_id == "metric-loss-stuck-from-start"]
    assert (f.category, f.severity) == ("no-grad", "error")
    # a loss that keeps falling epoch after epoch trains
    falling = [5.85 * 0.97 ** i for i in range(36)]
    assert not any(f.rule_id == "metric-loss-stuck-from-start" for f in llmtriage.analyze(_epoch_bars(falling)).findings)
    # a flat stretch of only a few epochs is not enough evidence
    assert not any(f.rule_id == "metric-loss-stuck-from-start" for f in llmtriage.analyze(_epoch_bars(flat[:8])).findings)
