"""Parsing training-metric lines: one record (step, loss, grad_norm, lr, epoch) per line.

Recognised formats (values may be quoted, as transformers v5 prints them):
  HF Trainer / swift   {'loss': 1.23, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': 0.1}
                       {'loss': '4.131', 'grad_norm': '2.2', 'learning_rate': '0', 'epoch': '0.5'}
  Megatron             iteration      100/  500000 | ... | lm loss: 7.2E+00 | loss scale: 65536.0 | grad norm: 3.2 |
                       (older releases: "learning rate 0.000E+00 | lm loss 1.140742E+01 |", no colons)
  DeepSpeed / plain    step=100, loss=2.31, lr=[1e-4], grad_norm=0.8   |  Step 100: loss 2.31
  Lightning            Epoch 0:  45%|####5     | 450/1000 [01:23<01:42, v_num=0, train_loss=2.310]
  tqdm postfix         100%|####| 50/50 [00:10<00:00, 4.9it/s, Loss: 1.14]   |  ... loss=0.5]
  verl / TRL (RL)      step:12 - actor/pg_loss:-0.004 - actor/kl_loss:0.001 - actor/grad_norm:0.23 - actor/lr:1e-06
  pipe-separated       | step 20 | loss 3.1021 | grad_norm 0.0000 | lr 2.00e-04 |  (an RL learner's
                       step 5 | policy_loss +0.0123 | grad_norm 0.0000 | lr 1.00e-05 | kl 0.0000 | too: oat, custom loops)
  AverageMeter         Epoch: [0][ 250/5005]\tTime 0.430 (0.430)\tData 0.006 (0.006)\tLoss 2.3104 (2.4121)  (the value,
                       not the running average; [e][i/n] gives epochs completed e + i/n)
  Keras / tqdm desc    Epoch 2/3: 40%|####      | 40/100 [..., loss=0.0003, grad_norm=0.0006]  (Epoch N/M is an
                       ordinal: epochs completed are N-1 plus the bar's fraction)
  mmengine / xtuner    Iter(train) [  10/12867]  lr: 5.2e-07  ...  loss: 1.0672  grad_norm: 5.8255
  mlx-lm               Iter 10: Train loss 0.972, Learning Rate 1.750e-06, It/sec 0.092, Tokens/sec 192.2
  darkflow             step 12 - loss 3.2104 - moving ave loss 9.8731  (the first loss is the step's own)
  bracketed keys       | E6 iter[ 14/ 15] | [Loss] 51566519.44 | [exp] ./exp/0125/car | [step]   104 |  (LION, loguru)
  Composer             [batch=500/20000]:  then indented  Train loss/train/total: 11.48  (metric_composer.py)
  LLaMA-Factory jsonl  {"current_steps": 4450, "total_steps": 9750, "loss": 0.0, "reward": null, ...} (a null reward is no RL)
  notebook tables      Step<TAB>Training Loss<TAB>Validation Loss  then rows  10<TAB>2.310000<TAB>No log
                       (the Trainer's notebook callback, Unsloth/Colab; also `Step | Training Loss | reward | ...`):
                       the header names the columns (`table_columns`), each row is read by them (`table_row`, metric_table.py)

Lines without a training loss (eval/validation/test losses, the Trainer's end-of-run `train_loss`
average, a bare `loss scale`) give no record. Skipped-step counters that carry no loss (DeepSpeed
`step=10, skipped=10, lr=[0.0]`, Megatron `number of skipped iterations: 10`) are read by
`parse_skips`. Patterns are compiled on first use.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from llmtriage.engine.fastre import Lazy, compile_bytes, raw_of
# flags of a metric line, re-exported for the callers that import them from here
from llmtriage.detect.metric_line_flags import (POOR_ACC, is_flat_reward, is_perfect_accuracy,  # noqa: F401
                                               is_poor_accuracy, is_rl_line, is_rounded_zero_loss)

# A metric line: any of the loss spellings (the anchor for finding records in a block).
ANCHOR_SRC = (rb"""['"]loss(?:/train)?['"]\s*:|\blm loss:|\blm loss [-+0-9.NnIi]|\b(?:train_)?[Ll]oss(?:_step)?\s*[=:]\s*['"]?[-+0-9.NnIi]|(?:with|:) [Ll]oss [-+0-9.]|"""
              rb"""\b(?:actor/)?(?:pg|policy)_loss['"]?\s*[=:]\s*['"]?[-+0-9.NnIi]|\|\s*(?:train[_ ]|(?:actor/)?(?:pg|policy)_)?[Ll]oss\s+[-+0-9.NnIi]"""
              # Megatron drops "lm loss" from a line whose loss went NaN but still prints the grad norm
              rb"""|\| grad norm: (?:nan|inf)\b"""
              # mlx-lm: "Iter 10: Train loss 0.972, Learning Rate 1.750e-06, It/sec 0.092, ..."
              rb"""|: Train loss [-+0-9.NnIi]"""
              # a logger's bracketed keys (LION's loguru lines: "| E6 iter[ 14/ 15] | [Loss] nan | ... | [step]   104 |")
              rb"""|\[[Ll]oss\]\s+[-+0-9.NnIi]"""
              # dash-separated fields without a colon (darkflow: "step 12 - loss 3.21 - moving ave loss 9.87")
              rb"""|\bstep [0-9]+ - loss [-+0-9.NnIi]"""
              # the PyTorch examples' AverageMeter: "Epoch: [0][ 250/5005]\tTime 0.430 (0.430)\tLoss 0.0004 (0.0005)"
              rb"""|\b[Ll]oss +[-+0-9.NnIi][0-9.eE+-]* +\( *[-+0-9.NnIi]"""
              # comma-separated fields without a colon ("epoch 0, step 100, loss 0.6931, auc 0.5012")
              rb"""|\bstep [0-9]+, loss [-+0-9.NnIi]"""
              # MMF's logistics callback: "progress: 100/60000, train/vqa2/logit_bce: 22.31, train/total_loss: 22.31, ..."
              rb"""|\btrain/total_loss:\s*[-+0-9.NnIi]"""
              # snake-case keys with a space or a colon ("iter 50/135 train_loss 1.3863", "Epoch:3, Training_loss:0.6822";
              # not the Trainer's end-of-run `TrainOutput(global_step=30, training_loss=36.7, ...)` average)
              rb"""|\btrain_loss +[-+0-9.NnIi]|\b[Tt]raining_loss:\s*[-+0-9.NnIi]"""
              # NeMo 2: "Training epoch 0, iteration 10/999 | lr: 5e-06 | global_step: 10 | reduced_train_loss: 2.41 | ..."
              rb"""|\breduced_train_loss:\s*[-+0-9.NnIi]""")
