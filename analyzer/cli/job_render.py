"""Human output of `llmtriage job` and `llmtriage diff`, worded by rules/job_texts.yaml (`labels`)."""
from __future__ import annotations

from typing import Any, Optional, TextIO

from llmtriage.job.cascade import who as who_failed
from llmtriage.job.texts import say
from llmtriage.engine.redact import redact
from llmtriage.report.style import SEV, Style, cut, text_width, wrap

STATUS_COLOR = {"cause": "red", "cascade": "yellow", "warning": "blue", "ok": "green"}


def _l(key: str, lang: Optional[str], **values: Any) -> str:
    return say("labels", key, lang, values)


def _rank(rank: Optional[int], lang: Optional[str]) -> str:
    return _l("rank", lang, rank=rank) if rank is not None else _l("rank_unknown", lang)


def _head(st: Style, label: str, text: str, width: Optional[int]) -> str:
    """'  Label: text' with the text wrapped under the label."""
    return f"  {st(label, 'bold')}: {wrap(text, width, 4, 4 + text_width(label))}\n"


def render_job_human(res: Any, out: TextIO, *, color: bool, lang: Optional[str], max_ranks: int = 24,
                     width: Optional[int] = None) -> None:
    st = Style(color)
    n = len(res.reports) if res.mode == "per-file" else 1
    out.write(st(_l("job", lang, n=n, mode=res.mode, world=res.world_size), "bold") + "\n")
    root = res.root
    if root is None or root.severity != "error":
        out.write("  " + st("✔ " + _l("none", lang), "green") + "\n")
    if res.fr_sentence and (root is None or root.severity != "error"):
        out.write(_head(st, say("flight_recorder", "label", lang), res.fr_sentence, width))
    if res.stall and res.stall.get("text"):
        out.write(_head(st, say("stall", "label", lang), res.stall["text"], width))
    if root is not None:
        icon, colr = SEV.get(root.severity, ("•", "blue"))
        first = res.first
        who = who_failed(first, lang) if first is not None else _l("rank_unknown", lang)
        out.write(f"  {st(_l('root', lang), 'bold')}: {st(icon + ' ' + root.title, colr, 'bold')}  "
                  f"{st('[' + root.category + ' / ' + root.rule_id + ']', 'dim')}\n")
        meta = [f"{_l('first', lang)}: {who}"]
        if res.phase:
            meta.append(res.phase)
        if res.step is not None:
            meta.append(_l("step", lang, step=res.step))
        if first is not None and first.time_text:
            meta.append(first.time_text)
        out.write("    " + st(", ".join(meta), "cyan") + "\n")
        out.write(f"    {wrap(redact(root.message), width)}\n")
        where = f"{first.source if first is not None else ''}:{root.line}"
        room = 300 if not width else max(width - 6 - text_width(where), 20)
        out.write(f"    {st(where, 'dim')}: {st(cut(redact(root.evidence), room), 'dim')}\n")
        out.write(_head(st, _l("cascade", lang), res.cascade, width))
        if res.silent_ranks:
            sr = ", ".join(map(str, res.silent_ranks[:16])) + (" …" if len(res.silent_ranks) > 16 else "")
            out.write(f"  {st(_l('silent', lang), 'yellow')}: {sr}\n")
        if root.fixes and root.severity == "error":
            out.write(f"  {st(_l('fixes', lang), 'bold')}:\n")
            for i, fx in enumerate(root.fixes[:3], 1):
                detail = cut(" ".join(str(fx["detail"]).split()), 200)
                lead = f"{i}. {fx['title']} — "
                out.write(f"    {i}. {st(fx['title'], 'bold')} — {wrap(detail, width, 7, 4 + text_width(lead))}\n")
    out.write(f"  {st(_l('ranks', lang), 'bold')}:\n")
    rows = res.ranks
    if len(rows) > max_ranks:
        _grouped(rows, res.first, out, st, lang)
        return
    for r in rows:
        mark = "→" if r is res.first else " "
        t = r.top
        desc = f"{t.category:<22} {t.rule_id} ({_l('line', lang, line=t.line)})" if t is not None else "-"
        extra = f"  {r.time_text}" if r.time_text else ""
        src = f"  {r.source}" if res.mode == "per-file" else ""
        out.write(f"  {mark} {_rank(r.rank, lang):<9} {st(f'{r.status:<8}', STATUS_COLOR[r.status])} {desc}"
                  f"{st(extra + src, 'dim')}\n")


