"""Detectors over a `MetricTracker`'s series: NaN (shown or hidden as 0), fp16 overflow and skipped
optimizer steps, flat loss, zero gradients, zero learning rate, repeating epochs, fast fall and
collapse to zero, spikes. Each returns `Anomaly` records; `metric_findings` turns them into findings
with the texts of rules/detectors.yaml. Thresholds: `metrics.Thresholds` (docs/METRICS.md).
"""
from __future__ import annotations

import math
from typing import Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.metric_eval import eval_frozen
from llmtriage.detect.metric_leak import first_epoch_low
from llmtriage.detect.metric_memorise import memorised
from llmtriage.detect.metric_parse import Record
from llmtriage.detect.metric_reward_spread import reward_flat
from llmtriage.detect.metric_short import short_diverge, short_jump
from llmtriage.detect.metric_skips import scaler_recovered
from llmtriage.detect.metric_start import low_start, stuck
from llmtriage.detect.metric_zero import nan_hidden, rounded_zero
from llmtriage.detect.metrics import MetricTracker, finite

__all__ = ["Anomaly", "fmt", "RULE_IDS", "PRIORITY", "detect"]


RULE_IDS = {"nan": "metric-nan-loss", "nan_hidden": "metric-nan-hidden-as-zero", "zero_start": "metric-loss-zero-from-start", "overflow": "metric-fp16-overflow",
            "no_step": "metric-fp16-no-step", "lr_zero_fp16": "metric-fp16-lr-never-stepped",
            "flat": "metric-flat-loss", "zero_grad": "metric-zero-grad", "zero_grad_late": "metric-zero-grad-late", "lr_zero": "metric-zero-lr",
            "repeat": "metric-epoch-repeats", "fall": "metric-fast-fall", "collapse": "metric-loss-collapse",
            "overfit": "metric-tiny-data-memorised", "spike": "metric-loss-spike",
            "diverge": "metric-loss-diverging", "throughput": "metric-throughput-low",
            "meg_noloss": "metric-megatron-loss-missing", "low_start": "metric-loss-near-zero-from-start", "stuck": "metric-loss-stuck-from-start", "jump": "metric-loss-jumped-and-stayed",
            "eval_frozen": "metric-eval-loss-frozen", "lr_dead": "metric-lr-zero-early", "grad_climb": "metric-grad-norm-climbing",
            "grad_runaway": "metric-grad-norm-runaway",
            "zero_graded": "metric-loss-zero-with-gradient", "zero_masked": "metric-loss-zero-mid-run", "first_jump": "metric-loss-jumped-after-first-update",
            "zero_unsup": "metric-loss-zero-no-label-token", "zero_blown": "metric-loss-zero-after-grad-explosion", "xla_recompile": "metric-xla-recompiling",
            "step_untimed": "metric-step-time-untimed", "comm_bound": "metric-allreduce-dominates-step", "first_epoch_low": "metric-loss-near-zero-first-epoch",
            "guard_skip": "metric-guard-skips-every-step", "val_perfect": "metric-validation-perfect-early",
            "step_wait": "metric-step-wait-dominates", "scaling": "metric-more-gpus-no-faster", "mfu_low": "metric-mfu-far-below-peak",
            "creep": "metric-loss-creeping-up", "resume_drop": "metric-loss-dropped-at-resume", "resume_reset": "metric-loss-reset-at-resume", "zero_perfect": "metric-loss-zero-perfect-accuracy",
            "zero_rounded": "metric-loss-below-print-precision", "lr_floor": "metric-lr-floor-early",
            "lr_tiny": "metric-lr-too-small", "eval_perfect": "metric-eval-perfect-early",
            "eval_summary_frozen": "metric-eval-summary-frozen", "alloc_thrash": "metric-allocator-retries-growing",
            "reward_flat": "metric-rl-rewards-no-spread", "eval_gap": "metric-train-loss-far-below-eval",
            "overfit_eval": "metric-eval-loss-rising-overfit", "bar_decay": "metric-progress-rate-collapsing",
            "caught_repeat": "metric-caught-exception-repeats", "eval_chance": "metric-eval-at-chance",
            "zero_fp16": "metric-loss-plunged-to-zero-fp16", "creep_graded": "metric-loss-rising-first-epoch", "creep_pass": "metric-loss-rising-single-pass",
            "stated_speed": "metric-slower-than-stated-speed"}
