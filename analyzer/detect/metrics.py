"""Training-metric series: a bounded-memory tracker fed block by block (parsing in `metric_parse`,
the detectors in `metric_detect`, step time and throughput in `throughput`).

Parsing runs inside the matcher's block loop as an observer (see `observers.py`) and never runs
Python per line on big logs:

- Patterns are compiled on first use (importing the module compiles nothing). Metric lines are
  found with one compiled bytes regex (`re2` when installed; a bare `Match` call per hit). The first
  `Thresholds.full_records` records of a log are parsed in full; after that each ~64 KiB block
  contributes its first and its last record, so a multi-GB log costs a few regex searches per
  block and no whole-block Python scans (line numbers are counted from the nearer block end).
- When a sampled record is the first non-finite one, the previous and the current block are
  parsed in full to find the exact first NaN step (YAML rules also see every NaN line).
- Memory is bounded: the first `head_records` and the last `window` records are kept, plus
  running summaries (count, non-finite count, zero grad_norm / zero lr counts, spikes, overflow and
  skipped-step counters, whether the run's configuration says fp16).

Thresholds: `metric_thresholds.py` (the `Thresholds` dataclass, `THRESHOLDS`, `configure`; docs/METRICS.md).
"""
from __future__ import annotations

import math
import re
from collections import deque
from typing import Any, Optional

from llmtriage.engine.fastre import search_raw, spans
from llmtriage.detect.metric_line_flags import is_flat_reward, is_perfect_accuracy, is_poor_accuracy, is_rl_line, is_rounded_zero_loss
from llmtriage.detect.metric_parse import Record, parse_line, regexes
from llmtriage.detect.metric_table import PLAN_EPOCHS, PLAN_STEPS, keras_epoch, table_columns, table_row
from llmtriage.detect.metric_composer import scan_composer
from llmtriage.detect.metric_formats import GATES as FORMAT_GATES, scan_formats
from llmtriage.detect.metric_guard import GATES as GUARD_GATES, new_guard, scan_guard
from llmtriage.detect.metric_skips import scan_overflows, scan_skips
from llmtriage.detect.metric_thresholds import THRESHOLDS, Thresholds, configure

__all__ = ["Thresholds", "THRESHOLDS", "configure", "MetricTracker", "Record", "parse_line", "finite"]

# an evaluation loss as printed (HF dict, "eval loss 3.41", "val_loss=3.41"); only values with 4+ digits
_EVAL_LOSS = re.compile(rb"""\b(?:eval|val|validation)[_ ]loss['"]?\s*[:=]?\s*['"]?(\d+\.\d{3,}(?:[eE][-+]?\d+)?)""")
_MAX_EVALS = 64
_EVAL_GATES = (b"al_loss", b"al loss", b"on_loss", b"on loss")    # eval/val/validation + loss, cheap literals


def finite(x: Optional[float]) -> bool:
    return x is not None and math.isfinite(x)


