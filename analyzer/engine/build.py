"""Findings from a scan's per-rule state (layer 2): captures, message and fixes in the scan's language.

The first hit of a rule is confirmed on its line with a time-bounded pattern to take the captures; a
few later hits and the lines of required patterns fill placeholders the first hit lacks.
"""
from __future__ import annotations

from typing import Any

from llmtriage.engine.logparse import decode_line, normalise_text, split_prefix
from llmtriage.findings import Finding
from llmtriage.engine.redact import clip
from llmtriage.ruleset.verified import best_run
from llmtriage.ruleset.regexsafety import bounded_compile
from llmtriage.templates import PLACEHOLDER, checks_hold, render_template

_PY_CACHE: dict[str, Any] = {}


def text_pattern(pattern: str) -> Any:
    """`pattern` on text for captures: stdlib `re` when it cannot backtrack badly, else `regex`
    under a timeout (a timeout reads as no match); `regex` is imported only for such patterns."""
    c = _PY_CACHE.get(pattern)
    if c is None:
        c = _PY_CACHE[pattern] = bounded_compile(pattern)
    return c


def fix_entry(f: dict[str, Any]) -> dict[str, Any]:
    """A rule's fix as a finding carries it (title, detail, and snippet/when/verified_by when set)."""
    out = {"title": f["title"], "detail": f["detail"]}
    for k in ("snippet", "when", "verified_by"):
        if f.get(k):
            out[k] = f[k]
    return out


def _captures(rule: dict[str, Any], text: str) -> dict[str, str]:
    for p in rule["match"]["any"]:
        m = text_pattern(p["regex"]).search(text)      # time-bounded (see regexsafety.bounded_compile)
        if m:
            return {k: v for k, v in m.groupdict().items() if v is not None}
    return {}


def _later_hit_passing(rule: dict[str, Any], more: list[tuple[int, bytes]],
                       caps: dict[str, str]) -> Any:
    """The first later hit whose own numbers pass the rule's checks (line, prefix, captures), or None:
    a rule whose first hit fails a check ('72 placeholders, 72 features') may hold on a later one."""
    for line_no, seg in more:
        pre = split_prefix(normalise_text(decode_line(seg)[0]))
        own = _captures(rule, pre.text)
        if not own:
            continue
        merged = {**caps, **own}
        if checks_hold(rule["match"]["checks"], merged):
            return line_no, pre, merged
    return None


def _seg_text(seg: bytes) -> str:
    return split_prefix(normalise_text(decode_line(seg)[0])).text


def unless_rules(scan: Any) -> frozenset[str]:
    """Ids of the rules an `unless` pattern vetoed: it hit somewhere in the log."""
    eng = scan.engine
    return frozenset(eng.rules[ri]["id"] for ri, unl in enumerate(eng.rule_unless)
                     if any(pi in scan.doc_hits for pi in unl))


def findings(scan: Any) -> list[Finding]:
    """One finding per rule whose state `scan` holds and whose requires/unless patterns agree."""
    eng = scan.engine
    out = []
    for ri, st in scan.states.items():
        if any(pi not in scan.doc_hits for pi in eng.rule_req[ri]):
            continue
        if any(pi in scan.doc_hits for pi in eng.rule_unless[ri]):
            continue
        rule = eng.rules[ri]
        if st.count < rule["match"].get("min_count", 1):
            continue
        raw_text, enc = decode_line(st.first_seg)
        scan.encodings.add(enc)
        pre = split_prefix(normalise_text(raw_text))
        # the line as the rule saw it when the rule's pattern spells the prefix out (a timestamp)
        caps = _captures(rule, pre.text) or _captures(rule, normalise_text(raw_text))
        wanted = set(PLACEHOLDER.findall(rule["message"]))
        for _, seg in st.more_segs:
            if wanted <= set(caps):
                break
            for k, v in _captures(rule, _seg_text(seg)).items():
                caps.setdefault(k, v)
        for pi in eng.rule_req[ri]:       # numbers printed on a required line (e.g. "72 > 32")
            if wanted <= set(caps):
                break
            seg = scan.doc_seg.get(pi)
            if seg is not None:
                m = text_pattern(eng.patterns[pi]).search(_seg_text(seg))
                if m:
                    for k, v in m.groupdict().items():
                        if v is not None:
                            caps.setdefault(k, v)
        line = st.first_line
        if rule["match"].get("checks") and not checks_hold(rule["match"]["checks"], caps):
            later = _later_hit_passing(rule, st.more_segs, caps)
            if later is None:
                continue
            line, pre, caps = later
        text = eng.ruleset.text(rule, scan.lang)
        rank = pre.rank
        if rank is None and caps.get("rank", "").isdigit():
            rank = int(caps["rank"])
        out.append(Finding(
            rule_id=rule["id"], category=rule["category"], severity=rule["severity"], title=text["title"],
            message=render_template(text["message"], caps), line=line, evidence=clip(pre.text.strip(), 2000),
            rank=rank, count=st.count, captures=caps, cause=text["explain"]["why"],
            explanation=text["explain"]["what"], fixes=[_fix(eng.ruleset, f) for f in text["fixes"]], role=rule["role"],
            confidence=rule["confidence"], priority=rule["priority"], last_line=st.last_line,
            ranks=sorted(st.ranks), references=list(rule["references"]),
        ))
    return out


def _fix(ruleset: Any, f: dict[str, Any]) -> dict[str, Any]:
    out = fix_entry(f)
    if f.get("verified_by"):
        rec = best_run(getattr(ruleset, "verified", {}).get(f["verified_by"]))
        out["verified"] = bool(rec and rec.get("verified") is True)
        if rec:
            out["verification"] = {k: rec.get(k) for k in ("device", "torch", "transformers", "date",
                                                            "transformers_versions")}
    return out
