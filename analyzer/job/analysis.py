"""Job-level analysis: many ranks of one job (first failing rank, cascade), and the diff of two runs.

`analyze_job(paths)` takes one log per rank/node (files, globs, directories) or one interleaved log
with rank prefixes. Per-file logs are triaged in parallel (`jobs` processes, each streaming its file
in bounded memory); the first failing rank is chosen

1. among ranks whose top error is a *cause* (not an NCCL timeout, a launcher summary or a
   teardown signal), by the time stamp at the failing line where every candidate has one of the same
   kind, else by the finding's rank order (cause, severity, priority) — causal order;
2. when no rank has a cause, among the ranks that only time out or are torn down, by time; ranks
   that never reported the timeout the others waited on are listed as `silent_ranks`.

`diff_runs(good, bad)` reports message templates new in the bad run (numbers, hex, paths masked),
changed library versions and arguments, the first step where the loss curves diverge, and the bad
run's triage.
"""
from __future__ import annotations

import glob
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.errors import InputError
from llmtriage.findings import JSON_VERSION, Finding, Report
from llmtriage.detect.flight_recorder import analyze_dumps, find_dumps
from llmtriage.detect.fr_verdict import merge_into
from llmtriage.detect.stalls import job_stall
from llmtriage.engine.logparse import decode_line, iter_blocks, match_view, normalise_text, split_prefix

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
CASCADE_CATEGORIES = {"nccl-timeout", "launcher-child-failed"}
TEARDOWN_EXC = {"KeyboardInterrupt", "SystemExit", "SignalException", "ChildFailedError", "DistBackendError"}
TIME_WINDOW = 40          # lines around the failing line searched for a time stamp

_RANK_IN_NAME = [re.compile(r"(?i)rank[-_.]?(\d{1,5})"),
                 re.compile(r"(?i)(?:proc|worker|process|task|gpu)[-_.]?(\d{1,5})")]
_TRAILING_NUM = re.compile(r"(\d{1,5})(?:\.(?:log|out|err|txt))*$")
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?")
_GLOG = re.compile(r"\b[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})")
_HMS = re.compile(r"\[(\d\d):(\d\d):(\d\d)(?:[.,](\d+))?\]")
_TIMEOUT_RANK = re.compile(rb"(?:\[rank(\d{1,5})\]|\[Rank (\d{1,5})\])[^\n]{0,120}Watchdog caught collective operation timeout")
_WORLD = re.compile(rb"(?i)world[ _]size[\s:=]+(\d{1,6})")
_RANK_PREFIX = re.compile(rb"\[rank(\d{1,5})\]|\[Rank (\d{1,5})\]|\[default(\d{1,4})\]")


# ------------------------------------------------------------------------------ inputs

def collect_inputs(paths: Iterable[str]) -> list[Path]:
    """Expand globs and directories (their *.log/*.out/*.err/*.txt files, sorted) into files."""
    out: list[Path] = []
    for p in paths:
        hits = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
        if not hits:
            raise InputError(f"{p}: no file matches")
        for h in hits:
            path = Path(h)
            if path.is_dir():
                files = sorted(f for f in path.iterdir() if f.is_file() and f.name.lower().endswith(LOG_SUFFIXES)
                               and not f.name.endswith(".expected.json"))
                if not files:
                    raise InputError(f"{h}: directory holds no .log/.out/.err/.txt files")
                out += files
            elif path.is_file():
                out.append(path)
            else:
                raise InputError(f"{h}: no such file")
    seen: set[str] = set()
    uniq = []
    for p in out:
        k = os.path.realpath(p)
        if k not in seen:
            seen.add(k)
            uniq.append(p)
    return uniq


def rank_from_name(path: Path) -> Optional[int]:
    name = path.name
    for pat in _RANK_IN_NAME:
        m = pat.search(name)
        if m:
            return int(m.group(1))
    m = _TRAILING_NUM.search(re.sub(r"\.(?:log|out|err|txt)$", "", name))
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------ time stamps

