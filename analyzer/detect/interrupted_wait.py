"""A job the user stopped with Ctrl-C while it waited on something, with no error of its own.

A hang prints nothing: the user waits, gives up and presses Ctrl-C. What the log then holds is either
the interrupted stack (Python's KeyboardInterrupt traceback) or only the interrupt. Two readings, data
in rules/verdict.yaml `interrupted_wait`, texts in rules/detectors.yaml `interrupted_wait`:

- `blocked`: the KeyboardInterrupt's innermost frames wait in network code (a socket connect, urllib3,
  requests, http.client) called from a hub client's frames (huggingface_hub, modelscope's hub api): the
  process sat in a hub request that never returned (an offline machine whose firewall drops packets, so
  the connect has no answer and no timeout), and that request is why the job made no progress.
- `stalled`: no traceback names a wait, but the training loop's bar was drawn at 0 steps and never
  advanced before the interrupt, and the log shows the fact that explains such a stall (`seen`: a
  container's /dev/shm of a few MB, where DataLoader workers and NCCL's shared-memory transport block).

Only when no error finding explains the job and the log did not finish.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled
from llmtriage.findings import ExceptionInfo, Finding


def _blocked(exc: ExceptionInfo, entry: dict[str, Any]) -> Optional[str]:
    """The hub client frame's file when the exception's innermost frame waits in `innermost` code (in a
    `functions` call: connecting, resolving, the TLS handshake) and a frame above it is a `frames` client;
    else None."""
    files = [fr.file for fr in exc.frames]
    deep = files[-int(entry.get("deep", 3)):]
    if not deep or not compiled(entry["innermost"]).search(deep[-1]):
        return None
    if entry.get("functions") and not compiled(entry["functions"]).search(exc.frames[-1].function or ""):
        return None     # (reading a response that is arriving: a slow download, not a request never answered)
    client = compiled(entry["frames"])
    return next((f for f in reversed(files) if client.search(f)), None)


def _finding(key: str, values: dict[str, str], line: int, lang: Optional[str]) -> Finding:
    entry = detector_texts()["interrupted_wait"][key]
    return detector_finding(entry, detector_text(entry, lang), values, line=line, default_priority=45)


def interrupted_wait(findings: list[Finding], exceptions: list[ExceptionInfo], scanner: Scanner, status: str,
                     spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if not spec or status == "finished" or any(f.severity == "error" for f in findings):
        return
    interrupts = [e for e in exceptions if e.type.rsplit(".", 1)[-1] == "KeyboardInterrupt"]
    for entry in spec.get("blocked", ()):
        for exc in reversed(interrupts):
            client = _blocked(exc, entry)
            if client is not None:
                inner = exc.frames[-1]
                findings.append(_finding(entry["texts"], {"client": client, "file": inner.file,
                                                          "function": inner.function or ""}, exc.line, lang))
                return
    if not interrupts and not any(s in scanner.seen for s in spec.get("interrupt_seen", ())):
        return      # (the user's ^C, a launcher's "Received SIGINT")
    for entry in spec.get("stalled", ()):
        if all(s in scanner.seen for s in entry.get("seen", ())) and \
                not any(s in scanner.seen for s in entry.get("unless_seen", ())):
            line = scanner.last_progress or (interrupts[-1].line if interrupts else 0)
            findings.append(_finding(entry["texts"], {"line": str(line) if line else ""}, line, lang))
            return
