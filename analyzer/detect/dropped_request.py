"""A request a serving engine dropped, and nothing answered after it (rules/verdict.yaml `dropped_request`).

vLLM's V0 scheduler does not raise on a prompt over its limit: it logs "Input prompt (N tokens) is too
long and exceeds limit of M", marks the request finished with an empty output and goes on. That is
harmless when the front end answers the request (an empty 200) and later requests are served. Some
front ends never learn of it (vLLM 0.1.x's API server, DJL/LMI's rolling batch waiting for a prefill
that never comes): the server stays up, answers health probes and logs idle statistics, but no request
completes again until someone stops it. A signature of `rules` (a warning) then becomes the error when
the server had served requests before it, nothing was served after its last line, and at least
`min_alive` lines after it show the server alive and idle or still receiving requests (`alive`).
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled as _rx, tr


def request_never_answered(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                           lang: Optional[str]) -> None:
    """Make a dropped-request warning the error when the server served before it and never after."""
    if not spec or any(f.severity == "error" for f in findings):
        return
    alive_rx, need = _rx(spec["alive"]), int(spec["min_alive"])
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "warning" or f.judgement is not None:
            continue
        last = f.last_line or f.line
        if not 0 < scanner.last_progress < last:    # served after it, or never served at all
            continue
        alive = 0
        for n, raw in scanner.rows(last + 1):
            # (what a terminal shows of the line: a CRLF log's trailing \r is no progress-bar redraw)
            if n > last and alive_rx.search(raw.rstrip(b"\r\n").decode("utf-8", "replace").rsplit("\r", 1)[-1]):
                alive += 1
                if alive >= need:
                    break
        if alive >= need:
            f.judgement = {"context": "request-never-answered", "severity_was": "warning",
                           "reason": tr(spec["reason"], lang, line=last)}
            f.severity = "error"
            return
