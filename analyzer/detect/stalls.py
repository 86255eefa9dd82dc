"""Where a job stalled: in `job`, the rank whose log stopped first.

Job stall (`job_stall`, per-file jobs): each rank's last time-stamped line (read from the file's
tail) and last logged step; the rank whose log stopped first while another went on for at least
`STALL_GAP_S` seconds; and the gap between that stop and the first watchdog timeout. Reported only
when the job failed (a healthy job's ranks end at slightly different times) or the gap is at least
`QUIET_GAP_S`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Optional

from llmtriage.job.texts import say

STALL_GAP_S = float(os.environ.get("LLMTRIAGE_STALL_GAP_S", "2"))
QUIET_GAP_S = float(os.environ.get("LLMTRIAGE_QUIET_GAP_S", "900"))
TAIL_LINES = 400


# ------------------------------------------------------------------------------ job stall

_STEP = [re.compile(r"(?i)\b(?:global[_ ])?step[\s:=#]*(\d{1,9})\b"), re.compile(r"(?i)\biteration[\s:=]*(\d{1,9})\b"),
         re.compile(r"\|\s*(\d{1,9})/\d+ \[")]


def _tail(path: Path, total: int) -> list[tuple[int, str]]:
    from llmtriage.job.analysis import lines_around   # jobs imports this module; the cycle stays lazy

    return lines_around(path, total, before=TAIL_LINES, after=0, total_lines=total)


def rank_progress(path: Path, total_lines: int) -> dict[str, Any]:
    """A rank's last time stamp and last logged step (with its time), from its file's tail."""
    from llmtriage.job.analysis import parse_time

    last_t = last_step = last_step_t = None
    last_text = ""
    year = 1970
    tail = _tail(path, total_lines)
    for _, t in tail:
        m = re.search(r"\b(20\d\d)-\d\d-\d\d", t)
        if m:
            year = int(m.group(1))
    for _, t in reversed(tail):
        r = parse_time(t, year)
        if r is None:
            continue
        if last_t is None:
            last_t, last_text = r, t
        if last_step is None:
            for pat in _STEP:
                sm = pat.search(t)
                if sm:
                    last_step, last_step_t = int(sm.group(1)), r
                    break
        if last_step is not None:
            break
    return {"last_time": last_t, "last_text": last_text, "last_step": last_step, "last_step_time": last_step_t}


def _fmt(kind_t: Optional[tuple[str, float]]) -> Optional[str]:
    if kind_t is None:
        return None
    from datetime import datetime

    kind, t = kind_t
    if kind == "hms":
        return f"{int(t // 3600):02d}:{int(t % 3600 // 60):02d}:{t % 60:06.3f}"
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def job_stall(res: Any, lang: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The rank whose log stopped advancing first, per rank's last step, and the gap to the watchdog."""
    if res.mode != "per-file" or len(res.ranks) < 2:
        return None
    prog: dict[int, dict[str, Any]] = {}
    for r in res.ranks:
        if r.rank is None or r.report_index is None:
            continue
        prog[r.rank] = rank_progress(Path(r.source), res.reports[r.report_index].lines)
    timed = {k: v for k, v in prog.items() if v["last_time"] is not None}
    kinds = {v["last_time"][0] for v in timed.values()}
    out: dict[str, Any] = {"ranks": {str(k): {"last_step": v["last_step"], "last_time": _fmt(v["last_time"])}
                                     for k, v in sorted(prog.items())}}
    if len(timed) < 2 or len(kinds) != 1:
        return out if any(v["last_step"] is not None for v in prog.values()) else None
    first = min(timed, key=lambda k: (timed[k]["last_time"][1], k))
    t0 = timed[first]["last_time"][1]
    others = [v["last_time"][1] for k, v in timed.items() if k != first]
    gap = min(others) - t0
    latest = max(others)
    wd = [r.time for r in res.ranks if r.status == "cascade" and r.top is not None and r.time is not None
          and r.top.category == "nccl-timeout" and r.time_kind == timed[first]["last_time"][0]]
    failed = res.failed
    if gap >= STALL_GAP_S and (failed or gap >= QUIET_GAP_S):
        out.update({"stalled_rank": first, "stopped_at": _fmt(timed[first]["last_time"]),
                    "last_step": timed[first]["last_step"], "others_until": _fmt((timed[first]["last_time"][0], latest)),
                    "gap_s": round(gap, 3), "until_s": round(latest - t0, 3),
                    "watchdog_gap_s": round(min(wd) - t0, 3) if wd and min(wd) >= t0 else None})
        out["text"] = say("stall", "stopped", lang, {
            "rank": first, "stopped_at": out["stopped_at"], "step": out["last_step"], "others_until": out["others_until"],
            "gap": f"{latest - t0:.1f}", "watchdog_gap": f"{out['watchdog_gap_s']:.1f}" if out["watchdog_gap_s"] is not None else None})
    return out


__all__ = ["job_stall", "rank_progress", "STALL_GAP_S"]