def ranges(ranks: list[int]) -> str:
    """'0-41,43-63'."""
    out, i = [], 0
    rs = sorted(ranks)
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def _grouped(rows: list[Any], first: Any, out: TextIO, st: Style, lang: Optional[str]) -> None:
    """Many ranks: the first failing one on its own line, the others grouped by what they reported."""
    groups: dict[tuple, list[Any]] = {}
    for r in rows:
        key = ("first",) if r is first else (r.status, r.top.category if r.top else "-", r.top.rule_id if r.top else "-")
        groups.setdefault(key, []).append(r)
    order = sorted(groups, key=lambda k: (k != ("first",), {"cause": 0, "cascade": 1, "warning": 2, "ok": 3}.get(k[0], 0)))
    for key in order:
        rs = groups[key]
        if key == ("first",):
            r = rs[0]
            t = r.top
            desc = f"{t.category:<22} {t.rule_id} ({_l('line', lang, line=t.line)})" if t is not None else "-"
            out.write(f"  → {_rank(r.rank, lang):<10} {st(f'{r.status:<8}', 'red')} {desc}"
                      f"{st(('  ' + r.time_text) if r.time_text else '', 'dim')}\n")
            continue
        status, cat, rid = key
        group = _l("group", lang, n=len(rs))
        listed = _l("ranks_of", lang, ranks=ranges([r.rank for r in rs if r.rank is not None]))
        out.write(f"    {group:>9} {st(f'{status:<8}', STATUS_COLOR[status])} {cat:<22} {rid}  {st(listed, 'dim')}\n")


def render_diff_human(res: Any, out: TextIO, *, color: bool, lang: Optional[str], limit: int = 20,
                      width: Optional[int] = None) -> None:
    st = Style(color)
    out.write(st(f"diff {res.good} → {res.bad}", "bold") + "\n")
    bad = res.reports[1]
    if bad.findings:
        f = bad.findings[0]
        icon, colr = SEV.get(f.severity, ("•", "blue"))
        step = _l("step", lang, step=bad.extra["step"]) if bad.extra.get("step") is not None else None
        ps = ", ".join(str(x) for x in (bad.extra.get("phase"), step) if x)
        out.write(f"  {st(_l('badroot', lang), 'bold')}: {st(icon + ' ' + f.title, colr)} [{f.category} / {f.rule_id}] "
                  f"{_l('line', lang, line=f.line)}" + (f" ({ps})" if ps else "") + "\n")
    out.write(f"  {st(_l('diverge', lang), 'bold')}: ")
    if res.divergence:
        d = res.divergence
        out.write(_l("divergence", lang, step=d["step"], good=d["good_loss"], bad=d["bad_loss"]) + "\n")
    else:
        out.write((_l("nodiv", lang, n=res.common_steps) if res.common_steps else _l("nosteps", lang)) + "\n")
    if res.versions:
        out.write(f"  {st(_l('versions', lang), 'bold')}:\n")
        for v in res.versions:
            out.write(f"    {v['name']}: {v['good'] or '-'} → {v['bad'] or '-'}\n")
    if res.args:
        out.write(f"  {st(_l('args', lang), 'bold')}:\n")
        for a in res.args[:limit]:
            out.write(f"    {a['name']}: {a['good'] or '-'} → {a['bad'] or '-'}\n")
    if res.new_templates:
        out.write(f"  {st(_l('new', lang), 'bold')} ({len(res.new_templates)}):\n")
        for t in res.new_templates[:limit]:
            room = 160 if not width else max(width - 25, 40)
            at = _l("line", lang, line=t["line"])
            out.write(f"    {at:>11}  {t['count']:>5}x  "
                      f"{cut(redact(t['example'] or t['template']), room)}\n")
    if getattr(res, "truncated", None):
        what = "; ".join(f"{run}: " + ", ".join(f"{n} {table}" for table, n in tables.items())
                         for run, tables in res.truncated.items())
        out.write(f"  {st(wrap(_l('truncated', lang, what=what), width, 4, 2), 'yellow')}\n")


__all__ = ["render_job_human", "render_diff_human", "ranges"]
