"""The cascade sentence of a job: the root cause first (title, category, rank, step, phase, time),
then what the other ranks reported, worded by rules/job_texts.yaml in English or Chinese."""
from __future__ import annotations

from typing import Optional

from llmtriage.findings import Finding
from llmtriage.job.model import RankInfo
from llmtriage.job.texts import say, word


def rank_list(ranks: list[Optional[int]]) -> str:
    """'1, 2, 3' or, past six ranks, '0, 1, 2, 3, 4, … 63'."""
    rs = sorted(r for r in ranks if r is not None)
    if len(rs) > 6:
        return f"{', '.join(map(str, rs[:5]))}, … {rs[-1]}"
    return ", ".join(map(str, rs))


def who(first: RankInfo, lang: Optional[str]) -> str:
    """The failing rank named in words: 'rank 3', 'ranks 0, 3', or a rank the log does not name."""
    if first.rank is not None and len(first.ranks) <= 1:
        return say("cascade", "who_rank", lang, {"rank": first.rank})
    if first.ranks:
        return say("cascade", "who_ranks", lang, {"ranks": rank_list(list(first.ranks))})
    return say("cascade", "who_unknown", lang)


def cascade_sentence(first: Optional[RankInfo], ranks: list[RankInfo], root: Optional[Finding],
                     launcher: Optional[Finding] = None, lang: Optional[str] = None) -> str:
    if first is None or root is None:
        return say("cascade", "none", lang)
    if first.status == "cascade":
        # nobody printed a root cause: say so, and list every rank that only timed out / was torn down
        parts = [say("cascade", "no_cause", lang)]
        others = [r for r in ranks if r.status == "cascade" and r.top is not None and r.rank is not None]
        if first.rank is not None and first not in others:
            others.append(first)
    else:
        parts = [say("cascade", "head", lang, {
            "title": root.title, "category": root.category, "who": who(first, lang), "step": first.step,
            "phase": first.phase if first.phase not in ("training", "unknown") else None,
            "time": first.time_text or None})]
        others = [r for r in ranks if r is not first and r.status in ("cause", "cascade") and r.top is not None]
    by_cat: dict[str, list[RankInfo]] = {}
    for r in others:
        by_cat.setdefault(r.top.category, []).append(r)  # type: ignore[union-attr]
    verbs = {k for k in ("verb_nccl-timeout", "verb_launcher-child-failed", "verb_nccl-error")}
    for cat, rs in sorted(by_cat.items(), key=lambda kv: -len(kv[1])):
        key = f"verb_{cat}" if f"verb_{cat}" in verbs else "verb_default"
        parts.append(say("cascade", "others", lang, {
            "n": len(rs), "rank_word": word("cascade", "rank_one" if len(rs) == 1 else "rank_many", lang),
            "then": word("cascade", "then", lang) if first.status != "cascade" else None,
            "verb": say("cascade", key, lang, {"category": cat}), "list": rank_list([r.rank for r in rs])}))
    if launcher is not None and launcher.category == "launcher-child-failed" and "launcher-child-failed" not in by_cat:
        parts.append(say("cascade", "launcher", lang))
    return word("cascade", "sep", lang).join(parts) + word("cascade", "end", lang)


def silent_text(silent: list[int], lang: Optional[str]) -> str:
    """The sentence naming the ranks that never reported the timeout the others waited on."""
    rs = ", ".join(map(str, silent[:8])) + (" …" if len(silent) > 8 else "")
    return word("cascade", "space", lang) + say("cascade", "silent", lang, {"ranks": rs})


__all__ = ["cascade_sentence", "silent_text", "rank_list", "who"]
