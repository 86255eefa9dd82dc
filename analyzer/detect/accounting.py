"""A job killed from outside whose own accounting shows its memory at the limit: host memory ran out.

Slurm's cgroup memory limit kills a step with SIGKILL. Unless slurmstepd prints its "oom_kill event"
line (the kernel-oom-killer rule), the log shows only "srun: error: task 0: Killed" or a launcher's
exit code -9/137, which read as an outside kill (scancel, preemption). Users often paste the job's
accounting under the log, and it settles the question:

- `sacct ... --format=...,ReqMem,MaxRSS` rows where a step's MaxRSS reached (ratio of) its ReqMem, or
  a step in state OUT_OF_MEMORY;
- `seff` lines "Memory Efficiency: 99.98% of 8.00 GB".

Then the memory limit is the root cause (host-oom) and the kill its symptom. Only when no error
outside `over` (rules/verdict.yaml `memory_at_limit`) explains the job. Texts: rules/detectors.yaml
`memory_at_limit`.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.engine.redact import clip
from llmtriage.findings import Finding
from llmtriage.templates import render_template

_DASHES = re.compile(r"^[\s-]*-{3,}[\s-]*$")
_MEM = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)(?P<per>[nc]?)$")
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SEFF = re.compile(r"Memory Efficiency:\s*(?P<pct>\d+(?:\.\d+)?)%\s+of\s+(?P<req>\d+(?:\.\d+)?\s*[KMGT]i?B)")


def _bytes(value: str, default_unit: str) -> Optional[tuple[float, str]]:
    m = _MEM.match(value.strip())
    if not m:
        return None
    return float(m.group("n")) * _UNIT[m.group("unit") or default_unit], m.group("per")


def _columns(header: str, rule_line: str) -> list[tuple[int, int, str]]:
    """Column spans from sacct's dash line under the header, with the header's name in each span."""
    out = []
    for m in re.finditer(r"-+", rule_line):
        out.append((m.start(), m.end(), header[m.start():m.end() + 1].strip()))
    return out


def _row_text(rows: list[tuple[int, str]], line: int) -> str:
    return next((t for n, t in rows if n == line), "")


def sacct_at_limit(rows: list[tuple[int, str]], ratio: float) -> Optional[dict[str, str]]:
    """The first sacct row (line, step, MaxRSS, ReqMem) whose step used `ratio` of its requested memory,
    or whose state is OUT_OF_MEMORY, from a fixed-width or `--parsable` table among `rows`."""
    for i, (_, head) in enumerate(rows):
        if "MaxRSS" not in head or "ReqMem" not in head:
            continue
        if "|" in head:
            names = [c.strip() for c in head.split("|")]
            body = rows[i + 1:i + 60]
            cells = [(n, [c.strip() for c in t.split("|")]) for n, t in body if "|" in t]
        elif i + 1 < len(rows) and _DASHES.match(rows[i + 1][1]):
            cols = _columns(head, rows[i + 1][1])
            names = [c[2] for c in cols]
            cells = []
            for n, t in rows[i + 2:i + 60]:
                if not t.strip():
                    break
                cells.append((n, [t[a:b + 1].strip() for a, b, _ in cols]))
        else:
            continue
        if "MaxRSS" not in names or "ReqMem" not in names:
            continue
        rss_i, req_i = names.index("MaxRSS"), names.index("ReqMem")
        state_i = names.index("State") if "State" in names else None
        step_i = names.index("JobID") if "JobID" in names else None
        for n, vals in cells:
            if len(vals) <= max(rss_i, req_i):
                continue
            step = vals[step_i] if step_i is not None and step_i < len(vals) else ""
            state = vals[state_i] if state_i is not None and state_i < len(vals) else ""
            rss, req = _bytes(vals[rss_i], "K"), _bytes(vals[req_i], "M")
            hit = state.startswith("OUT_OF_ME")
            if rss and req and req[0] > 0 and req[1] != "c":      # per-CPU requests need the CPU count
                hit = hit or rss[0] >= ratio * req[0]
            if hit:
                return {"line": str(n), "step": step, "rss": vals[rss_i], "req": vals[req_i],
                        "state": state, "row": _row_text(rows, n)}
    return None


def seff_at_limit(rows: Iterable[tuple[int, str]], ratio: float) -> Optional[dict[str, str]]:
    for n, text in rows:
        m = _SEFF.search(text)
        if m and float(m.group("pct")) >= 100 * ratio:
            return {"line": str(n), "step": "", "rss": m.group("pct") + "%", "req": m.group("req"), "state": "",
                    "row": text}
    return None


def memory_at_limit(findings: list[Finding], scanner: Scanner, report: Any, spec: Optional[dict[str, Any]],
                    lang: Optional[str]) -> None:
    if not spec:
        return
    errors = [f for f in findings if f.severity == "error"]
    if any(f.category not in spec["over"] for f in errors):
        return      # another error explains the job
    if not errors and report.extra.get("status") != "crashed":
        return      # accounting of a job that did not die
    rows = [(n, raw.decode("utf-8", "replace").rstrip("\r")) for n, raw in scanner.rows(0)]
    ratio = float(spec["ratio"])
    hit = sacct_at_limit(rows, ratio) or seff_at_limit(rows, ratio)
    if hit is None:
        return
    entry = detector_texts()["memory_at_limit"]
    text = detector_text(entry, lang)
    findings.append(detector_finding(entry, text, hit, line=int(hit["line"]), evidence=clip(hit["row"].strip(), 2000),
                                     default_priority=60, captures={k: v for k, v in hit.items() if v and k != "row"}))
    reason = render_template(text["kill_reason"], hit).strip()
    for f in errors:
        f.judgement = {"context": "memory-at-limit", "severity_was": f.severity, "reason": reason}
        f.severity = "warning"