def parse_time(text: str, year: int = 1970) -> Optional[tuple[str, float]]:
    """(kind, seconds) of the first time stamp in `text`: ISO date-time, glog (no year) or [HH:MM:SS]."""
    m = _ISO.search(text)
    if m:
        y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
        try:
            return "iso", datetime(y, mo, d, h, mi, s).timestamp() + frac
        except ValueError:
            return None
    m = _GLOG.search(text)
    if m:
        mo, d, h, mi, s = (int(x) for x in m.groups()[:5])
        try:
            return "iso" if year > 1970 else "glog", datetime(year, mo, d, h, mi, s).timestamp() + float("0." + m.group(6))
        except ValueError:
            return None
    m = _HMS.search(text)
    if m:
        h, mi, s = (int(x) for x in m.groups()[:3])
        return "hms", h * 3600 + mi * 60 + s + (float("0." + m.group(4)) if m.group(4) else 0.0)
    return None


def lines_around(path: Path, line: int, before: int = TIME_WINDOW, after: int = TIME_WINDOW,
                 total_lines: Optional[int] = None) -> list[tuple[int, str]]:
    """The lines [line-before, line+after] of a file. Streamed from the start and stopping after the
    window; when the window is near the end and `total_lines` is known, only the file's tail is read."""
    lo, hi = max(1, line - before), line + after
    out: list[tuple[int, str]] = []
    if total_lines is not None and total_lines - lo < 4000:
        # read backwards, 64 KiB at a time, only as far as the window needs (at most 4 MiB)
        need = total_lines - lo + 2
        size = os.path.getsize(path)
        pieces: list[bytes] = []
        newlines = 0
        start = size
        with open(path, "rb") as fh:
            while start > 0 and newlines < need and size - start < (4 << 20):
                step = min(64 << 10, start)
                start -= step
                fh.seek(start)
                piece = fh.read(step)
                pieces.append(piece)
                newlines += piece.count(b"\n")
        data = b"".join(reversed(pieces))
        del pieces
        parts = data.split(b"\n")
        if data.endswith(b"\n"):
            parts.pop()
        first_no = total_lines - len(parts) + 1
        if start == 0 or first_no + 1 <= lo:
            for i, raw in enumerate(parts):
                ln = first_no + i
                if lo <= ln <= hi and (start == 0 or i > 0):
                    out.append((ln, normalise_text(decode_line(raw[:4096])[0])))
            return out
    base = 1
    continued = False          # the previous block was cut inside a line (a line over 1 MiB)
    with open(path, "rb") as fh:
        for chunk, _ in iter_blocks(fh):
            n = chunk.count(b"\n")
            if base + n < lo:
                base += n
                continued = not chunk.endswith(b"\n")
                continue
            parts = chunk.split(b"\n")
            if chunk.endswith(b"\n"):
                parts.pop()
            for i, raw in enumerate(parts):
                ln = base + i
                if lo <= ln <= hi and not (i == 0 and continued):
                    out.append((ln, normalise_text(decode_line(raw[:4096])[0])))
            base += n
            continued = not chunk.endswith(b"\n")
            if base > hi:
                break
    return out


def time_at(window: list[tuple[int, str]], line: int, rank: Optional[int] = None) -> Optional[tuple[str, float, str]]:
    """The time stamp of `line`: on it, else the nearest before it (within a traceback's length), else
    the nearest after, else any older one (kind, t, text). With `rank`, only that rank's lines count."""
    year = 1970
    for _, t in window:
        m = _ISO.search(t)
        if m:
            year = int(m.group(1))
            break
    stamps = []
    for ln, t in window:
        if rank is not None:
            pre = split_prefix(t)
            if pre.rank is not None and pre.rank != rank:
                continue
        r = parse_time(t, year)
        if r is not None:
            m = _ISO.search(t) or _GLOG.search(t) or _HMS.search(t)
            stamps.append((ln, r[0], r[1], m.group(0) if m else ""))
    on = [s for s in stamps if s[0] == line]
    if on:
        return on[0][1], on[0][2], on[0][3]
    prev = [s for s in stamps if s[0] < line and line - s[0] <= 12]
    nxt = [s for s in stamps if s[0] > line and s[0] - line <= 12]
    older = [s for s in stamps if s[0] < line]
    pick = prev[-1] if prev else (nxt[0] if nxt else (older[-1] if older else None))
    return (pick[1], pick[2], pick[3]) if pick else None


# ------------------------------------------------------------------------------ one rank

