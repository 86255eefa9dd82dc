"""Metric-detector thresholds.

Thresholds (module-level `THRESHOLDS`, a dataclass; each can be set with the environment variable
`LLMTRIAGE_METRIC_<NAME>` (e.g. `LLMTRIAGE_METRIC_SPIKE_FACTOR=5`), `configure(name=value)`, or the
`thresholds:` table of the project configuration, see `config.py`). docs/METRICS.md explains each.
  full_records       400   records parsed in full before sampling starts
  sample_every       4     then the first and last record of every N-th ~64 KiB block
  context_bytes      4 MiB configuration lines (fp16 on?) are looked for in this head of the log
  nan_error_min      2     non-finite records that make metric-nan-loss an error (also: the last record)
  overflow_min       8     loss-scale overflows before metric-fp16-overflow fires
  overflow_ratio     0.5   ... and overflows per logged step at least this, still overflowing in the second
                           half of the log (start-up calibration is normal), or the scale reached <= 1
  skip_min           8     skipped optimizer steps (DeepSpeed skipped=, Megatron skipped iterations) in a
                           row, with no step taken, before "no optimizer step ever ran" is an error
  flat_min_records   8     consecutive records with a flat loss for metric-flat-loss
  flat_rel           1e-4  "flat": (max - min) <= flat_rel * |mean| + flat_abs
  flat_abs           1e-6
  zero_grad          1e-6  grad_norm at or below this counts as zero
  zero_min_records   4     records with grad_norm 0 (or lr 0) on every step before it is an error
  zero_tail_records  8     grad_norm exactly 0 on the last this many records (and on half of them at
                           least) after normal ones: the weights stopped moving, an error too
  zero_share         0.9   grad_norm 0 on at least this share of >= 2 x zero_tail_records records is no-grad too
  fall_below         0.1   metric-fast-fall: loss falls below this ...
  fall_within        100   ... within this many steps (or records when steps are unknown) ...
  fall_from          1.0   ... from a first logged loss at least this
  fall_strong        0.01  below this (with a flat grad_norm) the finding is an error ...
  fall_records_min   3     ... when at least this many records lead to it (a loss of exactly 0 with a
                           gradient is the hidden NaN, never a fall)
  grad_flat_ratio    2.0   grad_norm "stays flat": max/min over the fall <= this
  collapse_loss      0.01  loss-collapse: the last `flat_min_records` losses below this ...
  collapse_grad      0.01  ... with grad_norm below this (the model copies its input)
  leak_records       3     metric-loss-near-zero-first-epoch: this many trailing records in (0, collapse_loss) with
                           a gradient, all inside the first epoch (epoch < 1), after a first loss >= fall_from
  memorise_epochs    20    metric-tiny-data-memorised (error): an LM loss ending under fall_strong that first got there
                           at this epoch or later (every sample seen >= 20 times; metric_memorise.py)
  repeat_min         6     a loss sequence repeating exactly with a period: this many repeated records
  zero_spike_factor  1.5   hidden NaN (loss exactly 0 after a normal level): a last value >= this x the median is
                           named a spike in the message
  spike_factor       3.0   metric-loss-spike: loss > spike_factor x median of the previous records ...
  spike_abs          1.0   ... and exceeds that median by at least spike_abs
  spike_history      16    records in the rolling median
  diverge_records    12    divergence: in the last this many records the loss rose ...
  diverge_rising     0.75  ... at least this share of the time, doubled, and ended >= spike_factor x and
                           spike_abs above the lowest loss before them
  stuck_records      30    metric-loss-stuck-from-start: at least this many records from the start of training
  stuck_span         500   ... (first step <= stuck_first_step) over at least this many steps, and the median
  stuck_first_step   50    of the last quarter >= stuck_drop x that of the first quarter: the loss never fell
  stuck_drop         0.98  (all records within stuck_noise x that level, the learning rate not still
  stuck_noise        0.15  warming up: its last value <= 1.5 x its value half-way)
  stuck_epochs       0.25  with no step in the records: at least this many epochs from an epoch <= 0.05
  eval_frozen_records 3    metric-eval-loss-frozen: every evaluation loss printed the same (4+ significant
                           digits) with at least this many training records between the first and the last
  (throughput-low, see `throughput.py`)
  rise_factor        2.0   step time rising: median of the last quarter > this x the early median ...
  rise_min_samples   12    ... with at least this many step-time samples (also: decode rate per request falling
                           by rise_factor, late vs early median)
  rise_error         2.5   a rise or fall by this factor in a run that did not finish is an error (the job is
                           degrading as the log ends), below it a warning
  climb_factor       4.0   a climb: >= 4 step times in a row each >= 10% above the one before, from <= 1.5x
                           the median to >= this x the median (an error when it ends the log >= rise_error x)
  periodic_factor    3.0   a "long step": > this x the median step time; periodic when >= periodic_min
  periodic_min       4     ... long steps come at a fixed interval
  idle_gpus          0.75  an nvidia-smi snapshot taken during training is "idle" when this share of GPUs is idle
  idle_util          15    ... a GPU is idle at or below this utilisation (%): a kernel ran at most 15% of the
                           sample period (a training step keeps a GPU busy well over half of it)
  low_util           30    a snapshot is "underused" when every GPU is at or below this utilisation; an
  low_share          0.75  error when at least this share of >= 4 snapshots taken during training are
  low_ceiling        40    ... or when no such snapshot has a GPU above this (a run slow from its first
                           step: 24-38% on every reading, never a busy one)
  mem_low            0.3   GPU memory used below this share of capacity on every GPU (batch too small)
  gen_share          0.6   RL: generation takes at least this share of the step time
  save_share         0.25  checkpoint saves take at least this share of all step time (verl); an error from
  save_error         0.5   this share in a run that did not finish (it spends as long saving as training)
  decode_min         5.0   serving: generated tokens/s per running request below this
  decode_error       1.0   ... an error below this over >= 2 readings (no GPU or NPU decodes an LLM that
                           slowly: CPU fallback, operator JIT compilation, weights swapped to the host)
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Optional

__all__ = ["Thresholds", "THRESHOLDS", "configure"]


@dataclass
class Thresholds:
    """Every detector threshold (defaults and meaning in the module docstring)."""
    full_records: int = 400
    sample_every: int = 4
    head_records: int = 256
    window: int = 512
    context_bytes: int = 4 << 20
    nan_error_min: int = 2
    overflow_min: int = 8
    overflow_ratio: float = 0.5
    skip_min: int = 8
    flat_min_records: int = 8
    flat_rel: float = 1e-4
    flat_abs: float = 1e-6
    zero_grad: float = 1e-6
    zero_min_records: int = 4
    zero_tail_records: int = 8
    zero_share: float = 0.9
    fall_below: float = 0.1
    fall_within: int = 100
    fall_from: float = 1.0
    fall_strong: float = 0.01
    fall_records_min: int = 3
    grad_flat_ratio: float = 2.0
    collapse_loss: float = 0.01
    collapse_grad: float = 0.01
    leak_records: int = 3
    memorise_epochs: float = 20.0
    repeat_min: int = 6
    zero_spike_factor: float = 1.5
    spike_factor: float = 3.0
    spike_abs: float = 1.0
    spike_history: int = 16
    diverge_records: int = 12
    diverge_rising: float = 0.75
    stuck_records: int = 30
    stuck_span: int = 500
    stuck_first_step: int = 50
    stuck_drop: float = 0.98
    stuck_noise: float = 0.15
    stuck_epochs: float = 0.25
    eval_frozen_records: int = 3
    rise_factor: float = 2.0
    rise_min_samples: int = 12
    rise_error: float = 2.5
    climb_factor: float = 4.0
    periodic_factor: float = 3.0
    periodic_min: int = 4
    idle_gpus: float = 0.75
    idle_util: float = 15.0
    low_util: float = 30.0
    low_share: float = 0.75
    low_ceiling: float = 40.0
    mem_low: float = 0.3
    gen_share: float = 0.6
    save_share: float = 0.25
    save_error: float = 0.5
    decode_min: float = 5.0
    decode_error: float = 1.0

    @classmethod
    def from_env(cls, env: Optional[dict[str, str]] = None) -> "Thresholds":
        env = os.environ if env is None else env
        t = cls()
        for f in fields(cls):
            raw = env.get("LLMTRIAGE_METRIC_" + f.name.upper())
            if raw:
                try:
                    setattr(t, f.name, type(getattr(t, f.name))(float(raw)))
                except ValueError:
                    pass
        return t


THRESHOLDS = Thresholds.from_env()


def configure(**values: Any) -> Thresholds:
    """Change thresholds for this process (e.g. from a project config); returns the active set."""
    for k, v in values.items():
        if not hasattr(THRESHOLDS, k):
            raise KeyError(f"unknown metric threshold '{k}'")
        setattr(THRESHOLDS, k, type(getattr(THRESHOLDS, k))(v))
    return THRESHOLDS
