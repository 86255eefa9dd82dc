"""A job given as one log holding every rank (`[rank3]:`, `[Rank 3]`, `[default3]:` prefixes): the
per-rank summaries come from the findings' rank attribution and the ranks seen in the log."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from llmtriage import get_engine, load_rules, scan_source
from llmtriage.engine.logparse import split_prefix
from llmtriage.engine.logwindow import lines_around, time_at
from llmtriage.findings import Finding, Report
from llmtriage.job.cascade import cascade_sentence, silent_text
from llmtriage.job.model import JobResult, RankInfo
from llmtriage.job.ranks import status_of

_TIMEOUT_RANK = re.compile(rb"(?:\[rank(\d{1,5})\]|\[Rank (\d{1,5})\])[^\n]{0,120}Watchdog caught collective operation timeout")
_WORLD = re.compile(rb"(?i)world[ _]size[\s:=]+(\d{1,6})")
_RANK_PREFIX = re.compile(rb"\[rank(\d{1,5})\]|\[Rank (\d{1,5})\]|\[default(\d{1,4})\]")
NEAR_LINES = 12        # a failing line without a rank prefix belongs to the nearest prefixed line this close


class RankObserver:
    """Collects, in an interleaved log, the rank ids seen, the ranks whose NCCL watchdog reported a
    timeout, and a printed world size (a block observer: feed / finish)."""

    def __init__(self, engine: Any = None):
        self.ranks: set[int] = set()
        self.timed_out: set[int] = set()
        self.world: Optional[int] = None

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if len(self.ranks) < 65536 and (b"ank" in view[:4096] or b"[default" in view[:4096] or self.ranks):
            for a, b, c in set(_RANK_PREFIX.findall(view)):
                self.ranks.add(int(a or b or c))
        if b"Watchdog caught" in view:
            for a, b in _TIMEOUT_RANK.findall(view):
                self.timed_out.add(int(a or b))
        if self.world is None and (b"orld size" in view or b"ORLD_SIZE" in view or b"orld_size" in view):
            m = _WORLD.search(view)
            if m:
                self.world = int(m.group(1))

    def finish(self, report: Report, findings: list[Finding]) -> None:
        if self.ranks:
            report.extra["ranks_seen"] = sorted(self.ranks)
        if self.timed_out:
            report.extra["ranks_timed_out"] = sorted(self.timed_out)
        if self.world:
            report.extra["world_size"] = self.world


def nearest_rank(window: list[tuple[int, str]], line: int) -> Optional[int]:
    """The rank of the prefixed line nearest to `line` (the earlier one on a tie), within NEAR_LINES."""
    best: Optional[tuple[int, int, int]] = None
    for ln, text in window:
        rank = split_prefix(text).rank
        if rank is None or abs(ln - line) > NEAR_LINES:
            continue
        key = (abs(ln - line), 0 if ln <= line else 1, rank)
        if best is None or key < best:
            best = key
    return best[2] if best else None


def failing_ranks(path: Path, top: Finding, total_lines: int) -> tuple[Optional[int], list[int], list[tuple[int, str]]]:
    """(rank, ranks, window) of the failing line: its own rank, the ranks that printed the same error,
    else the rank of the nearest prefixed line."""
    window = lines_around(path, top.line, total_lines=total_lines)
    if top.rank is not None:
        return top.rank, [], window
    if len(top.ranks) == 1:
        return top.ranks[0], [], window
    if top.ranks:
        return None, sorted(top.ranks), window
    return nearest_rank(window, top.line), [], window


def analyze_interleaved(path: Path, *, lang: Optional[str], rules_dirs: tuple[str, ...]) -> JobResult:
    """One log holding every rank: per-rank summaries come from the findings' rank attribution."""
    eng = get_engine(load_rules(rules_dirs), lang=lang, observers=[RankObserver])
    rep = scan_source(eng, path, name=str(path))
    seen = rep.extra.pop("ranks_seen", [])
    timed_out = set(rep.extra.pop("ranks_timed_out", []))
    printed_world = rep.extra.pop("world_size", None)
    timeout_f = next((f for f in sorted(rep.findings, key=Finding.sort_key) if f.category == "nccl-timeout"), None)
    per: dict[int, list[Finding]] = {}
    for f in rep.findings:
        for r in ([f.rank] if f.rank is not None else []) + list(f.ranks):
            lst = per.setdefault(r, [])
            if f not in lst:
                lst.append(f)
    for r in seen:
        per.setdefault(r, [])
    for r in timed_out:
        if timeout_f is not None and timeout_f not in per.setdefault(r, []):
            per[r].append(timeout_f)
    ranks = []
    for r in sorted(per):
        fs = sorted(per[r], key=Finding.sort_key)
        status, top = status_of(fs)
        ranks.append(RankInfo(rank=r, source=str(path), status=status, top=top, phase=rep.extra.get("phase"),
                              step=rep.extra.get("step"), report_index=0))
    status, top = status_of(rep.findings)
    first = None
    if top is not None:
        rank, several, window = failing_ranks(path, top, rep.lines)
        first = next((r for r in ranks if r.rank == rank and rank is not None), None)
        if first is None:
            first = RankInfo(rank=rank, source=str(path), status=status, top=top, phase=rep.extra.get("phase"),
                             step=rep.extra.get("step"), report_index=0, ranks=several)
        else:
            first.top, first.status = top, status
        stamp = time_at(window, top.line, rank)
        if stamp:
            first.time_kind, first.time, first.time_text = stamp
    launcher = next((f for f in rep.findings if f.category == "launcher-child-failed"), None)
    world = printed_world or ((max(seen) + 1) if seen else (max(per) + 1 if per else None))
    res = JobResult(mode="interleaved", ranks=ranks, reports=[rep], first=first, root=top, world_size=world,
                    phase=rep.extra.get("phase"), step=rep.extra.get("step"))
    if top is not None and status == "cascade" and world:
        reported = timed_out | {r.rank for r in ranks if r.status in ("cause", "cascade") and r.rank is not None}
        res.silent_ranks = sorted(set(range(world)) - reported) if reported else []
    others = [r for r in ranks if r is not first and r.rank not in (first.ranks if first else [])]
    res.cascade = cascade_sentence(first, others, top, launcher, lang=lang)
    if res.silent_ranks:
        res.cascade += silent_text(res.silent_ranks, lang)
    return res


__all__ = ["RankObserver", "analyze_interleaved", "failing_ranks", "nearest_rank"]
