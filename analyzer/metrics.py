"""Training-metric series and the detectors that read them (NaN, overflow, flat, fast fall, spikes).

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
  running summaries (count, non-finite count, spikes, overflow counters).

Recognised formats (values may be quoted, as transformers v5 prints them):
  HF Trainer / swift   {'loss': 1.23, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': 0.1}
  Megatron             iteration      100/  500000 | ... | lm loss: 7.2E+00 | loss scale: 65536.0 | grad norm: 3.2 |
  DeepSpeed / plain    step=100, loss=2.31, lr=[1e-4], grad_norm=0.8   |  Step 100: loss 2.31
  Lightning            Epoch 0:  45%|####5     | 450/1000 [01:23<01:42, v_num=0, train_loss=2.310]

Thresholds (module-level `THRESHOLDS`, a dataclass; each can be set with the environment variable
`LLMTRIAGE_METRIC_<NAME>` (e.g. `LLMTRIAGE_METRIC_SPIKE_FACTOR=5`) or `configure(name=value)`):
  full_records       400   records parsed in full before sampling starts
  sample_every       4     then the first and last record of every N-th ~64 KiB block
  nan_error_min      2     non-finite records that make metric-nan-loss an error (also: the last record)
  overflow_min       8     loss-scale overflows before metric-fp16-overflow fires
  overflow_ratio     0.5   ... and overflows per logged step at least this, still overflowing in the second
                           half of the log (start-up calibration is normal), or the scale reached <= 1
  flat_min_records   8     consecutive records with a flat loss for metric-flat-loss
  flat_rel           1e-4  "flat": (max - min) <= flat_rel * |mean| + flat_abs
  flat_abs           1e-6
  zero_grad          1e-6  grad_norm at or below this counts as zero
  fall_below         0.1   metric-fast-fall: loss falls below this ...
  fall_within        100   ... within this many steps (or records when steps are unknown) ...
  fall_from          1.0   ... from a first logged loss at least this
  fall_strong        0.01  below this (with a flat grad_norm) the finding is an error
  grad_flat_ratio    2.0   grad_norm "stays flat": max/min over the fall <= this
  spike_factor       3.0   metric-loss-spike: loss > spike_factor x median of the previous records ...
  spike_abs          1.0   ... and exceeds that median by at least spike_abs
  spike_history      16    records in the rolling median
"""
from __future__ import annotations

import math
import os
import re
from collections import deque
from dataclasses import dataclass, fields
from typing import Any, Optional

try:  # pragma: no cover - depends on the install
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None


def _compile(pattern: bytes) -> Any:
    if _re2 is not None:
        try:
            opts = _re2.Options()
            opts.log_errors = False
            return _re2.compile(pattern, opts)
        except Exception:  # pragma: no cover - pattern outside the RE2 subset
            pass
    return re.compile(pattern)


def _raw(compiled: Any) -> Any:
    """The bare RE2 object behind a `re2` pattern (its `Match` returns spans, no Match objects), or None."""
    if _re2 is None or not isinstance(compiled, getattr(_re2, "_Regexp", ())):
        return None
    raw = getattr(compiled, "_regexp", None)
    return raw if raw is not None and hasattr(raw, "Match") else None


_UNANCHORED = getattr(getattr(_re2, "_Anchor", None), "UNANCHORED", None)


def spans(compiled: Any, raw: Any, view: bytes, pos: int = 0, endpos: Optional[int] = None) -> list[tuple[int, int]]:
    """(start, end) of every match of `compiled` in view[pos:endpos], as `finditer` gives them, without a
    Python Match object per match (`raw` = `_raw(compiled)`: one C call per match)."""
    end = len(view) if endpos is None else endpos
    if raw is None:
        return [m.span() for m in compiled.finditer(view, pos, end)]
    out = []
    match = raw.Match
    anchor = _UNANCHORED
    while True:
        sp = match(anchor, view, pos, end)[0]
        if sp[0] < 0:
            break
        out.append(sp)
        if pos == end:
            break
        pos = pos + 1 if pos == sp[1] else sp[1]
    return out


