"""The fleet summary: counts by category and action, the repeat-offender nodes (the drain list) and
unrecognised failures grouped by message template, each with a draft rule. Input: fleet rows
(analyzer/fleet.py); output: plain data (JSON `{"version": 1, "fleet": {...}}`) and a human text
whose prose comes from rules/fleet.yaml."""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from hashlib import blake2b
from typing import Any, Optional, TextIO

from llmtriage.findings import JSON_VERSION
from llmtriage.fleet.run import texts

MAX_CLUSTERS = 50
MAX_OFFENDERS = 100
_TOKEN = re.compile(r"<(num|hex|path|time)>")
_TOKEN_RX = {"num": r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", "hex": r"(?:0x[0-9a-fA-F]+|[0-9a-f]{8,})",
             "path": r"\S+", "time": r"\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{2,}")


def is_failed(row: dict[str, Any]) -> bool:
    return not row.get("error") and row.get("severity") == "error"


def _gpu_order(gpu: str) -> tuple[int, int, str]:
    """GPU indexes in numeric order, then bus ids (`0000:3b:00`)."""
    return (0, int(gpu), "") if gpu.isdigit() else (1, 0, gpu)


def summarize(rows: list[dict[str, Any]], lang: Optional[str] = None) -> dict[str, Any]:
    """`logs` (triaged), `failed_to_read`, `by_category` (healthy under "none"; adds up to `logs`),
    `by_action`, `repeat_offenders`, `unknown_clusters`, `unreadable` (source and error)."""
    read = [r for r in rows if not r.get("error")]
    by_cat = Counter(r["category"] if is_failed(r) else "none" for r in read)
    by_action = Counter(r["action"] for r in read if r.get("action"))
    return {
        "logs": len(read),
        "failed": sum(1 for r in read if is_failed(r)),
        "failed_to_read": len(rows) - len(read),
        "by_category": dict(sorted(by_cat.items(), key=lambda kv: (-kv[1], kv[0]))),
        "by_action": dict(sorted(by_action.items(), key=lambda kv: (-kv[1], kv[0]))),
        "repeat_offenders": repeat_offenders(read),
        "unknown_clusters": unknown_clusters(read, lang),
        "unreadable": [{"source": r["source"], "error": r["error"]} for r in rows if r.get("error")],
    }


def repeat_offenders(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes with failures in two or more distinct jobs (Slurm job id, else the source), most jobs first."""
    jobs: dict[str, set[str]] = defaultdict(set)
    cats: dict[str, Counter[str]] = defaultdict(Counter)
    gpus: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        node = r.get("node")
        if not node or not is_failed(r):
            continue
        jobs[node].add(str(r.get("job_id") or r["source"]))
        cats[node][r["category"]] += 1
        if r.get("gpu"):
            gpus[node].add(str(r["gpu"]))
    out = [{"node": n, "jobs": len(js), "categories": dict(cats[n].most_common()), "gpus": sorted(gpus[n], key=_gpu_order)}
           for n, js in jobs.items() if len(js) >= 2]
    out.sort(key=lambda o: (-o["jobs"], o["node"]))
    return out[:MAX_OFFENDERS]


def unknown_clusters(rows: list[dict[str, Any]], lang: Optional[str] = None) -> list[dict[str, Any]]:
    """Unrecognised failures grouped by masked message template, largest first, each with a draft rule."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if is_failed(r) and r.get("rule_id") == "unknown" and r.get("unknown_template"):
            groups[r["unknown_template"]].append(r)
    out = []
    for tpl, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:MAX_CLUSTERS]:
        ex = rs[0]
        example = ex.get("evidence") or ex.get("message") or tpl
        out.append({"template": tpl, "count": len(rs), "example_source": ex["source"], "example": example,
                    "draft_rule": draft_rule(tpl, example, len(rs), lang, family=_family(rs))})
    return out


# ------------------------------------------------------------------------------ draft rules

def template_regex(template: str) -> str:
    """An RE2-compatible regex matching every line whose masked template is `template`."""
    template = re.sub(r"<[a-z]{0,4}$", "", template)          # a token cut by the 300-character limit
    parts, pos = [], 0
    for m in _TOKEN.finditer(template):
        parts.append(_literal(template[pos:m.start()]))
        parts.append(_TOKEN_RX[m.group(1)])
        pos = m.end()
    parts.append(_literal(template[pos:]))
    return "".join(parts)


def _literal(text: str) -> str:
    out = []
    for ch in text:
        if ch == " ":
            out.append(r"\s+")
        elif ch.isalnum() or ch == "_" or ord(ch) > 127:
            out.append(ch)
        else:
            out.append("\\" + ch)
    return re.sub(r"(?:\\s\+)+", r"\\s+", "".join(out))


