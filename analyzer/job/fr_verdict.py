"""The Flight Recorder verdict in a job: one sentence, and the suspect whose own log shows the cause.

`merge_into(res, frr, lang)` puts `flight_recorder.FRResult` into a `jobs.JobResult`: the dict as
`job.flight_recorder`, the sentence (rules/job_texts.yaml) after the logs' cascade, and, when a suspect
rank's log shows a cause (a native crash or an Xid before anything else), that rank as the first
failing rank with its finding as the root cause.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from llmtriage.detect.flight_recorder import FRResult
from llmtriage.job.cascade import cascade_sentence
from llmtriage.job.model import JobResult
from llmtriage.job.texts import say

ROOT_FIRST = ("native-crash", "gpu-hardware-fault")     # a suspect's crash or Xid outranks any other cause


def _list(ranks: list[int], n: int = 8) -> str:
    return ", ".join(map(str, ranks[:n])) + (" …" if len(ranks) > n else "")


def _sizes(x: Any) -> str:
    if not x:
        return "-"
    ins = x[0] if isinstance(x, (list, tuple)) and x else x
    return json.dumps(ins, separators=(",", ":"))


def describe(frr: FRResult, lang: Optional[str]) -> str:
    """The verdict in one sentence."""
    v: dict[str, Any] = {"dumps": frr.dumps, "suspects": _list(frr.suspects), "op": frr.op, "seq": frr.seq,
                         "group": f"{frr.group} ({frr.desc})" if frr.desc and frr.desc != frr.group else frr.group,
                         "waiting": _list(frr.waiting), "frame": frr.frame, "sizes": _sizes(frr.sizes)}
    if frr.suspect_call:
        v["suspect_op"] = frr.suspect_call["op"]
        v["suspect_sizes"] = _sizes([frr.suspect_call["sizes"]])
    return say("flight_recorder", frr.kind, lang, v)


def merge_into(res: JobResult, frr: FRResult, lang: Optional[str]) -> None:
    """Put the verdict into a JobResult: job.flight_recorder, one sentence after the cascade, and a suspect
    rank whose own log shows a cause (a native crash or an Xid first) becomes the root cause."""
    res.flight_recorder = frr.to_dict()
    if not frr.dumps:
        return
    sentence = describe(frr, lang)
    by_rank = {r.rank: r for r in res.ranks if r.rank is not None}
    cands = [by_rank[s] for s in frr.suspects if s in by_rank and by_rank[s].status == "cause" and by_rank[s].top]
    if cands:
        pick = min(cands, key=lambda r: (r.top.category not in ROOT_FIRST, r.top.sort_key(), r.rank))
        if pick is not res.first:
            launcher = next((f for rep in res.reports for f in rep.findings if f.category == "launcher-child-failed"), None)
            res.first, res.root, res.phase, res.step = pick, pick.top, pick.phase, pick.step
            res.silent_ranks = []
            res.cascade = cascade_sentence(pick, res.ranks, pick.top, launcher, lang=lang)
        sentence += " " + say("flight_recorder", "root", lang, {"rank": pick.rank, "title": pick.top.title,
                                                                 "category": pick.top.category})
    res.fr_sentence = sentence
    res.cascade = (res.cascade + " " + sentence).strip() if res.cascade else sentence


__all__ = ["describe", "merge_into", "ROOT_FIRST"]