@dataclass
class RankInfo:
    rank: Optional[int]
    source: str
    status: str                      # cause | cascade | warning | ok
    top: Optional[Finding] = None
    time: Optional[float] = None
    time_kind: Optional[str] = None
    time_text: str = ""
    phase: Optional[str] = None
    step: Optional[int] = None
    report_index: Optional[int] = None

    def to_dict(self) -> dict[str, Any]:
        t = self.top
        return {
            "rank": self.rank, "source": self.source, "status": self.status,
            "category": t.category if t else None, "rule_id": t.rule_id if t else None,
            "severity": t.severity if t else None, "line": t.line if t else None,
            "message": t.message if t else None, "time": self.time_text or None,
            "phase": self.phase, "step": self.step,
        }


def is_cascade(f: Finding) -> bool:
    if f.category in CASCADE_CATEGORIES or f.role == "symptom":
        return True
    return f.category == "unknown" and f.captures.get("type", "").rsplit(".", 1)[-1] in TEARDOWN_EXC


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
_ENGINE: Any = None
_ENGINE_KEY: Any = None


def _engine(rules_dirs: tuple[str, ...], lang: Optional[str]) -> Any:
    global _ENGINE, _ENGINE_KEY
    key = (rules_dirs, lang)
    if _ENGINE is None or _ENGINE_KEY != key:
        from llmtriage import get_engine

        _ENGINE, _ENGINE_KEY = get_engine(list(rules_dirs), lang=lang), key
    return _ENGINE


def scan_rank_file(args: tuple[str, tuple[str, ...], Optional[str]]) -> tuple[Report, Optional[tuple[str, float, str]]]:
    """Triage one rank's file; also the time stamp at its failing line."""
    from llmtriage import scan_source

    path, rules_dirs, lang = args
    rep = scan_source(_engine(rules_dirs, lang), Path(path), name=path)
    status, top = status_of(rep.findings)
    stamp = None
    if top is not None and status in ("cause", "cascade"):
        stamp = time_at(lines_around(Path(path), top.line, total_lines=rep.lines), top.line)
    return rep, stamp


# ------------------------------------------------------------------------------ the job

@dataclass
class JobResult:
    mode: str                                  # per-file | interleaved
    ranks: list[RankInfo]
    reports: list[Report]
    first: Optional[RankInfo] = None
    root: Optional[Finding] = None
    cascade: str = ""
    silent_ranks: list[int] = field(default_factory=list)
    world_size: Optional[int] = None
    phase: Optional[str] = None
    step: Optional[int] = None
    flight_recorder: Optional[dict[str, Any]] = None     # flight_recorder.FRResult.to_dict()
    fr_sentence: str = ""
    stall: Optional[dict[str, Any]] = None               # stalls.job_stall()

    def to_dict(self) -> dict[str, Any]:
        root = self.root.to_dict() if self.root else None
        job = {
            "mode": self.mode, "world_size": self.world_size,
            "first_rank": self.first.rank if self.first else None,
            "first_source": self.first.source if self.first else None,
            "category": self.root.category if self.root else None,
            "root_cause": root, "phase": self.phase, "step": self.step,
            "time": (self.first.time_text or None) if self.first else None,
            "cascade": self.cascade, "silent_ranks": list(self.silent_ranks),
            "ranks": [r.to_dict() for r in self.ranks],
            "flight_recorder": self.flight_recorder, "stall": self.stall,
        }
        return {"version": JSON_VERSION, "job": job, "reports": [r.to_dict() for r in self.reports]}

    @property
    def failed(self) -> bool:
        return (any(f.severity == "error" for r in self.reports for f in r.findings)
                or bool(self.flight_recorder and self.flight_recorder.get("suspect_ranks")))


def _pick_first(ranks: list[RankInfo]) -> Optional[RankInfo]:
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


_VERB = {
    "nccl-timeout": "timed out in a collective",
    "launcher-child-failed": "were reported failed by the launcher",
    "nccl-error": "lost their NCCL connection",
}


def _ranks_text(ranks: list[Optional[int]]) -> str:
    rs = sorted(r for r in ranks if r is not None)
    if not rs:
        return ""
    if len(rs) > 6:
        return f" ({', '.join(map(str, rs[:5]))}, … {rs[-1]})"
    return f" ({', '.join(map(str, rs))})"