def search_raw(raw: Any, compiled: Any, view: bytes) -> bool:
    """Whether `compiled` occurs in `view` (a bare RE2 call when available)."""
    if raw is not None:
        return raw.Match(_UNANCHORED, view, 0, len(view))[0][0] >= 0
    return compiled.search(view) is not None


@dataclass
class Thresholds:
    full_records: int = 400
    sample_every: int = 4
    head_records: int = 256
    window: int = 512
    nan_error_min: int = 2
    overflow_min: int = 8
    overflow_ratio: float = 0.5
    flat_min_records: int = 8
    flat_rel: float = 1e-4
    flat_abs: float = 1e-6
    zero_grad: float = 1e-6
    fall_below: float = 0.1
    fall_within: int = 100
    fall_from: float = 1.0
    fall_strong: float = 0.01
    grad_flat_ratio: float = 2.0
    spike_factor: float = 3.0
    spike_abs: float = 1.0
    spike_history: int = 16

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


# ------------------------------------------------------------------------------ parsing

_NUM = rb"""['"]?([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|[Nn]a[Nn]|[Ii]nf(?:inity)?))"""
# A metric line: any of the loss spellings (the anchor for finding records in a block).
_ANCHOR_SRC = rb"""['"]loss['"]\s*:|\blm loss:|\b(?:train_)?loss(?:_step)?\s*[=:]\s*['"]?[-+0-9.NnIi]"""
_STEP_SRC = rb"""(?i)(?:['"]?global_step(?:/max_steps)?['"]?\s*[:=]\s*['"]?|\biteration\s+|\bstep\s*[=:]?\s*|\biter\s*[=:]\s*)([0-9]+)(?:\s*/\s*([0-9]+))?"""
_BAR_SRC = rb"\|\s*([0-9]+)/([0-9]+) \["
_OVERFLOW_SRC = rb"OVERFLOW|[Gg]radient overflow|[Oo]verflow detected|[Ss]kipping step, loss scale"
_SCALE_TO_SRC = rb"(?i)(?:reducing (?:loss scale )?to|loss scale(?:r)?(?: \d+)? reducing loss scale to|new scale:?|scale(?: to)?:?)\s*([0-9.]+(?:e[-+]?[0-9]+)?)"


def _num(b: Optional[bytes]) -> Optional[float]:
    if b is None:
        return None
    try:
        return float(b)
    except ValueError:
        return None


@dataclass
class Record:
    index: int                 # n-th metric record of the log (0-based)
    line: int
    step: Optional[int]
    loss: Optional[float]
    grad_norm: Optional[float] = None
    lr: Optional[float] = None
    epoch: Optional[float] = None

    @property
    def at(self) -> str:
        if self.step is not None:
            return f"step {self.step}"
        return f"log record {self.index + 1}" if self.index >= 0 else f"line {self.line}"


_KEYS = (rb"val(?:idation)? loss", rb"eval loss", rb"test loss", rb"lm loss", rb"loss scale", rb"loss_scale",
         rb"train_loss_step", rb"train_loss", rb"loss", rb"grad_norm", rb"grad norm", rb"learning_rate",
         rb"learning rate", rb"lr", rb"epoch", rb"global_step(?:/max_steps)?", rb"step", rb"iteration", rb"iter")
_VALUE = (rb"""['"]?\s*[:=]?\s*['"]?\[?([-+]?(?:[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?|\.[0-9]+(?:e[-+]?[0-9]+)?|nan"""
          rb"""|inf(?:inity)?))""")
_KEYVAL_SRC = rb"(?<![a-z_])(" + b"|".join(_KEYS) + b")" + _VALUE
# The same language with the look-behind moved behind each key's first letter ("x(?<![a-z_]x)..."): the
# pattern then starts with a set of letters, which `re` skips to instead of trying every position.
_KEYVAL_FAST_SRC = b"(" + b"|".join(k[:1] + b"(?<![a-z_]" + k[:1] + b")" + k[1:] for k in _KEYS) + b")" + _VALUE