def _family(rows: list[dict[str, Any]]) -> Optional[str]:
    """The failure family the verdict named for a cluster's rows (one template, so one family), if any."""
    fams = {r.get("category") for r in rows} - {None, "unknown"}
    return fams.pop() if len(fams) == 1 else None


def draft_rule(template: str, example: str, count: int, lang: Optional[str] = None,
               family: Optional[str] = None) -> str:
    """A rule file (YAML text) for one cluster, in the shape `llmtriage rules validate` accepts once
    its placeholder category is replaced by a real one (pre-filled with the cluster's failure family
    when the verdict named one: review it)."""
    import yaml   # deferred: yaml only when draft rules are written

    t = texts(lang)["draft"]
    regex = template_regex(template)
    if not re.search(regex, example):          # a template cut short or a mask that does not round-trip
        regex = _literal(example[:120])
    words = _WORD.findall(template.split(":")[0]) or _WORD.findall(template) or ["error"]
    keyword = max(words, key=len)
    slug = re.sub(r"[^a-z0-9]+", "-", keyword.lower()).strip("-")[:40] or "error"
    rid = f"draft-{slug}-{blake2b(template.encode(), digest_size=3).hexdigest()}"
    headline = re.sub(r"[{}\[\]]", "", template)[:200]
    rule = {
        "id": rid,
        "category": family or "CHOOSE-A-CATEGORY",
        "title": t["title"].format(template_short=_short(headline, 50))[:90],
        "status": "preview",
        "role": "cause",
        "severity": "error",
        "confidence": "low",
        "priority": 50,
        "keywords": [keyword],
        "match": {"any": [{"name": "fleet-template", "regex": regex}]},
        "message": t["message"].format(headline=headline),
        "explain": {"what": t["what"].format(count=count), "why": t["why"]},
        "fixes": [{"title": t["fix_title"], "detail": t["fix_detail"]}],
        "examples": {
            "match": [{"log": example + "\n"}],
            "no_match": [{"log": f"INFO {keyword} handler registered, nothing failed\n", "why": t["no_match_why"]}],
        },
    }
    body = yaml.safe_dump(rule, sort_keys=False, allow_unicode=True, width=200)
    note = t["family_note"].format(family=family) if family else t["category_note"]
    return f"# {note}\n{body}"


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0] + " ..."


# ------------------------------------------------------------------------------ output

def to_json(summary: dict[str, Any]) -> dict[str, Any]:
    return {"version": JSON_VERSION, "fleet": summary}


def render_human(summary: dict[str, Any], out: TextIO, *, lang: Optional[str] = None, parquet: Optional[str] = None,
                 max_items: int = 20) -> None:
    t = texts(lang)
    healthy = summary["by_category"].get("none", 0)
    out.write(t["title"].format(logs=summary["logs"], failed=summary["failed"], healthy=healthy,
                                failed_to_read=summary["failed_to_read"]) + "\n")
    out.write(f"\n{t['by_category']}\n")
    total = max(1, summary["logs"])
    for cat, n in summary["by_category"].items():
        out.write(f"  {cat:<26} {n:>6}  {100 * n / total:5.1f}%\n")
    out.write(f"\n{t['by_action']}\n")
    if not summary["by_action"]:
        out.write(f"  {t['no_action']}\n")
    for act, n in summary["by_action"].items():
        out.write(f"  {act:<26} {n:>6}\n")
    out.write(f"\n{t['repeat_offenders']}\n")
    if not summary["repeat_offenders"]:
        out.write(f"  {t['no_offenders']}\n")
    for o in summary["repeat_offenders"][:max_items]:
        cats = ", ".join(f"{c} x{n}" for c, n in o["categories"].items())
        if o["gpus"]:
            cats += "; GPU " + ", ".join(o["gpus"][:4])
        out.write("  " + t["offender"].format(node=o["node"], jobs=o["jobs"], categories=cats) + "\n")
    out.write(f"\n{t['unknown_clusters']}\n")
    if not summary["unknown_clusters"]:
        out.write(f"  {t['no_unknown']}\n")
    for c in summary["unknown_clusters"][:max_items]:
        out.write("  " + t["cluster"].format(count=c["count"], template=c["template"][:160]) + "\n")
        out.write("      " + t["cluster_example"].format(source=c["example_source"]) + "\n")
    if summary["unknown_clusters"]:
        out.write(f"  {t['drafts_note']}\n")
    if summary["unreadable"]:
        out.write("\n" + t["unreadable"].format(count=len(summary["unreadable"])) + "\n")
        for u in summary["unreadable"][:max_items]:
            out.write(f"  {u['error']}\n")
    if parquet:
        out.write("\n" + t["parquet"].format(path=parquet) + "\n")