def cascade_sentence(first: Optional[RankInfo], ranks: list[RankInfo], root: Optional[Finding],
                     launcher: Optional[Finding] = None, zh: bool = False) -> str:
    if first is None or root is None:
        return "没有 rank 报告错误。" if zh else "No rank reported an error."
    who = f"rank {first.rank}" if first.rank is not None else first.source
    where = []
    if first.step is not None:
        where.append(("第 {} 步".format(first.step)) if zh else f"at step {first.step}")
    if first.phase and first.phase not in ("training", "unknown"):
        where.append(("阶段 " + first.phase) if zh else f"during {first.phase}")
    if first.time_text:
        where.append(first.time_text)
    if first.status == "cascade":
        # nobody printed a root cause: say so, and list every rank that only timed out / was torn down
        parts = ["没有 rank 打印出根因错误" if zh else "No rank printed a root-cause error"]
        others = [r for r in ranks if r.status == "cascade" and r.top is not None and r.rank is not None]
        if first.rank is not None and first not in others:
            others.append(first)
    else:
        head = f"{who} hit {root.title} ({root.category})" if not zh else f"{who} 出现 {root.title}（{root.category}）"
        parts = [head + (" " + " ".join(where) if where else "")]
        others = [r for r in ranks if r is not first and r.status in ("cause", "cascade") and r.top is not None]
    by_cat: dict[str, list[RankInfo]] = {}
    for r in others:
        by_cat.setdefault(r.top.category, []).append(r)  # type: ignore[union-attr]
    for cat, rs in sorted(by_cat.items(), key=lambda kv: -len(kv[1])):
        n = len(rs)
        if zh:
            parts.append(f"随后 {n} 个 rank 报告 {cat}{_ranks_text([r.rank for r in rs])}")
        else:
            verb = _VERB.get(cat, f"reported {cat}")
            then = " then" if first.status != "cascade" else ""
            parts.append(f"{n} rank{'s' if n != 1 else ''}{then} {verb}{_ranks_text([r.rank for r in rs])}")
    if launcher is not None and launcher.category == "launcher-child-failed" and "launcher" not in " ".join(parts):
        parts.append("启动器报告了 ChildFailedError" if zh else "the launcher reported the failed worker (ChildFailedError)")
    return ("；".join(parts) + "。") if zh else ("; ".join(parts) + ".")


def analyze_job(paths: Iterable[str], *, jobs: int = 1, lang: Optional[str] = None,
                rules_dirs: tuple[str, ...] = (), flight_recorder: Optional[str] = None) -> JobResult:
    """The job's logs, plus the Flight Recorder dumps found among `paths` or in `flight_recorder`."""
    paths = list(paths)
    dumps = find_dumps(paths + ([flight_recorder] if flight_recorder else []))
    if flight_recorder and not dumps:
        raise InputError(f"{flight_recorder}: no Flight Recorder dump (nccl_trace_rank_<N>) found")
    dump_set = {os.path.realpath(d) for d in dumps}
    log_paths = [p for p in paths if not (dumps and Path(p).is_dir() and not _has_logs(Path(p)))]
    files = [f for f in collect_inputs(log_paths) if os.path.realpath(f) not in dump_set] if log_paths else []
    if not files and not dumps:
        raise InputError("no log files given")
    res = _analyze_logs(files, jobs=jobs, lang=lang, rules_dirs=rules_dirs) if files else \
        JobResult(mode="flight-recorder", ranks=[], reports=[])
    if dumps:
        merge_into(res, analyze_dumps(dumps), lang)
    stall = job_stall(res, lang)
    if stall is not None:
        res.stall = stall
    return res


def _has_logs(path: Path) -> bool:
    return any(f.is_file() and f.name.lower().endswith(LOG_SUFFIXES) for f in path.iterdir())


