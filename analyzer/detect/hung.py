"""A job the scheduler stopped at its time limit long after its last progress: it hung.

Slurm prints when it cancelled a job (`CANCELLED AT <date-time> DUE TO TIME LIMIT`). When the log's
last progress line is followed by a time stamp hours before that, and the gap is many step times
long, the time limit only ended a job that had stopped working: the hang is the root cause and the
cancellation its symptom. Only for distributed jobs (ranks, NCCL, a launcher), where a rank waiting
in a collective for a peer that never comes is what such a silent stop is; the finding takes the
collective-hang category (rules/detectors.yaml `hung_until_killed`, thresholds in
rules/verdict.yaml `hung_until_killed`).
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.engine.logwindow import parse_time, parse_times
from llmtriage.findings import Finding
from llmtriage.templates import render_template

_RATE = re.compile(r"([\d.]+)\s*(s/it|it/s)")
# a tqdm bar's elapsed time: "| 0/1875 [00:00<?, ?it/s]", "| 12/400 [1:02:41<5:08:12, ...]"
_BAR_ELAPSED = re.compile(r"\|\s*(\d+)/\d+ \[(?:(\d+):)?(\d{1,2}):(\d{2})<")
_DISTRIBUTED = re.compile(r"NCCL|\[rank\d+\]|torchrun|torch\.distributed|WORLD_SIZE|world_size|deepspeed|ProcessGroup",
                          re.IGNORECASE)


def _step_seconds(report: Any, row: str) -> Optional[float]:
    tp = report.extra.get("throughput") or {}
    if tp.get("median_step_s"):
        return float(tp["median_step_s"])
    m = _RATE.search(row)
    if m:
        v = float(m.group(1))
        return v if m.group(2) == "s/it" else (1.0 / v if v else None)
    return None


def _bar_time(row: str, before: float) -> Optional[float]:
    """No line after the last progress carries a time stamp (a tqdm bar, then nothing until the kill): the
    bar's own elapsed time, counted from the last time stamp before it, dates it; the bar started after
    that stamp, or while it ran, so the hang is never made longer than the log shows. None without an
    elapsed field."""
    found = _BAR_ELAPSED.findall(row)
    if not found:
        return None
    _, h, m, s = found[-1]
    return before + int(h or 0) * 3600 + int(m) * 60 + int(s)


def _hours(s: float) -> str:
    h, m = int(s // 3600), int(s % 3600 // 60)
    return f"{h} h {m:02d} min" if h else f"{m} min"


def hung_until_killed(findings: list[Finding], scanner: Scanner, report: Any, spec: Optional[dict[str, Any]],
                      lang: Optional[str]) -> None:
    if not spec:
        return
    errors = [f for f in findings if f.severity == "error"]
    kill = next((f for f in errors if f.rule_id in spec["rules"]
                 and re.search(spec["evidence"], f.evidence)), None)
    if kill is None or any(f.line > 0 and f.category not in spec["over"] and f is not kill for f in errors):
        return      # another error explains the job; this is only about a kill nothing else explains
    stamp = parse_time(kill.evidence)
    progress = scanner.last_progress_before(kill.line)
    if stamp is None or stamp[0] != "iso" or not progress:
        return
    year = datetime.fromtimestamp(stamp[1]).year
    since, at_line, prog_row = None, 0, ""
    before, before_line = None, 0       # the last time stamp at or before the progress line
    distributed = False
    for n, raw in scanner.rows(progress - 200):
        text = raw.decode("utf-8", "replace")
        distributed = distributed or bool(_DISTRIBUTED.search(text))
        if n == progress:
            prog_row = text
        if n < kill.line and (since is None or n < progress):
            # of the line's time stamps the latest not after the kill: a prefix a collector added
            # later is another clock
            stamps = [t for kind, t in parse_times(text, year) if kind == "iso" and t <= stamp[1]]
            if stamps and n >= progress:
                since, at_line = max(stamps), n
            elif stamps:
                before, before_line = max(stamps), n
    inferred = False
    if since is None and before is not None:
        since, at_line = _bar_time(prog_row, before), before_line
        inferred = since is not None
    if since is None or not distributed:
        return
    gap = stamp[1] - since
    step = _step_seconds(report, prog_row)
    need = max(float(spec["min_gap_s"]), float(spec["step_factor"]) * step) if step else float(spec["min_gap_unknown_s"])
    if inferred:
        need = max(need, float(spec["min_gap_unknown_s"]))
    if gap < need or gap > float(spec["max_gap_s"]):
        return      # no hang, or two clocks that do not belong together (a prefix added later)
    entry = detector_texts()["hung_until_killed"]
    text = entry["zh" if lang == "zh" else "en"]
    values = {"gap": _hours(gap), "line": str(progress), "at": str(at_line),
              "killed": kill.captures.get("time", ""), "step": f"{step:.0f}" if step and step >= 1 else ""}
    bar = _BAR_ELAPSED.findall(prog_row)
    if bar:
        values["done"] = bar[-1][0]     # steps the bar had counted: 0 = no step ever completed
    message = render_template(text["message"], values).strip()
    findings.append(Finding(
        rule_id=entry["rule_id"], category=entry["category"], severity="error", title=text["title"], message=message,
        line=progress, last_line=kill.line, evidence=message, captures={k: v for k, v in values.items() if v},
        cause=text["why"], explanation=text["what"], role="cause", confidence="medium",
        priority=int(entry.get("priority", 48)),
        fixes=[{"title": f["title"], "detail": f["detail"]} for f in text["fixes"]]))
    kill.judgement = {"context": "hung-until-killed", "severity_was": kill.severity,
                      "reason": render_template(text["kill_reason"], values).strip()}
    kill.severity = "warning"