# "no optimizer step ever ran" (fp16 skip counters, or lr 0 on every record of an fp16 run) outranks a
# signature that reads the same records as a NaN (trainer-grad-norm-nan, 62): it names why they are NaN
PRIORITY = {"nan": 58, "nan_hidden": 57, "zero_start": 56, "overflow": 50, "no_step": 64, "lr_zero_fp16": 63, "flat": 45,
            "zero_grad": 47, "zero_grad_late": 47, "lr_zero": 46, "repeat": 46, "fall": 30, "collapse": 32, "overfit": 28, "spike": 10,
            "diverge": 40, "throughput": 20, "meg_noloss": 57, "low_start": 32, "stuck": 44, "jump": 40,
            "eval_frozen": 46, "lr_dead": 46, "grad_climb": 40, "grad_runaway": 40, "zero_graded": 57, "zero_masked": 45, "first_jump": 40,
            "zero_unsup": 56, "zero_blown": 57, "xla_recompile": 20, "step_untimed": 20, "comm_bound": 20, "first_epoch_low": 32,
            "guard_skip": 47, "val_perfect": 32, "step_wait": 20, "scaling": 20, "mfu_low": 20, "creep": 40, "resume_drop": 32, "resume_reset": 46,
            "zero_perfect": 57, "zero_rounded": 45, "lr_floor": 46, "lr_tiny": 46, "eval_perfect": 32, "eval_summary_frozen": 46,
            "alloc_thrash": 24, "reward_flat": 46, "eval_gap": 32, "overfit_eval": 30, "bar_decay": 20, "caught_repeat": 20,
            "eval_chance": 44, "zero_fp16": 56, "creep_graded": 40, "creep_pass": 40, "stated_speed": 20}


def _nan(t: MetricTracker, recs: list[Record]) -> list[Anomaly]:
    if t.first_nonfinite is None:
        return []
    th = t.th
    r = t.first_nonfinite
    last = recs[-1] if recs else r
    last_bad = (last.loss is not None and not math.isfinite(last.loss)) or (
        last.grad_norm is not None and not math.isfinite(last.grad_norm))
    which = "loss" if r.loss is not None and not math.isfinite(r.loss) else "grad_norm"
    value = r.loss if which == "loss" else r.grad_norm
    sev = "error" if (t.nonfinite >= th.nan_error_min or last_bad) else "warning"
    grads = [x.grad_norm for x in recs if x.grad_norm is not None]
    bad_grads, recovered = [x.line for x in recs if x.grad_norm is not None and not math.isfinite(x.grad_norm)], sum(
        1 for a, b in zip(grads, grads[1:]) if not math.isfinite(a) and math.isfinite(b))
    if (which == "grad_norm" and not last_bad and bad_grads and not any(x.loss is not None and not finite(x.loss) for x in recs)
            and (sum(1 for x in recs if x.line > bad_grads[-1] and x.grad_norm is not None) >= 2 or recovered >= 2)):
        # only grad norms went non-finite, now and then, losses all finite: skipped steps (fp16 scaler)
        sev = "warning"
    if not last_bad and scaler_recovered(t, recs):
        sev = "warning"     # the fp16 scaler's overflowing steps, then finite to the end: survived
    lf = t.last_finite if t.last_finite is not None and t.last_finite.line < r.line else None
    return [Anomaly("nan", "nan-loss", sev, r.line, last.line, r.step, t.nonfinite, {
        "metric": which, "value": str(value), "at": r.at, "records": t.count,
        "last_finite_loss": fmt(lf.loss) if lf else None, "last_finite_at": lf.at if lf else None,
        "persists": last_bad})]