class _Lazy:
    """Attributes made by `_make_<name>` on first access, plain attributes after that."""

    def __getattr__(self, name: str) -> Any:
        make = getattr(type(self), "_make_" + name, None)
        if make is None:
            raise AttributeError(name)
        value = make(self)
        setattr(self, name, value)
        return value


class _Regexes(_Lazy):
    """Every pattern of the metric parser, compiled on first use (importing the module compiles nothing)."""

    def _make_ANCHOR(self) -> Any:
        return _compile(_ANCHOR_SRC)

    def _make_anchor_raw(self) -> Any:
        return _raw(self.ANCHOR)

    def _make__STEP(self) -> Any:
        return re.compile(_STEP_SRC)

    def _make__BAR(self) -> Any:
        return re.compile(_BAR_SRC)

    def _make__VERFLOW(self) -> Any:
        return _compile(rb"verflow")

    def _make__VERFLOW_UP(self) -> Any:
        return _compile(rb"VERFLOW")

    def _make_verflow_raw(self) -> Any:
        return _raw(self._VERFLOW)

    def _make_verflow_up_raw(self) -> Any:
        return _raw(self._VERFLOW_UP)

    def _make_OVERFLOW(self) -> Any:
        return _compile(_OVERFLOW_SRC)

    def _make_overflow_raw(self) -> Any:
        return _raw(self.OVERFLOW)

    def _make__SCALE_TO(self) -> Any:
        return re.compile(_SCALE_TO_SRC)

    def _make__KEYVAL(self) -> Any:
        return re.compile(_KEYVAL_SRC)

    def _make_keyval_fast(self) -> Any:
        return re.compile(_KEYVAL_FAST_SRC)


_RX: Optional[_Regexes] = None


def _rx() -> _Regexes:
    global _RX
    if _RX is None:
        _RX = _Regexes()
    return _RX


