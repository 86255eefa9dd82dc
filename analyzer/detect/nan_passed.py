"""A NaN loss that did not stick (rules/verdict.yaml `nan_passed`).

Once a NaN reaches the weights through an optimizer step, every later forward pass is NaN too: a run that
diverged prints NaN on every record from then on. A log whose NaN records are isolated (each one followed by
a finite loss, never more than `max_run` in a row) and that goes on for `min_after` finite records after the
last one, at the level it had before the first, did not diverge: those steps were skipped (fp16 loss scaling,
a trainer that drops a non-finite step, one bad micro-batch whose update was discarded) and the weights
stayed finite. Only for a log that did not die. Reads the loss series the metric tracker parsed (its head and
tail records, `MetricTracker.records`); where the records after the finding are not all kept (a trimmed
middle, a tracker that samples a long log) it does not judge."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr, verdict_spec


def _losses(records: Sequence[Any], first: int, comments: set[int]) -> Optional[list[float]]:
    """The losses of the records from line `first` on, or None where some records between them were not kept.
    Lines in `comments` (a question pasted with the log: `# some loss = nan, is it rational?`) are no records."""
    recs = [r for r in records if r.line >= first]
    if any(b.index != a.index + 1 for a, b in zip(recs, recs[1:])):
        return None
    return [float(r.loss) for r in recs if r.loss is not None and r.line not in comments]


def nan_passed(findings: list[Finding], metrics: Any, scanner: Scanner, status: str, lang: Optional[str]) -> None:
    """Demote a NaN-loss error whose NaN records stayed isolated and were followed by finite losses.
    `metrics`: the scan's metric tracker (detect/metrics.py), or None."""
    spec: Any = verdict_spec().get("nan_passed")
    if not spec or status == "crashed" or metrics is None or metrics.sampled:
        return
    records = metrics.records()
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "error" or f.judgement is not None:
            continue
        first_line = max(1, f.line - int(spec["lookback"]))
        comments = {n for n, raw in scanner.rows(first_line) if raw.lstrip().startswith(b"#")}
        vals = _losses(records, first_line, comments)
        nans = [i for i, v in enumerate(vals or ()) if not math.isfinite(v)]
        if not vals or not nans:
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