def _meg_noloss(t: MetricTracker) -> list[Anomaly]:
    """Megatron iteration lines that stepped (not skipped) but carry no loss, up to the end of the log:
    Megatron prints a loss only when its interval average is > 0, so a NaN loss (or one of exactly 0)
    leaves the line with no loss at all while the run goes on as if healthy."""
    tail = t.meg_noloss_tail
    if tail is None or t.meg_last is None or tail[0] < t.th.zero_min_records:
        return []
    lines, first_line, iters = tail
    return [Anomaly("meg_noloss", "nan-loss", "error", first_line, t.meg_last[1], t.meg_last[0], lines, {
        "records": lines, "iterations": iters, "to": t.meg_last[0],
        "since_start": True if lines == t.meg_noloss and first_line == t.meg_first_line else None,
        "nan_iterations": t.meg_nan_iters or None})]


def _overflow(t: MetricTracker, recs: list[Record]) -> list[Anomaly]:
    th = t.th
    out: list[Anomaly] = []
    # no optimizer step for skip_min steps: DeepSpeed skipped == step, Megatron skipped iterations
    if t.ds_skips is not None and t.ds_skips[1] >= th.skip_min and t.ds_skips[1] >= t.ds_skips[0]:
        step, skipped, line = t.ds_skips
        out.append(Anomaly("no_step", "fp16-overflow", "error", t.overflow_first_line or line, line, step, skipped, {
            "skipped": skipped, "steps": step, "scale": fmt(t.min_scale) if t.min_scale is not None else None}))
    elif t.meg_tail_skipped >= th.skip_min and t.meg_last is not None:
        out.append(Anomaly("no_step", "fp16-overflow", "error", t.meg_first_line, t.meg_last[1], t.meg_last[0],
                           t.meg_tail_skipped, {"skipped": t.meg_tail_skipped, "steps": t.meg_last[0],
                                                "scale": fmt(t.min_scale) if t.min_scale is not None else None}))
    if out or t.overflows < th.overflow_min:
        return out
    if t.ds_skips is not None and t.ds_skips[0]:     # overflows per step: the frameworks' own counters first
        ratio = t.ds_skips[1] / t.ds_skips[0]
    elif t.meg_iters:
        ratio = t.meg_skipped / t.meg_iters
    else:   # per record; with few records, a scale grown back above its low means good steps (a scaler grows after 2000)
        grew = t.last_scale is not None and t.min_scale is not None and t.last_scale > t.min_scale and t.count < t.overflows
        ratio = 0.0 if grew else t.overflows / max(1, t.count) if t.count else 1.0
    floor = t.min_scale is not None and t.min_scale <= 1
    # not only start-up calibration: still overflowing in the second half of the logged steps
    persists = not recs or t.overflow_last_line >= (recs[0].line + recs[-1].line) / 2
    if (ratio >= th.overflow_ratio and persists) or floor:
        out.append(Anomaly("overflow", "fp16-overflow", "error", t.overflow_first_line, t.overflow_last_line,
                           None, t.overflows, {"overflows": t.overflows, "records": t.count,
                                               "min_scale": fmt(t.min_scale), "last_scale": fmt(t.last_scale)}))
    return out


