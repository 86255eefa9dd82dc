"""A distributed job stopped from outside long after its last progress: it hung.

Slurm prints when it cancelled a job (`CANCELLED AT <date-time> DUE TO TIME LIMIT`). When the log's
last progress line is followed by a time stamp hours before that, and the gap is many step times
long, the time limit only ended a job that had stopped working: the hang is the root cause and the
cancellation its symptom. Only for distributed jobs (ranks, NCCL, a launcher), where a rank waiting
in a collective for a peer that never comes is what such a silent stop is; the finding takes the
collective-hang category (rules/detectors.yaml `hung_until_killed`, thresholds in
rules/verdict.yaml `hung_until_killed`).

A kill short of the time limit (a user's scancel, a SIGTERM, a deleted pod) is judged the same way
against the job's own logging cadence: the median interval between its time-stamped progress lines.
A silence of many such intervals (and at least `min_gap_s`) before the kill is a stall the kill only
ended. A checkpoint save or an evaluation begun after the last progress and still running weighs
against it: the silence must then outlast the job's own longest earlier save or evaluation (or
`min_gap_phase_s` when the log shows none).
"""
from __future__ import annotations

import re
from datetime import datetime
from statistics import median
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled
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


def _bar_advanced(row: str) -> bool:
    """The last progress is a tqdm bar with no time stamp after the last stamped line, and it had counted
    steps. Its elapsed field runs from the bar's own start, which the log does not date (evaluations,
    saves and earlier undated bars may lie between the stamp and that start), so the stamp plus the
    elapsed time is only the earliest the redraw can have been: the job was advancing when last seen, and
    the silence before the kill cannot be measured. A bar still at 0 steps never advanced at all."""
    found = _BAR_ELAPSED.findall(row)
    return bool(found) and int(found[-1][0]) > 0


