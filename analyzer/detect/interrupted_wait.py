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

`tp_workers` is a serving engine's driver interrupted in ray.get while a set-up frame of its own
(`functions_above`: vLLM's _init_workers_ray, _init_cache) waited for its tensor-parallel workers: the
workers never came back from initialising the GPUs together. An unrecognised error printed after that
interrupt (Ray's "worker died unexpectedly" for the workers the Ctrl-C stopped) is its teardown.

A `blocked` entry without `frames` reads the innermost frames alone: `collective` (a distributed job whose
interrupted stack waits in collective code, torch.distributed, DeepSpeed's comm, Megatron's grad sync, with
no training step logged and, when the log dates it, a silence of at least `min_gap_s` before the ^C) is a
collective hang the user ended, not a user stop. `seen` / `unless_seen` gate an entry on the log's markers.

Only when no error finding explains the job and the log did not finish.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled, tr
from llmtriage.engine.logwindow import parse_times
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
    if entry.get("functions_above") and not any(compiled(entry["functions_above"]).search(fr.function or "")
                                                 for fr in exc.frames):
        return None     # (a frame of the caller's own set-up step: waiting at start-up, not while serving)
    if not entry.get("frames"):
        return deep[-1]     # (the innermost frame itself is the wait: a collective)
    client = compiled(entry["frames"])
    return next((f for f in reversed(files) if client.search(f)), None)


_LEAD = re.compile(r"\s*\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d")
_INTERRUPT = re.compile(r"^\s*\^C|\bReceived (?:Signals\.)?SIGINT\b|\bSIGINT death signal|\bReceived 2 death signal")


def _silence(scanner: Scanner, line: int) -> Optional[float]:
    """Seconds from the last time stamp before the user's interrupt (the ^C, a launcher's "Received SIGINT") to
    the first one at or after it (within 5 lines), when the log dates both; else None. A line's own stamp is its
    last one (a collector's prefix comes first), and a stamp later than the interrupt's is another clock."""
    # (the terminal's "^C" glued to the next line's glog stamp: "^CW0612 08:19:55.004")
    rows = [raw.decode("utf-8", "replace").replace("^C", "^C ", 1) for n, raw in scanner.rows(max(1, line - 400))
            if n <= line]
    at = next((i for i, t in enumerate(rows) if _INTERRUPT.search(t)), None)
    if at is None:
        return None
    iso = [v for t in rows[:at] for k, v in parse_times(t) if k == "iso"]
    year = datetime.fromtimestamp(iso[-1]).year if iso else 1970     # (glog stamps carry no year)
    stamps = [[v for k, v in parse_times(t, year) if k == "iso"] for t in rows]
    if any(len(ts) > 1 and _LEAD.match(t) for t, ts in zip(rows, stamps)):
        # a collector's clock before each line (kubectl --timestamps): the job's own stamps come after it
        stamps = [ts[1:] if _LEAD.match(t) else ts for t, ts in zip(rows, stamps)]
    after = next((ts[-1] for ts in stamps[at:at + 6] if ts), None)
    if after is None:
        return None
    before = next((max(v for v in ts if v <= after) for ts in reversed(stamps[:at]) if any(v <= after for v in ts)),
                  None)
    gap = after - before if before is not None else None
    return gap if gap is not None and gap <= 14 * 86400 else None


def _gated(entry: dict[str, Any], scanner: Scanner) -> bool:
    return all(m in scanner.seen for m in entry.get("seen", ())) and \
        not any(m in scanner.seen for m in entry.get("unless_seen", ()))


def _finding(key: str, values: dict[str, str], line: int, lang: Optional[str]) -> Finding:
    entry = detector_texts()["interrupted_wait"][key]
    return detector_finding(entry, detector_text(entry, lang), values, line=line, default_priority=45)


def interrupted_wait(findings: list[Finding], exceptions: list[ExceptionInfo], scanner: Scanner, status: str,
                     spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if not spec or status == "finished":
        return
    interrupts = [e for e in exceptions if e.type.rsplit(".", 1)[-1] == "KeyboardInterrupt"]
    if any(f.severity == "error" for f in findings):
        # (an unrecognised error printed only after the user's interrupt is the teardown it caused: Ray's
        # "worker died unexpectedly" for the workers the Ctrl-C stopped; any other error stands)
        first = min((e.line for e in interrupts), default=0)
        if not first or any(f.severity == "error" and (f.line < first or f.category != "unknown") for f in findings):
            return
    for entry in spec.get("blocked", ()):
        if not _gated(entry, scanner):
            continue
        for exc in reversed(interrupts):
            client = _blocked(exc, entry)
            gap = _silence(scanner, exc.line) if client is not None and entry.get("min_gap_s") else None
            if client is not None and (gap is None or gap >= float(entry["min_gap_s"])):
                inner = exc.frames[-1]
                findings.append(_finding(entry["texts"], {"client": client, "file": inner.file,
                                                          "function": inner.function or "",
                                                          "gap": f"{gap / 60:.0f}" if gap else ""}, exc.line, lang))
                _after_interrupt(findings, exc.line, spec, lang)
                return
    if any(f.severity == "error" for f in findings):
        return
    if not interrupts and not any(s in scanner.seen for s in spec.get("interrupt_seen", ())):
        return      # (the user's ^C, a launcher's "Received SIGINT")
    for entry in spec.get("stalled", ()):
        if _gated(entry, scanner):
            line = scanner.last_progress or (interrupts[-1].line if interrupts else 0)
            findings.append(_finding(entry["texts"], {"line": str(line) if line else ""}, line, lang))
            return


def _after_interrupt(findings: list[Finding], line: int, spec: dict[str, Any], lang: Optional[str]) -> None:
    """Unrecognised errors after the interrupt at `line` are the teardown it caused: warnings."""
    reason = spec.get("teardown_reason")
    for f in findings:
        if f.severity == "error" and f.category == "unknown" and f.line > line:
            f.judgement = {"context": "after-interrupt", "severity_was": f.severity,
                           "reason": tr(reason, lang) if reason else ""}
            f.severity = "warning"


def stopped_while_pinned(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                         lang: Optional[str]) -> None:
    """A distributed job whose progress stopped, then nvidia-smi (pasted after the last progress line) showed its GPUs
    at 100% utilisation, and a stop from outside (a user's scancel or Ctrl-C, `kills`) ended it: the ranks were
    spinning in a collective that never completed, and the stop only ended the hang (spec: verdict.yaml
    interrupted_wait `pinned_stop`). With no error at all, the user's own interrupt (`interrupt_seen`) after the
    pinned GPUs is that stop."""
    entry = (spec or {}).get("pinned_stop")
    if not entry or not _gated(entry, scanner):
        return
    errors = [f for f in findings if f.severity == "error"]
    kills = [f for f in errors if f.category in entry["categories"] and not compiled(entry["unless"]).search(f.evidence)]
    if errors and (not kills or any(f.category not in entry["categories"] for f in errors)):
        return
    if not kills and not any(m in scanner.seen for m in entry.get("interrupt_seen", ())):
        return      # (no error at all: only the user's own interrupt, after the pinned GPUs, ended the hang)
    end = kills[0].line if kills else 1 << 62
    progress = scanner.last_progress_before(end) if kills else scanner.last_progress
    pinned = compiled(entry["pinned"])
    # (after the last progress line the log shows; a bar whose lines are no progress marker dates nothing)
    at = next((n for n, raw in scanner.rows(progress + 1) if n < end
               and pinned.search(raw.decode("utf-8", "replace"))), 0)
    if not at or (not kills and not progress):
        return
    findings.append(_finding(entry["texts"], {"line": str(progress) if progress else "", "at": str(at)},
                             progress or at, lang))
    reason = detector_text(detector_texts()["interrupted_wait"][entry["texts"]], lang)["kill_reason"]
    for k in kills:
        k.judgement = {"context": "stopped-while-pinned", "severity_was": k.severity, "reason": reason}
        k.severity = "warning"
