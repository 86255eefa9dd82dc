"""Job-level analysis: many ranks of one job, the first failing rank and the cascade.

`analyze_job(paths)` takes one log per rank/node (files, globs, directories) or one interleaved log
with rank prefixes (`job.interleaved`). Per-file logs are triaged in parallel (`jobs` processes, each
streaming its file in bounded memory); the first failing rank is chosen (`job.ranks.pick_first`)

1. among ranks whose top error is a *cause* (not an NCCL timeout, a launcher summary or a
   teardown signal), by the time stamp at the failing line where every candidate has one of the same
   kind, else by the finding's rank order (cause, severity, priority) — causal order;
2. when no rank has a cause, among the ranks that only time out or are torn down, by time; ranks
   that never reported the timeout the others waited on are listed as `silent_ranks`.

Flight Recorder dumps among the inputs add their verdict (`job.fr_verdict`), and per-file logs the
rank whose log stopped first (`job.stall`). The diff of two runs is `job.diff`.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Optional

from llmtriage.detect.flight_recorder import analyze_dumps, find_dumps
from llmtriage.errors import InputError
from llmtriage.job.cascade import cascade_sentence, silent_text
from llmtriage.job.fr_verdict import merge_into
from llmtriage.job.inputs import collect_inputs, has_logs, rank_from_name
from llmtriage.job.interleaved import analyze_interleaved
from llmtriage.job.model import JobResult, RankInfo
from llmtriage.job.ranks import pick_first, scan_rank_file, silent_ranks, status_of
from llmtriage.job.stall import job_stall


def analyze_job(paths: Iterable[str], *, jobs: int = 1, lang: Optional[str] = None,
                rules_dirs: tuple[str, ...] = (), flight_recorder: Optional[str] = None) -> JobResult:
    """The job's logs, plus the Flight Recorder dumps found among `paths` or in `flight_recorder`."""
    paths = list(paths)
    dumps = find_dumps(paths + ([flight_recorder] if flight_recorder else []))
    if flight_recorder and not dumps:
        raise InputError(f"{flight_recorder}: no Flight Recorder dump (nccl_trace_rank_<N>) found")
    dump_set = {os.path.realpath(d) for d in dumps}
    log_paths = [p for p in paths if not (dumps and Path(p).is_dir() and not has_logs(Path(p)))]
    files = [f for f in collect_inputs(log_paths) if os.path.realpath(f) not in dump_set] if log_paths else []
    if not files and not dumps:
        raise InputError("no log files given")
    if len(files) == 1:
        res = analyze_interleaved(files[0], lang=lang, rules_dirs=tuple(rules_dirs))
    elif files:
        res = analyze_per_file(files, jobs=jobs, lang=lang, rules_dirs=tuple(rules_dirs))
    else:
        res = JobResult(mode="flight-recorder", ranks=[], reports=[])
    if dumps:
        merge_into(res, analyze_dumps(dumps), lang)
    stall = job_stall(res, lang)
    if stall is not None:
        res.stall = stall
    return res


def analyze_per_file(files: list[Path], *, jobs: int, lang: Optional[str], rules_dirs: tuple[str, ...]) -> JobResult:
    """One log per rank: each triaged (in `jobs` processes), its rank from its name or its findings."""
    args = [(str(f), tuple(rules_dirs), lang) for f in files]
    if jobs > 1 and len(files) > 1:
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
    first = pick_first(ranks)
    root = first.top if first else None
    launcher = next((f for r in reports for f in r.findings if f.category == "launcher-child-failed"), None)
    res = JobResult(mode="per-file", ranks=ranks, reports=reports, first=first, root=root,
                    world_size=len(files), phase=first.phase if first else None, step=first.step if first else None)
    res.silent_ranks = silent_ranks(ranks, first)
    res.cascade = cascade_sentence(first, ranks, root, launcher, lang=lang)
    if res.silent_ranks:
        res.cascade += silent_text(res.silent_ranks, lang)
    return res


__all__ = ["analyze_job", "analyze_per_file"]