def _zero_lr_grad(t: MetricTracker, recs: list[Record]) -> list[Anomaly]:
    """grad_norm exactly 0, or learning rate 0, on every logged step: the weights never move."""
    th = t.th
    if not recs:
        return []
    first, last = recs[0], recs[-1]
    losses = [r.loss for r in recs if finite(r.loss)]
    lo, hi = (min(losses), max(losses)) if losses else (None, None)
    spread = (hi - lo) / abs(hi) if losses and hi else None   # type: ignore[operator]
    same = losses and lo == hi
    base = {"records": None, "from": first.at, "to": last.at, "loss_lo": fmt(lo) if losses and not same else None,
            "loss_hi": fmt(hi) if losses and not same else None, "loss": fmt(lo) if same else None,
            "spread": f"{spread:.1e}" if spread else None, "rl": True if any(r.rl for r in recs) else None}
    # on every record, or on nearly all of many (a step or two with a gradient does not train a model)
    if t.grad_seen >= th.zero_min_records and (t.grad_zero == t.grad_seen or (
            t.grad_seen >= 2 * th.zero_tail_records and t.grad_zero >= th.zero_share * t.grad_seen)):
        return [Anomaly("zero_grad", "no-grad", "error", first.line, last.line, first.step, t.grad_seen,
                        dict(base, records=t.grad_seen, zero_n=t.grad_zero if t.grad_zero < t.grad_seen else None))]
    # grad_norm dropped to exactly 0 and stayed there: the weights stopped moving (GRPO with every
    # reward equal, a broken loss mask after the first steps)
    grads = [r for r in recs if r.grad_norm is not None]
    run = 0
    while run < len(grads) and grads[-1 - run].grad_norm == 0:
        run += 1
    # a shorter run counts when every record of it says why the gradient is 0: RL rewards with no spread in
    # any group (reward_std 0, frac_reward_zero_std 1) leave every advantage at 0, nothing is learned
    explained = run >= th.zero_min_records and all(r.flat_reward for r in grads[len(grads) - run:])
    if (run >= th.zero_tail_records or explained) and 2 * run >= len(grads) and run < len(grads):
        z = grads[-run:]
        zl = [r.loss for r in z if finite(r.loss)]
        zsame = bool(zl) and min(zl) == max(zl)
        return [Anomaly("zero_grad_late", "no-grad", "error", z[0].line, z[-1].line, z[0].step, run,
                        dict(base, records=run, **{"from": z[0].at, "before": fmt(grads[-run - 1].grad_norm), "loss": fmt(zl[0]) if zsame else None,
                             "loss_lo": fmt(min(zl)) if zl and not zsame else None,
                             "loss_hi": fmt(max(zl)) if zl and not zsame else None, "spread": None}))]
    if t.lr_seen >= th.zero_min_records and t.lr_zero == t.lr_seen:
        # in fp16 a learning rate stuck at 0 is the scaler skipping every step, unless the framework's own
        # counter says no step was skipped (Megatron "number of skipped iterations: 0" on every line)
        never_skipped = t.meg_iters > 0 and t.meg_skipped == 0
        kind, cat = ("lr_zero_fp16", "fp16-overflow") if t.fp16 and not never_skipped else ("lr_zero", "no-grad")
        return [Anomaly(kind, cat, "error", first.line, last.line, first.step, t.lr_seen,
                        dict(base, records=t.lr_seen, first_loss=fmt(losses[0]) if losses else None))]
    return []


