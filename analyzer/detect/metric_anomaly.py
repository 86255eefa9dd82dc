"""The record a metric detector returns (`Anomaly`) and the helpers every detector module shares:
`fmt` (a number as the messages print it) and `median`. `metric_findings` turns anomalies into findings."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class Anomaly:
    kind: str            # a key of RULE_IDS
    category: str
    severity: str
    line: int
    last_line: int
    step: Optional[int]
    count: int
    numbers: dict[str, Any]
    priority: Optional[int] = None      # overrides PRIORITY[kind] when context changes the ranking


def fmt(x: Optional[float]) -> str:
    if x is None:
        return "?"
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def median(xs: list[float]) -> float:
    d = sorted(xs)
    n = len(d)
    return d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