class MetricTracker:
    """Bounded-memory store of a log's metric series plus the running counters the detectors need."""

    @classmethod
    def of_text(cls, text: str, th: Optional[Thresholds] = None) -> "MetricTracker":
        """The tracker of a whole log given as text, fed block by block as a scan feeds it, and flushed."""
        import io   # deferred: only tests and tools track a text outside a scan

        from llmtriage.engine.logparse import iter_blocks, match_view   # deferred: the same
        t, base = cls(th), 1
        for chunk, _ in iter_blocks(io.BytesIO(text.encode())):
            lines, view = match_view(chunk)
            t.feed_block(lines, view, base)
            base += lines.count(b"\n")
        t.flush(base)
        return t

    def __init__(self, th: Optional[Thresholds] = None):
        self.th = th or THRESHOLDS
        self.count = 0
        self.head: list[Record] = []
        self.tail: deque[Record] = deque(maxlen=self.th.window)
        self.nonfinite = 0
        self.first_nonfinite: Optional[Record] = None
        self.last_finite: Optional[Record] = None
        self.spikes = 0
        self.first_spike: Optional[tuple[Record, float]] = None
        self._hist: deque[float] = deque(maxlen=self.th.spike_history)
        self.overflows = 0
        self.evals: list[tuple[int, str]] = []      # (line, printed value) of evaluation losses
        self.eval_rows: list[tuple[int, bytes]] = []    # (line, text) of those lines: their task metrics (metric_task)
        self.overflow_first_line = 0
        self.overflow_last_line = 0
        self.last_scale: Optional[float] = None
        self.min_scale: Optional[float] = None
        self.sampled = False
        self.last_step: Optional[int] = None
        self.max_steps: Optional[int] = None
        self._prev: Optional[tuple[bytes, bytes, int]] = None
        self.pending: list[tuple[Record, int]] = []
        self._blocks = 0
        self._unsampled: Optional[tuple[bytes, bytes, int]] = None
        self._skipped: list[tuple[bytes, bytes, int]] = []    # blocks since the last sampled one
        # running counters over every record (head/tail keep only some records)
        self.grad_seen = 0
        self.grad_zero = 0
        self.lr_seen = 0
        self.lr_zero = 0
        self.rl_records = 0
        # skipped optimizer steps: DeepSpeed's cumulative counter, Megatron's per-interval one
        self.ds_skips: Optional[tuple[int, int, int]] = None      # (step, skipped so far, line)
        self.ds_trace: list[tuple[int, int, int]] = []           # the first DS_TRACE of them (metric_skips)
        self.guard = new_guard()           # a trainer's own gradient-guard skips (metric_guard)
        self.meg_iters = 0                 # iterations covered by Megatron log lines
        self.meg_skipped = 0
        self.meg_tail_skipped = 0          # iterations in the trailing run of fully skipped intervals
        self.meg_last: Optional[tuple[int, int]] = None           # (iteration, line)
        self.meg_first_line = 0
        # Megatron intervals that stepped but printed no loss (it prints a loss only when its average is
        # > 0, so a NaN loss vanishes from the line); the trailing run of them: (lines, first line, iterations)
        self.meg_noloss = 0
        self.meg_noloss_tail: Optional[tuple[int, int, int]] = None
        self.meg_nan_iters = 0             # Megatron's own `number of nan iterations` counter, summed
        self.meg_nan_line = 0
        self.fp16 = False                  # the run uses fp16 mixed precision (from its configuration lines)
        self._head_bytes = 0
        self._table: Optional[tuple[bytes, list[Optional[int]], bool]] = None   # a loss table being read
        self.plan_epochs: Optional[int] = None       # the run plan's "Num Epochs = N" ...
        self.plan_steps: Optional[int] = None        # ... and "Total (optimization) steps = N"

    # ---------------------------------------------------------------- feeding
    def add(self, line: int, parsed: tuple, bar_step: Optional[int] = None, rl: bool = False,
            flat_reward: bool = False, perfect: bool = False, rounded: bool = False, poor: bool = False) -> Record:
        step, loss, grad, lr, epoch = parsed
        if step is None:
            step = bar_step
        rec = Record(self.count, line, step, loss, grad, lr, epoch, rl, rl and flat_reward, perfect, rounded, poor)
        self.count += 1
        if grad is not None:
            self.grad_seen += 1
            if finite(grad) and abs(grad) <= self.th.zero_grad:
                self.grad_zero += 1
        if lr is not None:
            self.lr_seen += 1
            if lr == 0:
                self.lr_zero += 1
        if rl:
            self.rl_records += 1
        if step is not None:
            self.last_step = step
        if len(self.head) < self.th.head_records:
            self.head.append(rec)
        self.tail.append(rec)
        bad = (loss is not None and not math.isfinite(loss)) or (grad is not None and not math.isfinite(grad))
        if bad:
            self.nonfinite += 1
            if self.first_nonfinite is None:
                self.first_nonfinite = rec
        elif finite(loss):
            self.last_finite = rec
            hist = self._hist
            if len(hist) >= max(4, self.th.spike_history // 2):
                data = sorted(hist)     # statistics.median, inlined (same arithmetic, no import)
                n = len(data)
                med = data[n // 2] if n % 2 == 1 else (data[n // 2 - 1] + data[n // 2]) / 2
                if loss > self.th.spike_factor * med and loss - med >= self.th.spike_abs:
                    self.spikes += 1
                    if self.first_spike is None:
                        self.first_spike = (rec, med)
                    return rec      # a spike does not enter the baseline
            hist.append(loss)
        return rec

    def resolve(self, next_base: int) -> None:
        """Give the deferred records of the previous block their line (`next_base` = its end)."""
        for rec, tail_nl in self.pending:
            rec.line = next_base - tail_nl
        self.pending.clear()

    def _scan_evals(self, lines: bytes, view: bytes, line_base: int) -> None:
        """Evaluation losses as printed ("eval_loss': 3.4096", "eval loss 3.4096", "val_loss=3.4096"):
        the same printed value at evaluations far apart means the evaluated weights never changed."""
        counted = nl = 0
        for m in _EVAL_LOSS.finditer(view):
            ls = view.rfind(b"\n", 0, m.start()) + 1
            le = view.find(b"\n", m.end())
            row = view[ls:le if le >= 0 else len(view)]
            if b"%|" in row or b"it/s" in row or b"s/it" in row:
                continue    # a progress bar's postfix repeats the last validation loss on every redraw
            nl += lines.count(b"\n", counted, ls)
            counted = ls
            self.evals.append((line_base + nl, m.group(1).decode("ascii")))
            self.eval_rows.append((line_base + nl, row[:2048]))
            if len(self.evals) >= _MAX_EVALS:
                break

    def feed_block(self, lines: bytes, view: bytes, line_base: int) -> None:
        th = self.th
        if self.pending:
            self.resolve(line_base)
        R = regexes()
        if self._head_bytes < th.context_bytes:
            self._head_bytes += len(view)
            if not self.fp16 and R.FP16.search(view):
                self.fp16 = True
        if len(self.evals) < _MAX_EVALS and any(k in view for k in _EVAL_GATES):
            self._scan_evals(lines, view, line_base)
        if b"skipped" in view:
            scan_skips(self, lines, view, line_base)
        if any(k in view for k in GUARD_GATES):
            scan_guard(self, lines, view, line_base)
        if search_raw(R.verflow_raw, R.VERFLOW, view) or search_raw(R.verflow_up_raw, R.VERFLOW_UP, view):
            scan_overflows(self, lines, view, line_base)
        if self.plan_steps is None and b"Num Epochs = " in view:
            self._plan(view)
        if self._table is not None or b"Training Loss" in view or b"training loss" in view:
            self._tables(lines, view, line_base)
        if b"[batch=" in view and b"Train loss/train/" in view:
            scan_composer(self, lines, view, line_base)
        if any(k in view for k in FORMAT_GATES):
            scan_formats(self, lines, view, line_base)
        if self.count < th.full_records:
            self._parse_all(lines, view, line_base)
            self._prev = (lines, view, line_base)
            return
        # sampled: the first and the last record of every `sample_every`-th block (and of the last
        # block, at finish). Line numbers are counted from the nearer end of the block (the last
        # one is resolved when the next block tells its base).
        self.sampled = True
        self._blocks += 1
        if self._blocks % max(1, th.sample_every):
            self._unsampled = (lines, view, line_base)
            self._skipped.append(self._unsampled)
            return
        self._unsampled = None
        self._sample_block(lines, view, line_base)
        self._skipped.clear()

    def flush(self, end_base: int) -> None:
        """At the end of the log: sample the last block if it was skipped, resolve deferred lines."""
        if self._unsampled is not None:
            self._sample_block(*self._unsampled)
            self._unsampled = None
        self.resolve(end_base)

    def _find_record(self, view: bytes, lo: int, hi: int, reverse: bool) -> Optional[tuple[int, tuple]]:
        """The first (or last) metric line whose "loss" lies in view[lo:hi]: C-level find, a few tries."""
        for _ in range(4):
            if reverse:
                pos = max(view.rfind(b"loss", lo, hi), view.rfind(b"Loss", lo, hi))
            else:
                a, b = view.find(b"loss", lo, hi), view.find(b"Loss", lo, hi)
                pos = a if b < 0 else (b if a < 0 else min(a, b))
            if pos < 0:
                return None
            ls, le = self._line_bounds(view, pos)
            parsed = parse_line(view[ls:le])
            if parsed is not None:
                return ls, parsed
            if reverse:
                hi = ls
            else:
                lo = le
        return None

    def _sample_block(self, lines: bytes, view: bytes, line_base: int) -> None:
        before = self.first_nonfinite
        n = len(view)
        first = self._find_record(view, 0, n, False)
        if first is not None:
            ls, parsed = first
            self.add(line_base + lines.count(b"\n", 0, ls), parsed,
                     self._bar_before(view, ls) if parsed[0] is None else None)
            last = self._find_record(view, max(view.find(b"\n", ls) + 1, n - 4096), n, True)
            if last is not None:
                ls, parsed = last
                rec = self.add(0, parsed, self._bar_before(view, ls) if parsed[0] is None else None)
                self.pending.append((rec, lines.count(b"\n", ls)))
        if before is None and self.first_nonfinite is not None:
            # the first non-finite sample: parse the previous block and this one in full for the exact step
            found, self.first_nonfinite = self.first_nonfinite, None
            for blk in list(self._skipped) + [(lines, view, line_base)]:
                if blk[2] <= found.line or found.line == 0:
                    self._parse_all(*blk, count=False)
                if self.first_nonfinite is not None:
                    break
            if self.first_nonfinite is None:
                self.first_nonfinite = found
        self._prev = (lines, view, line_base)

    def _line_bounds(self, view: bytes, pos: int) -> tuple[int, int]:
        ls = view.rfind(b"\n", 0, pos) + 1
        le = view.find(b"\n", pos)
        return ls, (len(view) if le < 0 else le)

    def _bar_before(self, view: bytes, ls: int) -> Optional[int]:
        """The step of the last tqdm bar in the 1 KiB before a record without its own step."""
        found = regexes().BAR.findall(view, max(0, ls - 1024), ls)
        if not found:
            return None
        n, total = found[-1]
        if self.max_steps is None or int(total) > self.max_steps:
            self.max_steps = int(total)
        return int(n)

    def _parse_all(self, lines: bytes, view: bytes, line_base: int, count: bool = True) -> None:
        last_ls = -1
        counted = 0
        nl = 0
        R = regexes()
        rfind = view.rfind
        find = view.find
        n = len(view)
        for start, _ in spans(R.ANCHOR, R.anchor_raw, view):
            ls = rfind(b"\n", 0, start) + 1
            if ls == last_ls:
                continue
            last_ls = ls
            le = find(b"\n", start)
            if le < 0:
                le = n
            parsed = parse_line(view[ls:le])
            if parsed is None:
                continue
            nl += lines.count(b"\n", counted, ls)
            counted = ls
            if not count:   # only looking for the first non-finite record
                if not (finite(parsed[1]) and (parsed[2] is None or finite(parsed[2]))):
                    self.first_nonfinite = Record(-1, line_base + nl, parsed[0] if parsed[0] is not None else
                                                  self._bar_before(view, ls), parsed[1], parsed[2], parsed[3], parsed[4])
                    return
                continue
            text = view[ls:le]
            rl = is_rl_line(text)
            if parsed[4] is None and b" - loss: " in view[ls:le]:
                ep = keras_epoch(view, ls, le)
                if ep is not None:
                    parsed = parsed[:4] + (ep,)
            self.add(line_base + nl, parsed, self._bar_before(view, ls) if parsed[0] is None else None,
                     rl, rl and is_flat_reward(text), parsed[1] == 0 and is_perfect_accuracy(text),
                     parsed[1] == 0 and is_rounded_zero_loss(text),
                     parsed[1] is not None and 0 < parsed[1] < 0.01 and is_poor_accuracy(text))

    def _tables(self, lines: bytes, view: bytes, line_base: int) -> None:
        """Notebook loss tables: a header line names the columns, the rows below it are numbers only
        (a table may go on in the next block). Tables are small: every row is read; between tables
        the scan jumps from one header candidate to the next."""
        pos, n, ln = 0, len(view), line_base
        while pos < n:
            if self._table is None:
                cands = [i for i in (view.find(b"Training Loss", pos), view.find(b"training loss", pos)) if i >= 0]
                if not cands:
                    return
                nl_at = view.rfind(b"\n", pos, min(cands))
                start = nl_at + 1 if nl_at >= 0 else pos    # (pos is a line start: never step back before it)
                ln += lines.count(b"\n", pos, start)
                pos = start
            le = view.find(b"\n", pos)
            le = n if le < 0 else le
            text = view[pos:le]
            if self._table is not None and text.strip(b" \t\r"):    # a blank line (a CR's echo) goes on
                parsed = table_row(text, self._table[0], self._table[1])
                if parsed is not None:
                    step, loss, grad, lr, epoch, ev = parsed
                    if epoch is None and step is not None and self.plan_steps and self.plan_epochs:
                        epoch = step / self.plan_steps * self.plan_epochs
                    self.add(ln, (step, loss, grad, lr, epoch), rl=self._table[2])
                    if ev is not None and len(self.evals) < _MAX_EVALS:
                        self.evals.append((ln, ev))
                else:
                    self._table = None
            if self._table is None:
                self._table = table_columns(text)
            pos, ln = le + 1, ln + 1

    def _plan(self, view: bytes) -> None:
        """The run plan the Trainer (and Unsloth's banner) prints before the first step: epochs and total steps."""
        e, n = PLAN_EPOCHS.search(view), PLAN_STEPS.search(view)
        if e is not None and n is not None:
            epochs, steps = int(e.group(1).replace(b",", b"")), int(n.group(1).replace(b",", b""))
            if epochs > 0 and steps > 0:
                self.plan_epochs, self.plan_steps = epochs, steps

    # ---------------------------------------------------------------- summary
    def records(self) -> list[Record]:
        """Head and tail records in log order (no duplicates)."""
        out = list(self.head)
        last = out[-1].index if out else -1
        out += [r for r in self.tail if r.index > last]
        return out

    def summary(self) -> dict[str, Any]:
        recs = self.records()
        losses = [r.loss for r in recs if finite(r.loss)]
        d: dict[str, Any] = {"records": self.count, "sampled": self.sampled}
        if losses:
            d.update(first_loss=losses[0], last_loss=losses[-1], min_loss=min(losses))
        last = recs[-1] if recs else None
        if last is not None:
            d.update(last_step=self.last_step, last_line=last.line)
            if last.grad_norm is not None:
                d["last_grad_norm"] = last.grad_norm if math.isfinite(last.grad_norm) else str(last.grad_norm)
        if self.grad_seen and self.grad_zero == self.grad_seen:
            d["grad_norm_zero"] = self.grad_seen     # every logged grad_norm was 0: records that show it
        if self.nonfinite:
            d["nonfinite"] = self.nonfinite
        if self.overflows:
            d["overflows"] = self.overflows
            if self.last_scale is not None:
                d["last_loss_scale"] = self.last_scale
        if self.spikes:
            d["spikes"] = self.spikes
        if self.ds_skips is not None:
            d["skipped_steps"] = self.ds_skips[1]
        elif self.meg_iters:
            d["skipped_steps"] = self.meg_skipped
        return d
