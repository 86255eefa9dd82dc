"""Integrations with training frameworks. transformers is imported only when a class is used::

    from llmtriage.workflows.integrations import LlmtriageCallback      # needs transformers
    trainer = Trainer(..., callbacks=[LlmtriageCallback(action="stop")])

`LlmtriageCallback` watches every `on_log` of a `transformers.Trainer`. Each logged dict is
turned into the line the Trainer prints (`{'loss': nan, 'grad_norm': nan, ...}`) and the recent
lines go through the same rules and detectors as a saved log; a few direct checks on the numbers
back them up. It reports, once per rule:

* NaN/Inf loss or grad_norm (`trainer-loss-nan`, `trainer-grad-norm-nan`, error);
* a flat loss with zero grad_norm over `flat_logs` consecutive logs (`trainer-zero-loss-zero-grad`
  when the loss is 0, else `trainer-flat-loss-zero-grad`, category no-grad; error);
* an implausibly fast loss drop early in training (`trainer-loss-near-zero-early`, warning).

`action="warn"` (default) logs a warning; `action="stop"` also sets `control.should_training_stop`
when a finding's severity is in `stop_on` (default: error). Findings are kept in `.findings`.
"""
from __future__ import annotations

import logging
import math
from collections import deque
from typing import Any, Optional

from llmtriage import get_engine
from llmtriage.engine.matcher import scan_bytes
from llmtriage.workflows.envdoctor import make_finding

logger = logging.getLogger("llmtriage")
CATEGORIES = {"nan-loss", "no-grad", "loss-suspicious", "fp16-overflow"}
__all__ = ["LlmtriageCallback", "callback_class", "MetricWatcher"]


def _num(v: Any) -> Optional[float]:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class MetricWatcher:
    """Framework-independent core: feed it logged metric dicts, get new findings back."""

    def __init__(self, *, engine: Any = None, flat_logs: int = 3, fast_drop_ratio: float = 0.02,
                 fast_drop_floor: float = 0.05, early_fraction: float = 0.1, history: int = 200):
        if engine is None:
            engine = get_engine()
        self.engine = engine
        self.flat_logs = flat_logs
        self.fast_drop_ratio = fast_drop_ratio
        self.fast_drop_floor = fast_drop_floor
        self.early_fraction = early_fraction
        self.lines: deque[str] = deque(maxlen=history)
        self.reported: set[str] = set()
        self.findings: list[Any] = []
        self.first_loss: Optional[float] = None
        self.recent: deque[tuple[float, Optional[float]]] = deque(maxlen=flat_logs)
        self.n_logs = 0

    def _new(self, f: Any) -> bool:
        if f.rule_id in self.reported:
            return False
        self.reported.add(f.rule_id)
        self.findings.append(f)
        return True

    def feed(self, logs: dict[str, Any], step: int = 0, max_steps: int = 0) -> list[Any]:
        if not logs:
            return []
        self.n_logs += 1
        line = f"{dict(logs)}"
        self.lines.append(line)
        new: list[Any] = []
        rep = scan_bytes(self.engine, ("\n".join(self.lines) + "\n").encode(), "trainer")
        for f in rep.findings:
            if f.category in CATEGORIES and self._new(f):
                f.evidence = f.evidence or line
                new.append(f)
        loss, gn = _num(logs.get("loss")), _num(logs.get("grad_norm"))
        for key in ("loss", "eval_loss", "train_loss"):
            v = _num(logs.get(key))
            if v is not None and not math.isfinite(v):
                f = make_finding(self.engine, "trainer-loss-nan", "error", f"{key} is {v} at step {step}", line)
                if self._new(f):
                    new.append(f)
        if gn is not None and not math.isfinite(gn):
            rid = "trainer-grad-norm-nonfinite-step" if loss is not None and math.isfinite(loss) and loss != 0 \
                else "trainer-grad-norm-nan"
            f = make_finding(self.engine, rid, None, f"grad_norm is {gn} at step {step} (loss {loss})", line)
            if self._new(f):
                new.append(f)
        if loss is not None and math.isfinite(loss):
            self.recent.append((loss, gn))
            if (len(self.recent) == self.flat_logs and all(g is not None and g == 0 for _, g in self.recent)
                    and max(x for x, _ in self.recent) - min(x for x, _ in self.recent) <= 1e-6 * max(1.0, abs(loss))):
                if loss == 0:
                    f = make_finding(self.engine, "trainer-zero-loss-zero-grad", "error",
                                 f"loss and grad_norm are 0 for {self.flat_logs} logs (step {step})", line)
                else:
                    f = make_finding(self.engine, "trainer-flat-loss-zero-grad", "error",
                                 f"loss is flat at {loss} with grad_norm 0 for {self.flat_logs} logs (step {step}): "
                                 "no parameter is being trained", line, category="no-grad",
                                 title="Loss is flat and grad_norm is 0: nothing is being trained")
                if self._new(f):
                    new.append(f)
            if self.first_loss is None:
                self.first_loss = loss
            early = max_steps <= 0 or step <= max(1, int(max_steps * self.early_fraction))
            if (early and self.n_logs > 1 and self.first_loss > 0 and loss < self.fast_drop_floor
                    and loss < self.first_loss * self.fast_drop_ratio and loss != 0):
                f = make_finding(self.engine, "trainer-loss-near-zero-early", "warning",
                             f"loss fell from {self.first_loss:.4g} to {loss:.4g} by step {step} of {max_steps or '?'}: "
                             "implausibly fast (label leakage?)", line)
                if self._new(f):
                    new.append(f)
        return new


def callback_class() -> type:
    """Build (once) the TrainerCallback subclass; imports transformers."""
    global _CLASS
    if _CLASS is not None:
        return _CLASS
    from transformers import TrainerCallback   # deferred: transformers is heavy and optional

    class LlmtriageCallback(TrainerCallback):  # type: ignore[misc, valid-type]
        """Warn about (or stop on) NaN/Inf loss, flat loss with zero grad_norm and implausibly fast drops."""

        def __init__(self, action: str = "warn", *, stop_on: tuple[str, ...] = ("error",), engine: Any = None,
                     stream: Any = None, **watch_opts: Any):
            if action not in ("warn", "stop"):
                raise ValueError("action must be 'warn' or 'stop'")
            self.action = action
            self.stop_on = tuple(stop_on)
            self.stream = stream
            self.watcher = MetricWatcher(engine=engine, **watch_opts)
            self.stopped_by: Any = None

        @property
        def findings(self) -> list[Any]:
            return self.watcher.findings

        def on_log(self, args: Any, state: Any, control: Any, logs: Optional[dict[str, Any]] = None,
                   **kwargs: Any) -> Any:
            if not logs or not state.is_world_process_zero:
                return control
            for f in self.watcher.feed(logs, step=state.global_step, max_steps=state.max_steps):
                msg = f"llmtriage: {f.severity} [{f.rule_id}] {f.title}: {f.message}"
                if f.fixes:
                    msg += f" — fix: {f.fixes[0]['title']}"
                if self.stream is not None:
                    self.stream.write(msg + "\n")
                    self.stream.flush()
                logger.warning(msg)
                if self.action == "stop" and f.severity in self.stop_on:
                    control.should_training_stop = True
                    if self.stopped_by is None:
                        self.stopped_by = f
            return control

    _CLASS = LlmtriageCallback
    return _CLASS


_CLASS: Optional[type] = None


def __getattr__(name: str) -> Any:
    if name == "LlmtriageCallback":
        return callback_class()
    raise AttributeError(f"module 'llmtriage.workflows.integrations' has no attribute {name!r}")