def _analyze_logs(files: list[Path], *, jobs: int, lang: Optional[str], rules_dirs: tuple[str, ...]) -> JobResult:
    if len(files) == 1:
        return _interleaved(files[0], lang=lang, rules_dirs=rules_dirs)
    args = [(str(f), tuple(rules_dirs), lang) for f in files]
    if jobs > 1 and len(files) > 1:
        import multiprocessing as mp

        ctx = mp.get_context("spawn" if os.name == "nt" else "fork")
        with ctx.Pool(min(jobs, len(files))) as pool:
            results = pool.map(scan_rank_file, args, chunksize=1)
    else:
        results = [scan_rank_file(a) for a in args]
    reports = [r for r, _ in results]
    ranks: list[RankInfo] = []
    names = [rank_from_name(f) for f in files]
    use_names = len({n for n in names if n is not None}) == len(files)
    for i, (f, (rep, stamp)) in enumerate(zip(files, results)):
        status, top = status_of(rep.findings)
        rank = names[i] if use_names else None
        if rank is None:
            seen = Counter(r for x in rep.findings for r in ([x.rank] if x.rank is not None else x.ranks))
            rank = seen.most_common(1)[0][0] if len(seen) == 1 else (names[i] if names[i] is not None else i)
        info = RankInfo(rank=rank, source=str(f), status=status, top=top, phase=rep.extra.get("phase"),
                        step=rep.extra.get("step"), report_index=i)
        if stamp is not None:
            info.time_kind, info.time, info.time_text = stamp
        ranks.append(info)
    ranks.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30, r.source))
    first = _pick_first(ranks)
    root = first.top if first else None
    launcher = next((f for r in reports for f in r.findings if f.category == "launcher-child-failed"), None)
    res = JobResult(mode="per-file", ranks=ranks, reports=reports, first=first, root=root,
                    world_size=len(files), phase=first.phase if first else None, step=first.step if first else None)
    res.silent_ranks = _silent(ranks, first)
    res.cascade = cascade_sentence(first, ranks, root, launcher, zh=lang == "zh")
    if res.silent_ranks:
        res.cascade += _silent_text(res.silent_ranks, lang == "zh")
    return res


def _silent(ranks: list[RankInfo], first: Optional[RankInfo]) -> list[int]:
    """When the job only timed out: the ranks that did not report the timeout (likely stragglers)."""
    if first is None or first.status != "cascade":
        return []
    timed = [r for r in ranks if r.status == "cascade" and r.top is not None and r.top.category == "nccl-timeout"]
    if not timed:
        return []
    return sorted(r.rank for r in ranks if r.status in ("ok", "warning") and r.rank is not None)


class _RankObserver:
    """Collects, in an interleaved log, the rank ids seen (`[rank3]:`, `[Rank 3]`, `[default3]:`), the
    ranks whose NCCL watchdog reported a timeout, and a printed world size."""

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


def _interleaved(path: Path, *, lang: Optional[str], rules_dirs: tuple[str, ...]) -> JobResult:
    """One log holding every rank: per-rank summaries come from the findings' rank attribution."""
    from llmtriage import get_engine, load_rules, scan_source

    eng = get_engine(load_rules(rules_dirs), lang=lang, observers=[_RankObserver])
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
        if top.rank is not None:
            rank = top.rank
        elif len(top.ranks) == 1:
            rank = top.ranks[0]
        else:
            rank = None
        first = next((r for r in ranks if r.rank == rank and rank is not None), None)
        if first is None:
            first = RankInfo(rank=rank, source=str(path), status=status, top=top, phase=rep.extra.get("phase"),
                             step=rep.extra.get("step"), report_index=0)
        else:
            first.top, first.status = top, status
        stamp = time_at(lines_around(path, top.line, total_lines=rep.lines), top.line, rank)
        if stamp:
            first.time_kind, first.time, first.time_text = stamp
    launcher = next((f for f in rep.findings if f.category == "launcher-child-failed"), None)
    world = printed_world or ((max(seen) + 1) if seen else (max(per) + 1 if per else None))
    res = JobResult(mode="interleaved", ranks=ranks, reports=[rep], first=first, root=top, world_size=world,
                    phase=rep.extra.get("phase"), step=rep.extra.get("step"))
    if top is not None and status == "cascade" and world:
        reported = timed_out | {r.rank for r in ranks if r.status in ("cause", "cascade") and r.rank is not None}
        res.silent_ranks = sorted(set(range(world)) - reported) if reported else []
        if res.silent_ranks and first is not None and first.rank is None:
            first.rank = None
    res.cascade = cascade_sentence(first, [r for r in ranks if r is not first], top, launcher, zh=lang == "zh")
    if res.silent_ranks:
        res.cascade += _silent_text(res.silent_ranks, lang == "zh")
    return res


def _silent_text(silent: list[int], zh: bool) -> str:
    rs = ", ".join(map(str, silent[:8])) + (" …" if len(silent) > 8 else "")
    if zh:
        return f" rank {rs} 从未报告超时：它们很可能卡住或先行退出，根因在它们的输出里。"
    return f" Rank {rs} never reported the timeout: likely stuck or dead first; its own output holds the root cause."


