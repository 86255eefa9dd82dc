"""A requeued job whose next attempt died reading the checkpoint its previous attempt was killed writing.

A scheduler stop (preemption, time limit, a cancel) that lands while a checkpoint is being written leaves a
partial checkpoint behind: some shards, no `.metadata`, a truncated file. The job is requeued, its next
attempt finds that checkpoint as the latest one and dies loading it: "No such file or directory:
.../model_rank0.pt", a missing DCP `.metadata`, a truncated torch.save file. Read alone, that error says the path is
wrong (weights-not-found) or names nothing (unknown); read with the previous attempt, the checkpoint is
incomplete, and resubmitting dies the same way until the partial checkpoint is removed or skipped.

The verdict has already judged the stop history (`requeued-then-failed`: a resume marker after it, then a
death). Here: the stop came within `max_lines` after a save began (rules/verdict.yaml markers of kind `save`)
with no save reported finished in between, and the error that now leads the report is a checkpoint read
(`reads`, `evidence` of rules/verdict.yaml `interrupted_save`). Then `verdict-resumed-interrupted-save`
(checkpoint-corrupt; texts in rules/detectors.yaml `interrupted_save`) is the root cause and the read error a
warning beside it.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.findings import Finding
from llmtriage.templates import render_template


def _save_cut_short(kill_line: int, scanner: Scanner, max_lines: int) -> Optional[int]:
    """The line of the save the stop at `kill_line` interrupted: the last save marker before the stop is a
    save that began (not one that finished), at most `max_lines` before it."""
    last: Optional[tuple[int, str]] = None
    for line, name, _ in sorted(scanner.hits.get("save", ())):
        if line > kill_line:
            break
        if last is None or line > last[0] or name == "save-finished":
            last = (line, name)         # (a line that both begins and reports a save counts as finished)
    if last is None or last[1] != "save-began" or kill_line - last[0] > max_lines:
        return None
    return last[0]


def resumed_interrupted_save(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                             lang: Optional[str]) -> None:
    if not spec:
        return
    kills = [f for f in findings if f.category == "scheduler-kill" and f.judgement
             and f.judgement.get("context") == "requeued-then-failed"]
    if not kills:
        return
    kill = max(kills, key=lambda f: f.line)
    began = _save_cut_short(kill.line, scanner, int(spec["max_lines"]))
    if began is None:
        return
    errors = sorted((f for f in findings if f.severity == "error" and f.line > kill.line), key=Finding.sort_key)
    if not errors:
        return
    read = errors[0]
    evidence_rx = re.compile(spec["evidence"])
    if read.category not in spec["reads"] or not evidence_rx.search(read.evidence):
        return
    entry = detector_texts()["interrupted_save"]
    text = detector_text(entry, lang)
    values = {"began": str(began), "killed": str(kill.line), "line": str(read.line), "error": read.evidence.strip()}
    findings.append(detector_finding(entry, text, values, line=read.line, evidence=read.evidence, default_priority=70,
                                     captures={k: v for k, v in values.items() if k != "error"}))
    reason = render_template(text["read_reason"], values).strip()
    for f in errors:
        if f.line >= read.line and f.category in spec["reads"] or f is read:
            f.judgement = {"context": "interrupted-save", "severity_was": f.severity, "reason": reason}
            f.severity = "warning"