def _hours(s: float) -> str:
    h, m = int(s // 3600), int(s % 3600 // 60)
    return f"{h} h {m:02d} min" if h else f"{m} min"


def _kill(errors: list[Finding], spec: dict[str, Any]) -> tuple[Optional[Finding], dict[str, Any]]:
    """The first error finding that is a kill of one of the spec's `kills` kinds, and that kind."""
    for kind in spec["kills"]:
        for f in errors:
            if (f.rule_id in kind.get("rules", ()) or f.category in kind.get("categories", ())) \
                    and compiled(kind["evidence"]).search(f.evidence) \
                    and not (kind.get("unless") and compiled(kind["unless"]).search(f.evidence)):
                return f, kind
    return None, {}


def _kill_time(kill: Finding, scanner: Scanner, after: int) -> Optional[float]:
    """The kill's own time stamp, else the first full one within `after` lines after it (a wrapper's
    closing line): at or after the kill, so the silence can come out longer than the log shows by at
    most those lines."""
    stamp = parse_time(kill.evidence)
    if stamp is not None and stamp[0] == "iso":
        return stamp[1]
    for n, raw in scanner.rows(kill.line):
        if n > kill.line + after:
            break
        stamp = parse_time(raw.decode("utf-8", "replace"))
        if stamp is not None and stamp[0] == "iso":
            return stamp[1]
    return None


class _Window:
    """What the rows before the kill say: the progress line's time, the job's logging cadence, its
    earlier saves/evaluations and one still running after the last progress."""

    def __init__(self, scanner: Scanner, progress: int, kill_line: int, kill_at: float, long_phase: str) -> None:
        year = datetime.fromtimestamp(kill_at).year
        self.since: Optional[float] = None
        self.at_line = 0
        self.prog_row = ""
        self.before: Optional[float] = None     # the last time stamp at or before the progress line
        self.before_line = 0
        self.distributed = "distributed-job" in scanner.seen
        self.in_flight = False                  # a save/evaluation began after the last progress
        prog_times: list[float] = []
        phase_at: Optional[float] = None
        self.phases: list[float] = []           # earlier saves/evaluations: start to the next progress
        phase_rx = compiled(long_phase) if long_phase else None
        for n, raw in scanner.rows(progress - 200):
            if n >= kill_line:
                break
            text = raw.decode("utf-8", "replace")
            self.distributed = self.distributed or bool(_DISTRIBUTED.search(text))
            if n == progress:
                self.prog_row = text
            # of the line's time stamps the latest not after the kill: a prefix a collector added
            # later is another clock
            stamps = [t for kind, t in parse_times(text, year) if kind == "iso" and t <= kill_at]
            is_phase = phase_rx is not None and bool(phase_rx.search(text))
            if n > progress and is_phase:
                self.in_flight = True
            if self.since is None or n < progress:
                if stamps and n >= progress:
                    self.since, self.at_line = max(stamps), n
                elif stamps:
                    self.before, self.before_line = max(stamps), n
            if n > progress or not stamps:
                continue
            if is_phase and phase_at is None:
                phase_at = max(stamps)
            elif scanner.is_progress(raw):
                if phase_at is not None and max(stamps) > phase_at:
                    self.phases.append(max(stamps) - phase_at)
                phase_at = None
                prog_times.append(max(stamps))
        gaps = [b - a for a, b in zip(prog_times, prog_times[1:]) if b > a]
        self.cadence: Optional[float] = median(gaps) if len(gaps) >= 3 else None


def _needed(kind: dict[str, Any], win: _Window, step: Optional[float], inferred: bool) -> float:
    """The silence before the kill that makes a hang, for this kind of kill."""
    known = [float(kind["step_factor"]) * step] if step else []
    if win.cadence and kind.get("cadence_factor"):
        known.append(float(kind["cadence_factor"]) * win.cadence)
    need = max([float(kind["min_gap_s"]), *known]) if known else float(kind["min_gap_unknown_s"])
    if inferred:
        need = max(need, float(kind["min_gap_unknown_s"]))
    if win.in_flight and kind.get("phase_factor"):
        need = max(need, float(kind["phase_factor"]) * max(win.phases) if win.phases
                   else float(kind["min_gap_phase_s"]))
    return need


def hung_until_killed(findings: list[Finding], scanner: Scanner, report: Any, spec: Optional[dict[str, Any]],
                      lang: Optional[str]) -> None:
    if not spec or any(f.judgement and f.judgement.get("context") == "hung-until-killed" for f in findings):
        return      # judged already (a kill a rule named, before the verdict named the rest)
    errors = [f for f in findings if f.severity == "error"]
    kill, kind = _kill(errors, spec)
    if kill is None or any(f.line > 0 and f.category not in spec["over"] and f is not kill for f in errors):
        return      # another error explains the job; this is only about a kill nothing else explains
    kill_at = _kill_time(kill, scanner, int(kind.get("stamp_after", 0)))
    progress = scanner.last_progress_before(kill.line)
    if kill_at is None or not progress:
        return
    win = _Window(scanner, progress, kill.line, kill_at, spec.get("long_phase", "") if kind.get("phase_factor") else "")
    since, at_line, inferred = win.since, win.at_line, False
    if since is None and win.before is not None:
        if _bar_advanced(win.prog_row):
            return      # an undated bar that was counting steps: the log cannot date its last redraw
        since, at_line = _bar_time(win.prog_row, win.before), win.before_line
        inferred = since is not None
    if since is None or not win.distributed:
        return
    gap = kill_at - since
    step = _step_seconds(report, win.prog_row)
    if gap < _needed(kind, win, step, inferred) or gap > float(spec["max_gap_s"]):
        return      # no hang, or two clocks that do not belong together (a prefix added later)
    entry = detector_texts()["hung_until_killed"]
    text = detector_text(entry, lang)
    text = {**text, **text.get(kind.get("texts", ""), {})}     # a kill short of the time limit: its own words
    values = {"gap": _hours(gap), "line": str(progress), "at": str(at_line),
              "killed": kill.captures.get("time", "") or datetime.fromtimestamp(kill_at).strftime("%Y-%m-%dT%H:%M:%S"),
              "step": f"{step:.0f}" if step and step >= 1 else "",
              "cadence": f"{win.cadence:.0f}" if win.cadence and kind.get("cadence_factor") else ""}
    bar = _BAR_ELAPSED.findall(win.prog_row)
    if bar:
        values["done"] = bar[-1][0]     # steps the bar had counted: 0 = no step ever completed
    findings.append(detector_finding(entry, text, values, line=progress, last_line=kill.line, default_priority=48))
    kill.judgement = {"context": "hung-until-killed", "severity_was": kill.severity,
                      "reason": render_template(text["kill_reason"], values).strip()}
    kill.severity = "warning"