# "Epoch 2/3" (Keras, tqdm descriptions) and "Epoch [2/3]" (the PyTorch tutorials' loops) count from 1; "epoch 0.5"
# in a record counts epochs completed
EPOCH_OF_SRC = rb"(?i)\bepoch\s*(?:\s|\[\s*)([0-9]+)\s*/\s*([0-9]+)"
# (mmengine / xtuner: "Iter(train) [  10/12867]")
STEP_SRC = rb"""(?i)(?:['"]?global_step(?:/max_steps)?['"]?\s*[:=]\s*['"]?|\biteration\s+|\bstep\s*[=:]?\s*|\biter\s*[=:]\s*|\biter\s+(?=[0-9]+:)|\biter\(train\)\s*\[\s*)([0-9]+)(?![0-9]|\.(?:batch|extern|interactive|[0-9]+\s+(?:ON|cgroup)\b))(?:\s*/\s*([0-9]+))?"""
# a tqdm bar's step and total, or the notebook form (notebook_bar.py): `[  23/2080 10:12 < 16:40:10, 0.03 it/s, Epoch 0.00/1]`
BAR_SRC = rb"(?:\|\s*|\[ *(?=[0-9]+/[0-9]+ [0-9:]+ < [0-9:]+, [0-9.]+ (?:it/s|s/it), Epoch ))([0-9]+)/([0-9]+) (?:\[|(?=[0-9:]+ < ))"
OVERFLOW_SRC = rb"OVERFLOW|[Gg]radient overflow|[Oo]verflow detected|[Ss]kipping step, loss scale|[Oo]verflow! Skipping step"
SCALE_TO_SRC = rb"(?i)(?:reducing (?:loss scale )?to|loss scale(?:r)?(?: \d+)? reducing loss scale to|new scale:?|scale(?: to)?:?)\s*([0-9.]+(?:e[-+]?[0-9]+)?)"
# DeepSpeed's cumulative counter and Megatron's per-interval one (a fully skipped interval prints no loss)
DS_SKIPS_SRC = rb"\bstep=([0-9]+), skipped=([0-9]+)"
MEG_SKIPS_SRC = (rb"iteration\s+([0-9]+)\s*/\s*[0-9]+\s*\|[^\n]*?(?:loss scale:\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)[^\n]*?)?"
                 rb"number of skipped iterations:\s*([0-9]+)")