def __getattr__(name: str) -> Any:
    # the compiled patterns under their historical module-level names (compiled on first access)
    if name in ("ANCHOR", "_STEP", "_BAR", "_VERFLOW", "_VERFLOW_UP", "OVERFLOW", "_SCALE_TO", "_KEYVAL"):
        return getattr(_rx(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_FIELD = {b"lm loss": 1, b"train_loss_step": 1, b"train_loss": 1, b"loss": 1, b"grad_norm": 2, b"grad norm": 2,
          b"learning_rate": 3, b"learning rate": 3, b"lr": 3, b"epoch": 4, b"global_step": 0,
          b"global_step/max_steps": 0, b"step": 0, b"iteration": 0, b"iter": 0}


def parse_line(text: bytes) -> Optional[tuple[Optional[int], Optional[float], Optional[float], Optional[float], Optional[float]]]:
    """(step, loss, grad_norm, lr, epoch) from one metric line, or None when it has no training loss."""
    out: list[Any] = [None, None, None, None, None]
    R = _RX or _rx()
    low = text.lower()
    if b"train_loss" not in low:
        # fast path: (key, value) pairs straight from C; only `train_loss` needs the match position
        get = _FIELD.get
        for key, val in R.keyval_fast.findall(low):
            k = get(key)
            if k is None or out[k] is not None:
                continue
            if k == 0:
                try:
                    out[0] = int(float(val))
                except (ValueError, OverflowError):
                    pass
            else:
                out[k] = _num(val)
        if out[1] is None:
            return None
        if out[0] is None:
            b = R._BAR.search(text)
            if b:
                out[0] = int(b.group(1))
        return tuple(out)  # type: ignore[return-value]
    for m in R._KEYVAL.finditer(low):
        k = _FIELD.get(m.group(1))
        if k is None or out[k] is not None:
            continue
        if k == 1 and m.group(1) == b"train_loss" and m.start() and text[m.start() - 1:m.start()] in (b"'", b'"'):
            continue    # the Trainer's end-of-run average, not a step
        if k == 0:
            try:
                out[0] = int(float(m.group(2)))
            except (ValueError, OverflowError):
                pass
        else:
            out[k] = _num(m.group(2))
    if out[1] is None:
        return None
    if out[0] is None:
        b = R._BAR.search(text)
        if b:
            out[0] = int(b.group(1))
    return tuple(out)  # type: ignore[return-value]


def _finite(x: Optional[float]) -> bool:
    return x is not None and math.isfinite(x)


class MetricTracker:
    """Bounded-memory store of a log's metric series plus the running counters the detectors need."""

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

    # ---------------------------------------------------------------- feeding
    def add(self, line: int, parsed: tuple, bar_step: Optional[int] = None) -> Record:
        step, loss, grad, lr, epoch = parsed
        if step is None:
            step = bar_step
        rec = Record(self.count, line, step, loss, grad, lr, epoch)
        self.count += 1
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
        elif _finite(loss):
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

    def feed_block(self, lines: bytes, view: bytes, line_base: int) -> None:
        th = self.th
        if self.pending:
            self.resolve(line_base)
        R = _RX or _rx()
        if search_raw(R.verflow_raw, R._VERFLOW, view) or search_raw(R.verflow_up_raw, R._VERFLOW_UP, view):
            self._overflows(lines, view, line_base)
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
            pos = view.rfind(b"loss", lo, hi) if reverse else view.find(b"loss", lo, hi)
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
        found = (_RX or _rx())._BAR.findall(view, max(0, ls - 1024), ls)
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
        R = _RX or _rx()
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
                if not (_finite(parsed[1]) and (parsed[2] is None or _finite(parsed[2]))):
                    self.first_nonfinite = Record(-1, line_base + nl, parsed[0] if parsed[0] is not None else
                                                  self._bar_before(view, ls), parsed[1], parsed[2], parsed[3], parsed[4])
                    return
                continue
            self.add(line_base + nl, parsed, self._bar_before(view, ls) if parsed[0] is None else None)

    def _overflows(self, lines: bytes, view: bytes, line_base: int) -> None:
        counted = 0
        nl = 0
        last_ls = -1
        R = _RX or _rx()
        for start, _ in spans(R.OVERFLOW, R.overflow_raw, view):
            ls, le = self._line_bounds(view, start)
            if ls == last_ls:
                continue
            last_ls = ls
            nl += lines.count(b"\n", counted, ls)
            counted = ls
            line = line_base + nl
            self.overflows += 1
            if not self.overflow_first_line:
                self.overflow_first_line = line
            self.overflow_last_line = line
            s = R._SCALE_TO.search(view, ls, le)
            if s:
                v = _num(s.group(1))
                if v is not None:
                    self.last_scale = v
                    self.min_scale = v if self.min_scale is None else min(self.min_scale, v)

    # ---------------------------------------------------------------- summary
    def records(self) -> list[Record]:
        """Head and tail records in log order (no duplicates)."""
        out = list(self.head)
        last = out[-1].index if out else -1
        out += [r for r in self.tail if r.index > last]
        return out

    def summary(self) -> dict[str, Any]:
        recs = self.records()
        losses = [r.loss for r in recs if _finite(r.loss)]
        d: dict[str, Any] = {"records": self.count, "sampled": self.sampled}
        if losses:
            d.update(first_loss=losses[0], last_loss=losses[-1], min_loss=min(losses))
        last = recs[-1] if recs else None
        if last is not None:
            d.update(last_step=self.last_step, last_line=last.line)
            if last.grad_norm is not None:
                d["last_grad_norm"] = last.grad_norm if math.isfinite(last.grad_norm) else str(last.grad_norm)
        if self.nonfinite:
            d["nonfinite"] = self.nonfinite
        if self.overflows:
            d["overflows"] = self.overflows
            if self.last_scale is not None:
                d["last_loss_scale"] = self.last_scale
        if self.spikes:
            d["spikes"] = self.spikes
        return d


# ------------------------------------------------------------------------------ detectors

@dataclass
class Anomaly:
    kind: str            # nan | overflow | flat | fall | spike
    category: str
    severity: str
    line: int
    last_line: int
    step: Optional[int]
    count: int
    numbers: dict[str, Any]


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return "?"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def detect(t: MetricTracker) -> list[Anomaly]:
    th = t.th
    out: list[Anomaly] = []
    recs = t.records()
    # NaN / inf
    if t.first_nonfinite is not None:
        r = t.first_nonfinite
        last = recs[-1] if recs else r
        last_bad = (last.loss is not None and not math.isfinite(last.loss)) or (
            last.grad_norm is not None and not math.isfinite(last.grad_norm))
        which = "loss" if r.loss is not None and not math.isfinite(r.loss) else "grad_norm"
        value = r.loss if which == "loss" else r.grad_norm
        sev = "error" if (t.nonfinite >= th.nan_error_min or last_bad) else "warning"
        lf = t.last_finite if t.last_finite is not None and t.last_finite.line < r.line else None
        out.append(Anomaly("nan", "nan-loss", sev, r.line, last.line, r.step, t.nonfinite, {
            "metric": which, "value": str(value), "at": r.at, "records": t.count,
            "last_finite_loss": _fmt(lf.loss) if lf else None, "last_finite_at": lf.at if lf else None,
            "persists": last_bad}))
    # repeated loss-scale overflow
    if t.overflows >= th.overflow_min:
        ratio = t.overflows / max(1, t.count) if t.count else 1.0
        floor = t.min_scale is not None and t.min_scale <= 1
        # not only start-up calibration: still overflowing in the second half of the logged steps
        persists = not recs or t.overflow_last_line >= (recs[0].line + recs[-1].line) / 2
        if (ratio >= th.overflow_ratio and persists) or floor:
            out.append(Anomaly("overflow", "fp16-overflow", "error", t.overflow_first_line, t.overflow_last_line,
                               None, t.overflows, {"overflows": t.overflows, "records": t.count,
                                                   "min_scale": _fmt(t.min_scale), "last_scale": _fmt(t.last_scale)}))
    finite = [r for r in recs if _finite(r.loss)]
    # flat loss (with grad_norm ~ 0 = no gradient reaches the weights)
    if t.first_nonfinite is None and len(finite) >= th.flat_min_records:
        run = finite[-th.flat_min_records:]
        # extend the run backwards while it stays flat
        i = len(finite) - th.flat_min_records
        ls = [r.loss for r in run]
        lo, hi = min(ls), max(ls)

        def flat(a: float, b: float) -> bool:
            return (b - a) <= th.flat_rel * abs((a + b) / 2) + th.flat_abs

        if flat(lo, hi):
            while i > 0 and flat(min(lo, finite[i - 1].loss), max(hi, finite[i - 1].loss)):  # type: ignore[arg-type]
                i -= 1
                lo, hi = min(lo, finite[i].loss), max(hi, finite[i].loss)  # type: ignore[type-var]
            run = finite[i:]
            grads = [r.grad_norm for r in run if r.grad_norm is not None]
            zero = bool(grads) and all(_finite(g) and abs(g) <= th.zero_grad for g in grads)
            lrs = [r.lr for r in run if r.lr is not None]
            lr_zero = bool(lrs) and all(lr == 0 for lr in lrs)
            sev = "error" if (zero or lr_zero) else "warning"
            out.append(Anomaly("flat", "no-grad", sev, run[0].line, run[-1].line, run[0].step, len(run), {
                "loss": _fmt(run[-1].loss), "from": run[0].at, "to": run[-1].at, "records": len(run),
                "grad_norm": _fmt(grads[-1]) if grads else None, "grad_zero": zero, "lr_zero": lr_zero}))
    # implausibly fast fall to near zero
    if t.first_nonfinite is None and finite and finite[0].loss >= th.fall_from:  # type: ignore[operator]
        first = finite[0]
        for r in finite[1:]:
            span = (r.step - first.step) if (r.step is not None and first.step is not None) else (r.index - first.index)
            if span > th.fall_within:
                break
            if r.loss < th.fall_below:  # type: ignore[operator]
                # how low it goes within the same span from the start
                span_recs = [x for x in finite if (
                    (x.step - first.step) if (x.step is not None and first.step is not None) else (x.index - first.index)
                ) <= th.fall_within]
                low = min((x.loss for x in span_recs if x.index >= r.index), default=r.loss)  # type: ignore[type-var]
                win = [x.grad_norm for x in span_recs if _finite(x.grad_norm)]
                gflat = bool(win) and min(win) > 0 and max(win) / min(win) <= th.grad_flat_ratio
                strong = low <= th.fall_strong and gflat  # type: ignore[operator]
                out.append(Anomaly("fall", "loss-suspicious", "error" if strong else "warning", r.line, r.line,
                                   r.step, 1, {"from_loss": _fmt(first.loss), "from": first.at, "loss": _fmt(r.loss),
                                               "at": r.at, "span": span, "grad_flat": gflat, "min_loss": _fmt(low),
                                               # only stated when it really stayed flat (the message says so)
                                               "grad_norm": _fmt(win[-1]) if win and gflat else None,
                                               "unit": "steps" if r.step is not None and first.step is not None else "records"}))
                break
    if any(a.kind == "fall" for a in out):
        out = [a for a in out if a.kind != "flat"]     # a plateau near zero after the fall is the same story
    # spikes
    if t.spikes and t.first_spike is not None:
        r, med = t.first_spike
        out.append(Anomaly("spike", "loss-spike", "warning", r.line, r.line, r.step, t.spikes, {
            "loss": _fmt(r.loss), "baseline": _fmt(med), "at": r.at, "factor": round(r.loss / med, 1) if med else None,
            "spikes": t.spikes}))
    return out


_DETECTOR_TEXT: dict[str, Any] = {}


def detector_texts() -> dict[str, Any]:
    """User-facing text of every anomaly kind, from rules/detectors.yaml (data, like rule prose).

    Read only when an anomaly is reported, so a healthy log never imports yaml."""
    if not _DETECTOR_TEXT:
        from importlib.resources import files

        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        text = files("llmtriage.rules").joinpath("detectors.yaml").read_text(encoding="utf-8")
        _DETECTOR_TEXT.update(yaml.load(text, Loader=loader))
    return _DETECTOR_TEXT


RULE_IDS = {"nan": "metric-nan-loss", "overflow": "metric-fp16-overflow", "flat": "metric-flat-loss",
            "fall": "metric-fast-fall", "spike": "metric-loss-spike"}


def _render(template: str, values: dict[str, Any]) -> str:
    from .matcher import render_template

    return render_template(template, {k: ("" if v is None else str(v)) for k, v in values.items()})


def to_findings(anomalies: list[Anomaly], existing: list[Any], lang: Optional[str]) -> list[Any]:
    """Findings for the anomalies, skipping those a YAML rule of the same category already reports
    as an error (the rule's text is more specific; the numbers stay in report.extra['metrics'])."""
    from .findings import Finding

    zh = lang == "zh"
    have_err = {f.category for f in existing if f.severity == "error"}
    have_any = {f.category for f in existing}
    out = []
    for a in anomalies:
        if a.category in have_err:
            continue
        if a.severity != "error" and a.category in have_any:
            continue
        text = detector_texts()[a.kind]["zh" if zh else "en"]
        title, msg, what, why = text["title"], text["message"], text["what"], text["why"]
        values = dict(a.numbers, line=a.line, last_line=a.last_line, count=a.count)
        if zh and a.kind == "fall":
            values["unit"] = "步" if a.numbers.get("unit") == "steps" else "条记录"
        message = _render(msg, values)
        category = a.category if a.category != "loss-spike" else "loss-suspicious"
        out.append(Finding(
            rule_id=RULE_IDS[a.kind], category=category, severity=a.severity, title=title, message=message,
            line=a.line, last_line=a.last_line, evidence=message, count=a.count,
            captures={k: str(v) for k, v in a.numbers.items() if v is not None},
            cause=why, explanation=what, role="cause" if a.kind != "spike" else "symptom",
            confidence="medium" if a.kind in ("fall", "spike") else "high",
            priority={"nan": 58, "overflow": 50, "flat": 45, "fall": 30, "spike": 10}[a.kind],
            fixes=[{"title": f["title"], "detail": f["detail"]} for f in text["fixes"]],
        ))
    return out