# ------------------------------------------------------------------------------ run diff

_MASKS = [
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<time>"),
    (re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<num>"),
    (re.compile(r"\s+"), " "),
]
_BAR_STEP = re.compile(r"\|\s*(\d+)/\d+ \[")
_PROGRESS = re.compile(r"\d+%\||it/s\]|s/it\]|/s\]")
_VERSION = re.compile(
    r"(?i)\b(torch|pytorch|transformers|deepspeed|accelerate|peft|trl|vllm|flash[-_]attn|bitsandbytes|datasets|"
    r"triton|xformers|nccl|cuda|cudnn|python|megatron[-_]core|lightning|tokenizers|safetensors|llamafactory|swift|unsloth)"
    r"(?:[ _-]?version)?\s*(?:==|=|:|\s|v)\s*v?(\d+\.\d+(?:\.\d+)?(?:[.+-]?(?:dev|rc|post|a|b|cu)\w*)*)")
_CLI_ARG = re.compile(r"--([A-Za-z][\w.-]*)(?:=|\s+)(?!--)([^\s,'\"\]]+)")
_KV_ARG = re.compile(r"^\s{0,8}([a-z][a-z0-9_]*)=([^,\s]+),?\s*$")
MAX_TEMPLATES = 20_000      # distinct message templates kept per run (a template and an example: ~1 KB)
MAX_ARGS = 2_000            # distinct command-line flags kept per run
MAX_ARG_LEN = 200


def template_of(text: str) -> str:
    t = split_prefix(text).text
    for pat, rep in _MASKS:
        t = pat.sub(rep, t)
    return t.strip()[:300]


@dataclass
class RunProfile:
    templates: dict[str, list[int]] = field(default_factory=dict)   # template -> [count, first line]
    example: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    losses: dict[int, float] = field(default_factory=dict)
    lines: int = 0
    dropped: dict[str, int] = field(default_factory=dict)   # table -> distinct entries not kept (bounds)

    def add_arg(self, name: str, value: str) -> None:
        if name in self.args:
            return
        if len(self.args) >= MAX_ARGS:
            self.dropped["args"] = self.dropped.get("args", 0) + 1
            return
        self.args[name[:MAX_ARG_LEN]] = value[:MAX_ARG_LEN]


def profile_run(path: Path, *, keep_examples: Optional[set[str]] = None, max_steps: int = 200_000) -> RunProfile:
    from llmtriage.detect.metrics import parse_line

    prof = RunProfile()
    ln = 0
    last_bar = (-10, 0)                     # (line, step) of the last tqdm bar
    pending: Optional[tuple[int, float, Optional[int]]] = None   # a loss without a step, waiting for the next bar

    def put(step: int, loss: float) -> None:
        if len(prof.losses) < max_steps:
            prof.losses.setdefault(step, loss)
    with open(path, "rb") as fh:
        for chunk, _ in iter_blocks(fh):
            lines, view = match_view(chunk)
            for raw in lines.split(b"\n")[:-1] if lines.endswith(b"\n") else lines.split(b"\n"):
                ln += 1
                text = normalise_text(decode_line(raw[:4096])[0])
                if not text.strip():
                    continue
                if "loss" in text:
                    parsed = parse_line(text.encode("utf-8", "replace"))
                    if parsed is not None and parsed[1] is not None:
                        if pending is not None and pending[2] is not None:
                            put(pending[2], pending[1])
                        pending = None
                        if parsed[0] is not None:
                            put(parsed[0], parsed[1])
                        else:   # the bar right after it names its step, else the one right before
                            pending = (ln, parsed[1], last_bar[1] if ln - last_bar[0] <= 2 else None)
                        continue
                if _PROGRESS.search(text):
                    b = _BAR_STEP.search(text)
                    if b:
                        last_bar = (ln, int(b.group(1)))
                        if pending is not None and ln - pending[0] <= 1:
                            put(last_bar[1], pending[1])
                        elif pending is not None and pending[2] is not None:
                            put(pending[2], pending[1])
                        pending = None
                    continue
                for m in _VERSION.finditer(text):
                    prof.versions.setdefault(m.group(1).lower().replace("_", "-").replace("pytorch", "torch"), m.group(2))
                if "--" in text:
                    for m in _CLI_ARG.finditer(text):
                        prof.add_arg(m.group(1), m.group(2))
                else:
                    m = _KV_ARG.match(text)
                    if m:
                        prof.add_arg(m.group(1), m.group(2))
                tpl = template_of(text)
                cur = prof.templates.get(tpl)
                if cur is None:
                    if len(prof.templates) < MAX_TEMPLATES:
                        prof.templates[tpl] = [1, ln]
                        if keep_examples is None or tpl not in keep_examples:
                            prof.example[tpl] = text[:300]
                    else:
                        prof.dropped["templates"] = prof.dropped.get("templates", 0) + 1
                else:
                    cur[0] += 1
    prof.lines = ln
    return prof


def _diverge(good: dict[int, float], bad: dict[int, float], rel: float = 0.25, abs_: float = 0.1) -> Optional[dict[str, Any]]:
    common = sorted(set(good) & set(bad))
    for s in common:
        g, b = good[s], bad[s]
        if not math.isfinite(b) and math.isfinite(g):
            return {"step": s, "good_loss": g, "bad_loss": str(b)}
        if math.isfinite(g) and math.isfinite(b) and abs(b - g) > max(abs_, rel * abs(g)):
            return {"step": s, "good_loss": g, "bad_loss": b}
    return None


@dataclass
class DiffResult:
    good: str
    bad: str
    new_templates: list[dict[str, Any]]
    versions: list[dict[str, Any]]
    args: list[dict[str, Any]]
    divergence: Optional[dict[str, Any]]
    common_steps: int
    reports: list[Report]
    truncated: dict[str, dict[str, int]] = field(default_factory=dict)   # run -> table -> entries not kept

    def to_dict(self) -> dict[str, Any]:
        return {"version": JSON_VERSION, "diff": {
            "good": self.good, "bad": self.bad, "new_templates": self.new_templates,
            "changed_versions": self.versions, "changed_args": self.args,
            "metric_divergence": self.divergence, "common_steps": self.common_steps,
            "bad_root_cause": self.reports[1].findings[0].to_dict() if self.reports[1].findings else None,
            "truncated": self.truncated,
        }, "reports": [r.to_dict() for r in self.reports]}


def diff_runs(good: str, bad: str, *, lang: Optional[str] = None, rules_dirs: tuple[str, ...] = (),
              max_templates: int = 50) -> DiffResult:
    from llmtriage import get_engine, scan_source

    gp, bp = Path(good), Path(bad)
    for p in (gp, bp):
        if not p.is_file():
            raise InputError(f"{p}: no such file")
    eng = get_engine(list(rules_dirs), lang=lang)
    reports = [scan_source(eng, gp, name=good), scan_source(eng, bp, name=bad)]
    g = profile_run(gp)
    b = profile_run(bp, keep_examples=set())
    new = [(tpl, c[0], c[1]) for tpl, c in b.templates.items() if tpl not in g.templates]
    new.sort(key=lambda x: x[2])
    new_templates = [{"template": t, "count": n, "line": ln, "example": b.example.get(t, "")} for t, n, ln in new[:max_templates]]
    versions = [{"name": k, "good": g.versions.get(k), "bad": v} for k, v in sorted(b.versions.items())
                if g.versions.get(k) != v] + [{"name": k, "good": v, "bad": None} for k, v in sorted(g.versions.items())
                                               if k not in b.versions and b.versions]
    args = [{"name": k, "good": g.args.get(k), "bad": v} for k, v in sorted(b.args.items()) if g.args.get(k) != v]
    args += [{"name": k, "good": v, "bad": None} for k, v in sorted(g.args.items()) if k not in b.args and b.args]
    div = _diverge(g.losses, b.losses)
    return DiffResult(good=good, bad=bad, new_templates=new_templates, versions=versions, args=args,
                      divergence=div, common_steps=len(set(g.losses) & set(b.losses)), reports=reports,
                      truncated={k: p.dropped for k, p in (("good", g), ("bad", b)) if p.dropped})


__all__ = ["analyze_job", "diff_runs", "JobResult", "DiffResult", "RankInfo", "collect_inputs", "rank_from_name",
           "parse_time", "template_of", "status_of", "cascade_sentence"]
