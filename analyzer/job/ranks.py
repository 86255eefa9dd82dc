"""One rank of a job: its status (cause, cascade, warning, ok), its log triaged in a worker process
with the time stamp at its failing line, and the choice of the first failing rank."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

from llmtriage import get_engine, scan_source
from llmtriage.engine.logwindow import lines_around, time_at
from llmtriage.findings import Finding, Report
from llmtriage.job.model import RankInfo

CASCADE_CATEGORIES = {"nccl-timeout", "launcher-child-failed"}
TEARDOWN_EXC = {"KeyboardInterrupt", "SystemExit", "SignalException", "ChildFailedError", "DistBackendError"}


def is_cascade(f: Finding) -> bool:
    if f.category in CASCADE_CATEGORIES or f.role == "symptom":
        return True
    return f.rule_id == "unknown" and f.captures.get("type", "").rsplit(".", 1)[-1] in TEARDOWN_EXC


def status_of(findings: list[Finding]) -> tuple[str, Optional[Finding]]:
    errs = [f for f in findings if f.severity == "error"]
    causes = [f for f in errs if not is_cascade(f)]
    if causes:
        return "cause", sorted(causes, key=Finding.sort_key)[0]
    if errs:
        return "cascade", sorted(errs, key=Finding.sort_key)[0]
    if findings:
        return "warning", findings[0]
    return "ok", None


# Worker side (runs in child processes with --jobs N): one engine per process.
_ENGINE: dict[str, Any] = {}


def _engine(rules_dirs: tuple[str, ...], lang: Optional[str]) -> Any:
    key = (rules_dirs, lang)
    if _ENGINE.get("key") != key:
        _ENGINE.update(engine=get_engine(list(rules_dirs), lang=lang), key=key)
    return _ENGINE["engine"]


def scan_rank_file(args: tuple[str, tuple[str, ...], Optional[str]]) -> tuple[Report, Optional[tuple[str, float, str]]]:
    """Triage one rank's file; also the time stamp at its failing line."""
    path, rules_dirs, lang = args
    rep = scan_source(_engine(rules_dirs, lang), Path(path), name=path)
    status, top = status_of(rep.findings)
    stamp = None
    if top is not None and status in ("cause", "cascade"):
        stamp = time_at(lines_around(Path(path), top.line, total_lines=rep.lines), top.line)
    return rep, stamp


def pick_first(ranks: list[RankInfo]) -> Optional[RankInfo]:
    """The first failing rank: among causes, else among cascades; by time when every candidate has a
    time stamp of the same kind, else by the finding's rank order."""
    for status in ("cause", "cascade"):
        cand = [r for r in ranks if r.status == status]
        if not cand:
            continue
        kinds = {r.time_kind for r in cand}
        if len(cand) > 1 and None not in kinds and len(kinds) == 1:
            return min(cand, key=lambda r: (r.time, r.rank if r.rank is not None else 1 << 30))
        return min(cand, key=lambda r: (r.top.sort_key() if r.top else (9,), r.time if r.time is not None else math.inf,
                                        r.rank if r.rank is not None else 1 << 30))
    return None


def silent_ranks(ranks: list[RankInfo], first: Optional[RankInfo]) -> list[int]:
    """When the job only timed out: the ranks that did not report the timeout (likely stragglers)."""
    if first is None or first.status != "cascade":
        return []
    timed = [r for r in ranks if r.status == "cascade" and r.top is not None and r.top.category == "nccl-timeout"]
    if not timed:
        return []
    return sorted(r.rank for r in ranks if r.status in ("ok", "warning") and r.rank is not None)


__all__ = ["CASCADE_CATEGORIES", "TEARDOWN_EXC", "is_cascade", "status_of", "scan_rank_file", "pick_first",
           "silent_ranks"]