def _repeat(t: MetricTracker, finite_recs: list[Record]) -> list[Anomaly]:
    """The same loss sequence, value for value, every `period` records (the data repeats each epoch
    and the weights never change). Needs a loss that varies within the period. Not RL: sampled rollouts
    differ every step, so the premise (the same batches in the same order) does not hold."""
    th = t.th
    if t.sampled or any(r.rl for r in finite_recs):
        return []
    xs = [r.loss for r in finite_recs]
    for p in range(3, len(xs) // 2 + 1):
        run = best = 0
        end = 0
        for i in range(p, len(xs)):
            if xs[i] == xs[i - p]:
                run += 1
                if run > best:
                    best, end = run, i
            else:
                run = 0
        if best >= max(th.repeat_min, p):
            seg = xs[end - best + 1 - p:end - best + 1]
            first = finite_recs[end - best + 1]
            e0, e1 = finite_recs[end - best + 1 - p].epoch, first.epoch
            # a real epoch boundary when epochs are logged (fractional epochs advance by ~1 per period)
            epoch_ok = e0 is None or e1 is None or (e1 - e0 >= 0.9 and abs(e1 - e0 - round(e1 - e0)) <= 0.1)
            # a straight line (constant steps) is a trend, not a replayed epoch; a learning rate that
            # varies within the period and repeats with the loss is the same lines logged twice
            a = end - best + 1 - p
            steps = {round(y - x, 9) for x, y in zip(seg, seg[1:])}
            lr0 = [r.lr for r in finite_recs[a:a + p]]
            lr1 = [r.lr for r in finite_recs[a + p:a + 2 * p]]
            replayed = None not in lr0 and len(set(lr0)) > 1 and lr0 == lr1
            if len(set(seg)) >= min(p, 4) and epoch_ok and len(steps) > 1 and not replayed:
                return [Anomaly("repeat", "no-grad", "error", finite_recs[end - best + 1 - p].line,
                                finite_recs[end].line, first.step, best, {
                                    "period": p, "repeated": best, "from": finite_recs[end - best + 1 - p].at,
                                    "again": first.at, "values": ", ".join(fmt(x) for x in seg[:4])})]
    return []


def _flat(t: MetricTracker, finite_recs: list[Record]) -> list[Anomaly]:
    th = t.th
    if t.first_nonfinite is not None or len(finite_recs) < th.flat_min_records:
        return []
    i = len(finite_recs) - th.flat_min_records
    ls = [r.loss for r in finite_recs[i:]]
    lo, hi = min(ls), max(ls)  # type: ignore[type-var]

    def flat(a: float, b: float) -> bool:
        return (b - a) <= th.flat_rel * abs((a + b) / 2) + th.flat_abs

    if not flat(lo, hi):  # type: ignore[arg-type]
        return []
    while i > 0 and flat(min(lo, finite_recs[i - 1].loss), max(hi, finite_recs[i - 1].loss)):  # type: ignore[type-var,arg-type]
        i -= 1
        lo, hi = min(lo, finite_recs[i].loss), max(hi, finite_recs[i].loss)  # type: ignore[type-var]
    run = finite_recs[i:]
    if all(r.rl for r in run) and hi <= th.flat_abs:   # type: ignore[operator]
        return []       # GRPO/PPO: loss 0 while KL is still 0 is by design
    if hi <= th.flat_abs and i > 0 and 0 < finite_recs[i - 1].loss < th.collapse_loss:  # type: ignore[operator]
        return _collapse(t, finite_recs, descended=True)   # it fell into ~0 step by step: trained, onto a shortcut
    grads = [r.grad_norm for r in run if r.grad_norm is not None]
    zero = bool(grads) and all(finite(g) and abs(g) <= th.zero_grad for g in grads)  # type: ignore[arg-type]
    lrs = [r.lr for r in run if r.lr is not None]
    lr_zero = bool(lrs) and all(lr == 0 for lr in lrs)
    # a pairwise preference loss (DPO, a reward model) flat at ln 2 is chance level: chosen and rejected
    # still score the same, the policy never moved from the reference
    chance = abs(hi - math.log(2)) <= 5e-4 and abs(lo - math.log(2)) <= 5e-4  # type: ignore[operator]
    # a supervised loss of exactly 0 on every record is no loss at all: no label token is counted (every label
    # masked, a template that cuts the answer) or a filter zeroes it; a model never reaches an exact 0 on real text
    zero_loss = hi == 0 and lo == 0
    if zero_loss and not grads:
        rounded = rounded_zero(t, finite_recs, i)     # printed 0.000: below the display's precision, not 0
        if rounded:
            return rounded
    return [Anomaly("flat", "no-grad", "error" if (zero or lr_zero or chance or zero_loss) else "warning", run[0].line,
                    run[-1].line, run[0].step, len(run), {"loss": fmt(run[-1].loss), "from": run[0].at, "to": run[-1].at,
                                            "records": len(run), "grad_norm": fmt(grads[-1]) if grads else None,
                                            "grad_zero": zero, "lr_zero": lr_zero, "chance": "ln 2" if chance else None,
                                            "zero_loss": "0" if zero_loss and not zero else None})]


def _by_step(a: Record, b: Record) -> bool:    # a per-epoch bar restarting at 0 leaves only the record count
    return a.step is not None and b.step is not None and (b.step > a.step or b.index == a.index)


def _span(a: Record, b: Record) -> int:
    return (b.step - a.step) if _by_step(a, b) else (b.index - a.index)  # type: ignore[operator]


def _fall(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """Loss from >= fall_from to < fall_below within fall_within steps (the seed's "三分钟掉到 0.1 以下"):
    an error when it goes on below fall_strong while grad_norm stays flat (the model found a shortcut),
    a warning otherwise (a small or easy dataset can fall fast too)."""
    th = t.th
    if t.first_nonfinite is not None or not fin or fin[0].loss < th.fall_from or fin[0].rl:  # type: ignore[operator]
        return []
    first = fin[0]
    for r in fin[1:]:
        span = _span(first, r)
        if span > th.fall_within:
            return []
        if r.loss < th.fall_below:  # type: ignore[operator]
            if r.loss == 0 and finite(r.grad_norm) and r.grad_norm > th.zero_grad:  # type: ignore[operator]
                return []   # exactly 0 with a gradient is no loss a model reached: the Trainer's hidden NaN (metric_zero.nan_hidden)
            span_recs = [x for x in fin if _span(first, x) <= th.fall_within]
            low = min((x.loss for x in span_recs if x.index >= r.index), default=r.loss)  # type: ignore[type-var]
            win = [x.grad_norm for x in span_recs if finite(x.grad_norm)]
            gflat = bool(win) and min(win) > 0 and max(win) / min(win) <= th.grad_flat_ratio  # type: ignore[type-var,operator]
            # two records are a jump, not a fall: an error needs the fall_records_min records up to it
            strong = low <= th.fall_strong and gflat and r.index - first.index + 1 >= th.fall_records_min  # type: ignore[operator]
            return [Anomaly("fall", "loss-suspicious", "error" if strong else "warning", r.line, r.line, r.step, 1, {
                "from_loss": fmt(first.loss), "from": first.at, "loss": fmt(r.loss), "at": r.at, "span": span,
                "grad_flat": gflat, "min_loss": fmt(low),
                "grad_norm": fmt(win[-1]) if win and gflat else None,    # only stated when it stayed flat
                "strong": fmt(th.fall_strong) if strong else None, "within": th.fall_within if strong else None,
                "unit": "steps" if _by_step(first, r) else "records"})]
    return []


BLIND_DROP = 100.0      # _collapse without a gradient norm: the tail at least this many times below the first loss


def _collapse(t: MetricTracker, fin: list[Record], descended: bool = False) -> list[Anomaly]:
    """The last flat_min_records losses under collapse_loss with grad_norm under collapse_grad (not
    all exactly 0: that is zero_grad), from a first loss >= fall_from: within the first epoch the model
    copies its input (labels not shifted / leaked) - an error; later epochs are `metric_memorise`'s (a tiny dataset memorised). `descended`: _flat saw the loss reach ~0 step by step (a grad printed 0 is rounding)."""
    th = t.th
    n = th.flat_min_records
    if t.first_nonfinite is not None or len(fin) < n + 1 or fin[0].rl:
        return []
    tail = fin[-n:]
    grads = [r.grad_norm for r in tail]
    if not all(r.loss < th.collapse_loss for r in tail):  # type: ignore[operator]
        return []
    # a log that never prints a gradient norm (darkflow, the PyTorch examples' meters, Keras) has only the loss to go
    # by: down to under collapse_loss, BLIND_DROP x below the first loss (ln 2 of a binary task counts too), and never
    # back above it is the same shortcut
    blind = all(r.grad_norm is None for r in fin)
    if fin[0].loss < th.fall_from and not (blind and max(r.loss for r in tail) * BLIND_DROP <= fin[0].loss):  # type: ignore[operator,type-var]
        return []
    j = len(fin) - n
    while j > 0 and fin[j - 1].loss < th.collapse_loss:  # type: ignore[operator]
        j -= 1
    if blind and (any(r.loss < 0 for r in tail) or any(r.loss == 0 for r in tail)  # type: ignore[operator]
                  and len({r.loss for r in fin[j:] if r.loss > 0}) < 3):  # type: ignore[operator]
        return []       # an exact 0 (a Trainer's rounded or hidden-NaN 0.0) or a negative loss (Dice + CE) is no blind collapse;
        # zeros after or between tiny printed values (2e-05, 0.0, 5e-07, 0.0) are a converged loss underflowing: they count
    if blind and fin[0].loss >= th.fall_from and all(r.epoch is not None and r.epoch <= 1.0 for r in tail):  # type: ignore[operator]
        return []       # metric_leak.first_epoch_low reads it (every record of the tail inside the first epoch)
    if not blind and any(g is None or not finite(g) for g in grads):
        return []
    if not blind and ((all(g <= th.zero_grad for g in grads) and not descended) or any(g >= th.collapse_grad for g in grads)):  # type: ignore[operator]
        return []
    i = len(fin) - n
    while i > 0 and fin[i - 1].loss < th.collapse_loss:  # type: ignore[operator]
        i -= 1
    at = fin[i]
    ep = at.epoch
    nums = {"from_loss": fmt(fin[0].loss), "from": fin[0].at, "loss": fmt(tail[-1].loss), "at": at.at,
            "records": len(fin) - i, "grad_norm": None if blind else fmt(max(grads)), "epoch": fmt(ep) if ep is not None else None}  # type: ignore[type-var]
    if ep is not None and ep >= 1.0:
        return []
    return [Anomaly("collapse", "loss-suspicious", "error", at.line, tail[-1].line, at.step, len(fin) - i, nums)]


def _diverge(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """The loss climbing step after step at the end of the log: in the last diverge_records records it
    rose at least diverge_rising of the time, doubled, and ended >= spike_factor x and >= spike_abs
    above the lowest loss before it. Not a spike (it never came back) and not noise: the optimizer is
    pushing the weights away (learning rate too high, broken loss scale or kernel); NaN follows."""
    th = t.th
    n = th.diverge_records
    if t.first_nonfinite is not None or len(fin) < n or fin[0].rl:
        return []
    tail = fin[-n:]
    rises = sum(b.loss > a.loss for a, b in zip(tail, tail[1:]))  # type: ignore[operator]
    low = min(fin[:len(fin) - n + 1], key=lambda r: r.loss)  # type: ignore[arg-type,return-value]
    last = tail[-1]
    if (rises < th.diverge_rising * (n - 1) or low.loss <= 0 or last.loss < 2 * tail[0].loss  # type: ignore[operator]
            or last.loss < th.spike_factor * low.loss or last.loss - low.loss < th.spike_abs):  # type: ignore[operator]
        return []
    start = next(r for r in reversed(fin) if r.index <= tail[0].index and r.loss <= tail[0].loss)  # type: ignore[operator]
    return [Anomaly("diverge", "nan-loss", "error", start.line, last.line, start.step, len(fin) - fin.index(start), {
        "low": fmt(low.loss), "low_at": low.at, "loss": fmt(last.loss), "at": last.at,
        "factor": round(last.loss / low.loss, 1), "records": n})]  # type: ignore[operator]


def _jump(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """A spike that never came back: after the first spike the loss stays up, the median of the records
    since it (>= flat_min_records of them, the last half) >= spike_factor x and >= spike_abs above the
    median before it. The run diverged to a worse level (a gradient-norm blow-up, a learning rate past
    what the model takes) and goes on training at it; not RL (its loss moves by design)."""
    th = t.th
    if t.sampled or not t.spikes or t.first_spike is None or any(r.rl for r in fin):
        return []
    r0, med = t.first_spike
    after = [r for r in fin if r.line >= r0.line]
    if len(after) < th.flat_min_records or not med or med <= 0:
        return []
    tail = sorted(x.loss for x in after[len(after) // 2:])  # type: ignore[type-var]
    level = tail[len(tail) // 2]
    if level < th.spike_factor * med or level - med < th.spike_abs:  # type: ignore[operator]
        return []
    grads = [x.grad_norm for x in after if x.grad_norm is not None and finite(x.grad_norm)]
    return [Anomaly("jump", "nan-loss", "error", r0.line, after[-1].line, r0.step, len(after), {
        "loss": fmt(r0.loss), "at": r0.at, "baseline": fmt(med), "level": fmt(level), "factor": round(level / med, 1),  # type: ignore[operator]
        "records": len(after), "to": after[-1].at, "grad_norm": fmt(max(grads)) if grads else None})]


def _spike(t: MetricTracker) -> list[Anomaly]:
    if not t.spikes or t.first_spike is None:
        return []
    r, med = t.first_spike
    return [Anomaly("spike", "loss-spike", "warning", r.line, r.line, r.step, t.spikes, {
        "loss": fmt(r.loss), "baseline": fmt(med), "at": r.at, "factor": round(r.loss / med, 1) if med else None,  # type: ignore[operator]
        "spikes": t.spikes})]


def detect(t: MetricTracker) -> list[Anomaly]:
    recs = t.records()
    fin = [r for r in recs if finite(r.loss)]
    out = _nan(t, recs) or _meg_noloss(t)
    hidden = [] if out else nan_hidden(t, fin)
    out += hidden + _overflow(t, recs)
    if hidden:
        return out
    zero = _zero_lr_grad(t, recs)
    if zero and zero[0].kind == "lr_zero_fp16":
        # a finite loss with a NaN/inf grad_norm and a learning rate that never left 0 in fp16: the
        # scaler skipped every step on overflowing gradients; the NaN is the overflow, not a divergence
        out = [a for a in out if not (a.kind == "nan" and a.numbers.get("metric") == "grad_norm")]
    flat = _flat(t, fin)
    if flat and flat[0].severity == "error" and zero and zero[0].kind not in ("lr_zero_fp16", "zero_grad_late"):
        zero = []       # a flat loss with zero grad_norm / lr: the flat-loss finding tells it (unless it began mid-run)
    out += zero
    out += [a for a in flat if not zero]
    if not zero and not flat:
        out += _repeat(t, fin)
    fall = _fall(t, fin)
    out += fall
    if fall:
        out = [a for a in out if a.kind != "flat"]     # a plateau near zero after the fall is the same story
    if not zero:
        out += low_start(t, fin)
    if not zero and not flat and not fall:
        out += stuck(t, fin)
    mem = [] if zero or flat and flat[0].severity == "error" else memorised(t, fin)
    if mem:
        out = [a for a in out if a.kind not in ("fall", "flat")] + mem  # many epochs over the same data explain the fall
    elif not zero and (not fall or fall[0].severity != "error"):
        col = [a for a in out if a.kind == "collapse"] or _collapse(t, fin)     # (_flat may have read it already)
        out += [a for a in col if a not in out]
        low = [] if col else first_epoch_low(t, fin)
        if low:
            out = [a for a in out if a.kind not in ("fall", "flat")] + low     # the fall is the same story
    if not any(a.severity == "error" and a.category == "no-grad" for a in out):
        out += reward_flat(t, recs)
    if not any(a.severity == "error" and a.category == "no-grad" for a in out):
        ev = eval_frozen(t, fin)
        if ev is not None:
            out.append(Anomaly("eval_frozen", "no-grad", "error", ev["line"], ev["last_line"], ev["step"], ev["count"],
                               ev["numbers"]))
    div = [] if any(a.severity == "error" for a in out) else (_diverge(t, fin) or _jump(t, fin)
                                                                 or short_diverge(t, fin) or short_jump(t, fin))
    return out + div + ([] if div else _spike(t))
