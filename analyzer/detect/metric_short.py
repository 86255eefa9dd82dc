"""Short-window loss divergence: a large shift seen in few records.

`metric_detect._diverge` reads the last diverge_records (12) records and `_jump` wants flat_min_records (8)
records after the first spike: a run that logs every 10 or 1000 steps and blows up within four records gets
neither. A shift this large needs fewer records to tell from noise, so each short path asks for more:

- `short_diverge`: the loss rose on every one of the last >= SHORT_RECORDS records (each higher than the one
  before, none coming back) and ended >= SHORT_FACTOR x the record the climb started from, >= spike_abs above
  it and >= spike_factor x the run's first loss (a bounce up from a low the run fell to is not a climb past
  where it began). An LM loss that grows tenfold, record after record, is the optimizer pushing the weights away.
- `short_jump`: after the first spike (metrics.py: > spike_factor x the rolling median of >= 8 records) the
  loss stayed up on every record to the end, >= SHORT_RECORDS of them: each >= spike_factor x and >= spike_abs
  above the median before the spike. `_jump` takes the median of a longer, noisier tail; here no record
  came back at all.

Both: no RL (its loss moves by design), no non-finite loss (`_nan` reads those), a log not sampled. Kinds
`diverge` / `jump` (the same findings, rules/detectors.yaml).
"""
from __future__ import annotations

from llmtriage.detect.metric_anomaly import Anomaly, fmt
from llmtriage.detect.metrics import MetricTracker, Record, finite

SHORT_RECORDS = 4       # records in the short window (the climb, or the records from the spike on)
SHORT_FACTOR = 10.0     # a short climb ends >= this x the record it started from


def short_diverge(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """The loss rising on each of the last >= SHORT_RECORDS records to >= SHORT_FACTOR x where the climb began."""
    th = t.th
    if t.sampled or t.first_nonfinite is not None or len(fin) < SHORT_RECORDS or any(r.rl for r in fin):
        return []
    i = len(fin) - 1
    while i > 0 and fin[i - 1].loss < fin[i].loss:  # type: ignore[operator]
        i -= 1
    run, last = fin[i:], fin[-1]
    low = run[0]
    if (len(run) < SHORT_RECORDS or low.loss <= 0 or last.loss < SHORT_FACTOR * low.loss  # type: ignore[operator]
            or last.loss - low.loss < th.spike_abs or last.loss < th.spike_factor * fin[0].loss):  # type: ignore[operator]
        return []
    return [Anomaly("diverge", "nan-loss", "error", low.line, last.line, low.step, len(run), {
        "low": fmt(low.loss), "low_at": low.at, "loss": fmt(last.loss), "at": last.at,
        "factor": round(last.loss / low.loss, 1), "records": len(run)})]  # type: ignore[operator]


def short_jump(t: MetricTracker, fin: list[Record]) -> list[Anomaly]:
    """After the first spike every record to the end (>= SHORT_RECORDS) stayed >= spike_factor x the median before."""
    th = t.th
    if t.sampled or t.first_nonfinite is not None or not t.spikes or t.first_spike is None or any(r.rl for r in fin):
        return []
    r0, med = t.first_spike
    after = [r for r in fin if r.line >= r0.line]
    if len(after) < SHORT_RECORDS or not med or med <= 0:
        return []
    low = min(x.loss for x in after)  # type: ignore[type-var]
    if low < th.spike_factor * med or low - med < th.spike_abs:  # type: ignore[operator]
        return []
    tail = sorted(x.loss for x in after[len(after) // 2:])  # type: ignore[type-var]
    level = tail[len(tail) // 2]
    grads = [x.grad_norm for x in after if x.grad_norm is not None and finite(x.grad_norm)]
    return [Anomaly("jump", "nan-loss", "error", r0.line, after[-1].line, r0.step, len(after), {
        "loss": fmt(r0.loss), "at": r0.at, "baseline": fmt(med), "level": fmt(level), "factor": round(level / med, 1),  # type: ignore[operator]
        "records": len(after), "to": after[-1].at, "grad_norm": fmt(max(grads)) if grads else None})]