# configuration lines saying the run uses fp16 mixed precision (HF args, CLI flags, DeepSpeed/accelerate configs)
FP16_SRC = (rb"""\bfp16[=:]\s*True\b|--fp16(?:\s+[Tt]rue)?(?:\s|$)|["']fp16["']:\s*\{\s*["']enabled["']:\s*(?:[Tt]rue|["']auto["'])|"""
            rb"""compute dtype: torch\.float16|mixed_precision[=:]\s*['"]?fp16|--mixed_precision[= ]fp16|\bfp16: true|"""
            rb"""16-bits training: True|torch\.cuda\.amp\.GradScaler|\bGradScaler\(""")

_KEYS = (rb"val(?:idation)? loss", rb"eval loss", rb"test loss", rb"lm loss", rb"loss scale", rb"loss_scale",
         rb"reduced_train_loss", rb"train_loss_step", rb"training_loss", rb"train_loss", rb"loss/train", rb"train/total_loss", rb"actor/pg_loss", rb"pg_loss", rb"policy_loss", rb"loss",
         rb"grad_norm", rb"grad norm", rb"learning_rate", rb"learning rate", rb"lr", rb"epoch",
         rb"global_step(?:/max_steps)?", rb"current_steps", rb"num_updates", rb"step", rb"iteration", rb"iter")
_VALUE = (rb"""(?:\]|['"])?\s*[:=]?\s*['"]?\[?([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?|\.[0-9]+(?:e[-+]?[0-9]+)?|nan"""
          rb"""|inf(?:inity)?))""")
KEYVAL_SRC = rb"(?<![a-z_])(" + b"|".join(_KEYS) + b")" + _VALUE
# The same language with the look-behind moved behind each key's first letter ("x(?<![a-z_]x)..."): the
# pattern then starts with a set of letters, which `re` skips to instead of trying every position.
_KEYVAL_FAST_SRC = b"(" + b"|".join(k[:1] + b"(?<![a-z_]" + k[:1] + b")" + k[1:] for k in _KEYS) + b")" + _VALUE

_FIELD = {b"lm loss": 1, b"reduced_train_loss": 1, b"train_loss_step": 1, b"training_loss": 1, b"train_loss": 1, b"loss/train": 1, b"train/total_loss": 1, b"loss": 1, b"actor/pg_loss": 1, b"pg_loss": 1,
          b"policy_loss": 1, b"grad_norm": 2, b"grad norm": 2, b"learning_rate": 3, b"learning rate": 3, b"lr": 3,
          b"epoch": 4, b"current_steps": 0, b"num_updates": 0, b"global_step": 0, b"global_step/max_steps": 0, b"step": 0, b"iteration": 0, b"iter": 0}
