"""A NaN loss that did not stick (rules/verdict.yaml `nan_passed`).

Once a NaN reaches the weights through an optimizer step, every later forward pass is NaN too: a run that
diverged prints NaN on every record from then on. A log whose NaN records are isolated (each one followed by
a finite loss, never more than `max_run` in a row) and that goes on for `min_after` finite records after the
last one, at the level it had before the first, did not diverge: those steps were skipped (fp16 loss scaling,
a trainer that drops a non-finite step, one bad micro-batch whose update was discarded) and the weights
stayed finite. Only for a log that did not die, and only from the rows still kept (the last two blocks)."""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr, verdict_spec


# the training loss of a record: `'loss': 0.25`, `"loss": NaN`, `loss=0.25`, `loss: nan` (not eval_loss, not loss_scale)
_LOSS = re.compile(rb"""(?i)(?<![\w/.-])['"]?loss['"]?\s*[:=]\s*['"]?(nan|[-+]?inf(?:inity)?|[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\b""")


def _losses(scanner: Scanner, first: int) -> list[float]:
    out: list[float] = []
    for _, raw in scanner.rows(first):
        if raw.lstrip().startswith(b"#"):
            continue        # a comment line (a question pasted with the log) is no record
        m = _LOSS.search(raw)
        if m:
            out.append(float(m.group(1)))
    return out


def nan_passed(findings: list[Finding], scanner: Scanner, status: str, lang: Optional[str]) -> None:
    """Demote a NaN-loss error whose NaN records stayed isolated and were followed by finite losses."""
    spec: Any = verdict_spec().get("nan_passed")
    if not spec or status == "crashed":
        return
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "error" or f.judgement is not None:
            continue
        vals = _losses(scanner, max(1, f.line - int(spec["lookback"])))
        nans = [i for i, v in enumerate(vals) if not math.isfinite(v)]
        if not nans:
            continue
        first, last = nans[0], nans[-1]
        after = vals[last + 1:]
        run = longest = 0
        for v in vals[first:last + 1]:
            run = run + 1 if not math.isfinite(v) else 0
            longest = max(longest, run)
        before = [v for v in vals[:first] if math.isfinite(v)]
        level = sorted(before)[len(before) // 2] if before else None
        tail = sorted(after)[len(after) // 2] if after else None
        if (len(after) < int(spec["min_after"]) or longest > int(spec["max_run"])
                or (level is not None and tail is not None and tail > float(spec["level_factor"]) * max(level, 1e-6))):
            continue
        f.judgement = {"context": "nan-passed", "severity_was": f.severity,
                       "reason": tr(spec["reason"], lang, nans=len(nans), after=len(after))}
        f.severity = spec["severity"]