_MMENGINE_ITER = re.compile(rb"\bIter\(train\) \[\s*([0-9]+)/[0-9]+\]")
# "Epoch: [0][ 250/5005]" (PyTorch examples, 0-based) / "Epoch [1][3100/23454]" (mmcv, 1-based): read as
# 0-based, epochs completed = e + i/n (a 1-based log reads one epoch later: never earlier than it is)
_EPOCH_ITER = re.compile(rb"(?i)\bepoch:? \[ *([0-9]+)\]\[ *([0-9]+)/([0-9]+)\]")
# a learning rate printed with fixed decimals that are all 0 ("actor/lr:0.000" for 1e-6), or with its zeros
# stripped to a bare point (MMF's "lr: 0." during warm-up), is below the display's precision, not 0; "0",
# "0.0" and "0.0e+00" (repr, %g, quoted strings) are a real 0
_BELOW_PRECISION = re.compile(rb"0\.(?:00+)?\Z")
# ... but six or more zero decimals ("lr: 0.000000") bound it below 5e-7, a rate that trains nothing: it is read as
# that bound (metric_lr_tiny's floor), not as unknown
_FINE_ZEROS = 6


class Bound(float):
    """An upper bound read from a value printed as fixed zeros (a report says "below 5e-07", never "5e-07")."""


def below_precision(val: bytes) -> Optional[float]:
    """A learning rate printed as fixed zeros: unknown (None), or its bound when the display is fine enough."""
    d = len(val) - 2
    return Bound(0.5 * 10.0 ** -d) if d >= _FINE_ZEROS else None


class Regexes(Lazy):
    """Every pattern of the metric parser, compiled on first use (importing the module compiles nothing)."""

    def _make_ANCHOR(self) -> Any:
        return compile_bytes(ANCHOR_SRC)

    def _make_anchor_raw(self) -> Any:
        return raw_of(self.ANCHOR)

    def _make_STEP(self) -> Any:
        return re.compile(STEP_SRC)

    def _make_BAR(self) -> Any:
        return re.compile(BAR_SRC)

    def _make_VERFLOW(self) -> Any:
        return compile_bytes(rb"verflow")

    def _make_VERFLOW_UP(self) -> Any:
        return compile_bytes(rb"VERFLOW")

    def _make_verflow_raw(self) -> Any:
        return raw_of(self.VERFLOW)

    def _make_verflow_up_raw(self) -> Any:
        return raw_of(self.VERFLOW_UP)

    def _make_OVERFLOW(self) -> Any:
        return compile_bytes(OVERFLOW_SRC)

    def _make_overflow_raw(self) -> Any:
        return raw_of(self.OVERFLOW)

    def _make_SCALE_TO(self) -> Any:
        return re.compile(SCALE_TO_SRC)

    def _make_KEYVAL(self) -> Any:
        return re.compile(KEYVAL_SRC)

    def _make_keyval_fast(self) -> Any:
        return re.compile(_KEYVAL_FAST_SRC)

    def _make_EPOCH_OF(self) -> Any:
        return re.compile(EPOCH_OF_SRC)

    def _make_DS_SKIPS(self) -> Any:
        return re.compile(DS_SKIPS_SRC)

    def _make_MEG_SKIPS(self) -> Any:
        return re.compile(MEG_SKIPS_SRC)

    def _make_FP16(self) -> Any:
        return compile_bytes(FP16_SRC)


_RX: Optional[Regexes] = None


def regexes() -> Regexes:
    """The shared, lazily compiled patterns (also used by `phase`)."""
    global _RX
    if _RX is None:
        _RX = Regexes()
    return _RX


def num(b: Optional[bytes]) -> Optional[float]:
    if b is None:
        return None
    try:
        return float(b)
    except ValueError:
        return None


class Printed(float):
    """A loss as the log printed it: the float, and `digits`, its significant digits as printed
    (trailing zeros count: `4.600` has 4, where the float's shortest repr `4.6` has 2)."""
    digits = 0


def printed_digits(b: bytes) -> int:
    """Significant digits of a printed number (b"4.600" -> 4, b"0.0012" -> 2, b"2.569e-04" -> 4)."""
    mant = b.lstrip(b"+-").lower().split(b"e")[0]
    return len(mant.replace(b".", b"").lstrip(b"0"))


def loss_num(b: bytes) -> Optional[float]:
    """`num` for a loss value, keeping how many significant digits the log printed (`Printed`)."""
    v = num(b)
    if v is None or v != v or v in (math.inf, -math.inf):
        return v
    p = Printed(v)
    p.digits = printed_digits(b)
    return p




@dataclass
class Record:
    index: int                 # n-th metric record of the log (0-based)
    line: int
    step: Optional[int]
    loss: Optional[float]
    grad_norm: Optional[float] = None
    lr: Optional[float] = None
    epoch: Optional[float] = None
    rl: bool = False           # an RL (GRPO/PPO) record: a zero or negative loss is not suspicious
    flat_reward: bool = False  # ... whose group rewards have no spread (reward_std 0 / frac_reward_zero_std 1):
                               # every advantage is 0, so a zero gradient on it is explained
    perfect: bool = False      # the same line prints a training accuracy of 100% (`Prec@1 100.000`, `acc: 1.0000`)
    rounded: bool = False      # a loss of 0 printed with fixed decimals (`train_loss_step=0.000`): below the
                               # display's precision, not an exact 0 (as `_BELOW_PRECISION` for a learning rate)
    poor: bool = False         # a tiny loss (< 0.01) beside a training accuracy under POOR_ACC: the loss is a small-scale
                               # one (a heatmap MSE), not a model that sees the answer

    @property
    def at(self) -> str:
        if self.step is not None:
            return f"step {self.step}"
        return f"log record {self.index + 1}" if self.index >= 0 else f"line {self.line}"


# the header of a torchvision / DeiT / BEiT / MAE MetricLogger line printed while evaluating ("Test:  [ 0/19]",
# "Val:  [10/18]", "Eval: [ 5/40]"; "Test: Total time" carries no loss)
_EVAL_HEADER = re.compile(rb"(?:^|[\s\]|:])(?:Test|Val|Valid|Eval|Validation|Evaluation):\s+\[\s*[0-9]+/[0-9]+\]")


# a row of the Trainer's end-of-run table ("  train_loss               =     0.7963")
_SUMMARY_ROW = re.compile(rb"\s*train_loss\s+=\s+\S+\s*$")


def _step_of(val: bytes) -> Optional[int]:
    """A step counter's value, or None: a counter is whole, so `'timing/step': 569.77` (seconds a step took,
    SkyRL / verl phase timings) is not a step number."""
    try:
        v = float(val)
    except (ValueError, OverflowError):
        return None
    return int(v) if math.isfinite(v) and v.is_integer() else None


def parse_line(text: bytes) -> Optional[tuple[Optional[int], Optional[float], Optional[float], Optional[float], Optional[float]]]:
    """(step, loss, grad_norm, lr, epoch) from one metric line, or None when it has no training loss."""
    out: list[Any] = [None, None, None, None, None]
    R = _RX or regexes()
    low = text.lower()
    if b"damp" in low and (b"'damp'" in low or b'"damp"' in low):
        return None     # GPTQModel's per-module quantisation record: its 'loss' is a reconstruction error, not training
    if b": " in text and _EVAL_HEADER.search(text):
        return None     # a MetricLogger evaluation line ("Test:  [ 0/19]  ... loss: 0.4312"): its loss is not training
    if b"avg loss" in low and b"gptq" in low:
        return None     # AutoGPTQ's per-module "[auto_gptq.quantization.gptq] avg loss: ..." line: the same, not training
    if b"train_loss" not in low:
        # fast path: (key, value) pairs straight from C; only `train_loss` needs the match position
        get = _FIELD.get
        for key, val in R.keyval_fast.findall(low):
            k = get(key)
            if k is None or out[k] is not None:
                continue
            if k == 0:
                out[0] = _step_of(val)
            elif k == 1:
                out[1] = loss_num(val)
            elif k == 3 and _BELOW_PRECISION.match(val):
                out[k] = below_precision(val)
            else:
                out[k] = num(val)
    else:
        bare_nan = False    # the loss read so far is a bare `loss` that is nan
        for m in R.KEYVAL.finditer(low):
            k = _FIELD.get(m.group(1))
            if k is None or (out[k] is not None and not (k == 1 and bare_nan)):
                continue
            if bare_nan and k == 1 and m.group(1) == b"loss":
                continue
            if k == 1 and m.group(1) == b"train_loss" and (
                    (m.start() and text[m.start() - 1:m.start()] in (b"'", b'"')) or _SUMMARY_ROW.match(low)):
                continue    # the Trainer's end-of-run average (its dict, or its "***** train metrics *****" row), not a step
            if k == 0:
                out[0] = _step_of(m.group(2))
            elif k == 1:
                v = loss_num(m.group(2))
                if bare_nan and (v is None or v != v):
                    continue
                # Lightning (< 2.0) puts the mean of training_step's return value on its bar as `loss`: nan under
                # manual optimization (nothing returned), while the module's own `train_loss` on the line is the loss
                bare_nan = m.group(1) == b"loss" and v is not None and v != v and not bare_nan
                out[1] = v
            elif k == 3 and _BELOW_PRECISION.match(m.group(2)):
                out[k] = below_precision(m.group(2))
            else:
                out[k] = num(m.group(2))
    if out[1] is None and out[2] is not None and out[2] != out[2] and b"iteration" in low:
        # Megatron prints a loss only when its average is > 0: a NaN loss leaves just "grad norm: nan"
        out[1] = out[2]
    if out[1] is None:
        return None
    b = R.BAR.search(text) if out[0] is None or out[4] is not None else None
    if out[0] is None and b:
        out[0] = int(b.group(1))
    elif out[0] is None and b"iter(train)" in low:
        it = _MMENGINE_ITER.search(text)        # mmengine / xtuner: "Iter(train) [  10/12867]"
        if it:
            out[0] = int(it.group(1))
    if out[4] is not None and b"][" in text:
        ei = _EPOCH_ITER.search(text)
        if ei and int(ei.group(3)):
            out[4] = int(ei.group(1)) + min(int(ei.group(2)) / int(ei.group(3)), 1.0)
    elif out[4] is not None and b"/" in low:
        e = R.EPOCH_OF.search(low)
        if e and e.group(1).isdigit() and int(e.group(1)) >= 1 and int(e.group(1)) <= int(e.group(2)):
            done = int(e.group(1)) - 1          # an ordinal: the epochs completed before this one
            frac = int(b.group(1)) / int(b.group(2)) if b and int(b.group(2)) else 0.0
            out[4] = done + min(frac, 1.0)
    return tuple(out)  # type: ignore[return-value]


# a loss value on a Megatron interval line ("lm loss: 2.1E+00 |", older "lm loss 2.1E+00 |", "mtp_1 loss: ..."),
# not its "loss scale: ..."
_MEG_LOSS = re.compile(rb"(?<![a-z])loss(?! scale)[a-z_ 0-9]*:\s*[-+0-9.nNiI]|\blm loss [-+0-9.]")
_MEG_NAN = re.compile(rb"number of nan iterations:\s*([0-9]+)")


def has_loss(text: bytes) -> bool:
    """Whether a Megatron iteration line carries any loss value."""
    return _MEG_LOSS.search(text) is not None


def meg_nan_iterations(text: bytes) -> int:
    """Megatron's `number of nan iterations: K` on an iteration line (0 when absent)."""
    m = _MEG_NAN.search(text)
    return int(m.group(1)) if m else 0


def parse_skips(text: bytes) -> Optional[tuple[str, int, int, Optional[float]]]:
    """('ds', step, skipped so far, None) for DeepSpeed's `step=N, skipped=K` line,
    ('megatron', iteration, skipped in this interval, loss scale) for Megatron's, or None."""
    R = _RX or regexes()
    m = R.DS_SKIPS.search(text)
    if m:
        return "ds", int(m.group(1)), int(m.group(2)), None
    m = R.MEG_SKIPS.search(text)
    if m:
        return "megatron", int(m.group(1)), int(m.group(3)), num(m.group(2))
    return None
