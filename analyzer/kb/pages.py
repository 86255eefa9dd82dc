"""A rule's or a category's page as plain data (layer 4): what `kb show` and the site render.

Rendering is elsewhere: kb/page_text.py (terminal), kb/site.py (HTML). The words of the pages
(labels) are rules/kb.yaml data, read by kb/words.py.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Optional

from llmtriage.detect.actions import next_line, rule_action
from llmtriage import get_engine
from llmtriage.kb.words import KbWords, load_kb_words
from llmtriage.engine.redact import redact
from llmtriage.report.render import render_human
from llmtriage.report.texts import report_labels
from llmtriage.ruleset.loader import builtin_rules_dir
from llmtriage.ruleset.verified import transformers_text, verification

_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def find_rule(rs: Any, ident: str) -> Optional[dict[str, Any]]:
    """The rule with id or alias `ident`, or None."""
    rule = rs.by_id.get(ident)
    if rule is None:
        rule = next((r for r in rs.rules if ident in (r.get("aliases") or ())), None)
    return rule


def source_path(rule: dict[str, Any]) -> str:
    """The rule file, relative to the rules package when built in (e.g. rules/cuda-oom/x.yaml)."""
    path = Path(rule.get("file", ""))
    try:
        rel = path.resolve().relative_to(builtin_rules_dir().resolve())
        return str(Path("rules") / rel)
    except (ValueError, OSError):
        return str(path)


def example_output(engine: Any, log: str, lang: Optional[str]) -> tuple[str, Optional[str]]:
    """What `llmtriage` prints for `log` (human format, no colour) and the top rule id."""
    data = log if log.endswith("\n") else log + "\n"
    rep = engine.scan(io.BytesIO(data.encode("utf-8")), "example.log")
    buf = io.StringIO()
    render_human([rep], buf, color=False, lang=lang, top=3)
    top = rep.findings[0].rule_id if rep.findings else None
    # keep the headline, message, evidence line and "also found"; the explanation and fixes are
    # the page itself
    skip_from = tuple(f"  {report_labels(lg)[k]}:" for k in ("what", "why", "fixes") for lg in ("en", "zh"))
    resume_at = tuple(f"  {report_labels(lg)['also']}:" for lg in ("en", "zh"))
    kept: list[str] = []
    skipping = False
    for line in buf.getvalue().rstrip("\n").splitlines():
        if line.startswith(skip_from):
            if not skipping:
                kept.append("  …")
            skipping = True
            continue
        if line.startswith(resume_at):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept), top


def rule_page(rs: Any, rule: dict[str, Any], *, lang: Optional[str] = None, engine: Any = None,
              verified: Optional[dict[str, Any]] = None, words: Optional[KbWords] = None) -> dict[str, Any]:
    """Everything a rule's page shows, as plain data. `verified` is a verified-fix table
    (default: the rule set's, from rules/verified.json)."""
    lang = lang if lang == "zh" else None
    words = words if words is not None else load_kb_words()
    if hasattr(rs, "load_details"):
        rs.load_details()                  # the page shows the rule's examples
    t = rs.text(rule, lang)
    translated = lang is None or rule["id"] in rs.locales.get(lang, {})
    verified = rs.verified if verified is None else verified
    if engine is None:
        engine = get_engine(rs, lang=lang)
    ex = rule["examples"]["match"][0] if rule["examples"]["match"] else None
    output, top = example_output(engine, ex["log"], lang) if ex else ("", None)
    fixes = []
    for f in t["fixes"]:
        fixes.append({"title": f["title"], "detail": f["detail"], "when": f.get("when"), "snippet": f.get("snippet"),
                      "verified_by": f.get("verified_by"), "verification": verification(f.get("verified_by"), verified)})
    confused = []
    for nm in rule["examples"]["no_match"]:
        other = nm.get("expect_rule")
        orule = rs.by_id.get(other) if other else None
        confused.append({"why": nm.get("why", ""), "log": redact(nm["log"].rstrip("\n")), "expect_rule": other,
                         "expect_title": rs.text(orule, lang)["title"] if orule else None,
                         "expect_category": orule["category"] if orule else None})
    sig = {k: [{"name": p.get("name"), "regex": p["regex"]} for p in rule["match"].get(k) or []]
           for k in ("any", "not", "requires", "unless")}
    zh_names = words.category_names.get("zh", {})
    return {
        "kind": "rule", "lang": lang or "en", "translated": translated, "id": rule["id"],
        "title": t["title"], "category": rule["category"],
        "category_desc": zh_names.get(rule["category"]) if lang == "zh" else rs.taxonomy.get(rule["category"], ""),
        "severity": rule["severity"], "role": rule["role"], "confidence": rule.get("confidence"),
        "priority": rule.get("priority"), "tags": list(dict.fromkeys(t.get("tags") or [])),
        "keywords": list(rule.get("keywords") or []), "message": t["message"],
        "what": str(t["explain"].get("what", "")).strip(), "why": str(t["explain"].get("why", "")).strip(),
        "signatures": sig, "example": {"name": (ex or {}).get("name"), "log": redact(ex["log"].rstrip("\n")) if ex else "",
                                       "output": output, "top": top},
        "fixes": fixes, "confused": confused, "references": list(rule.get("references") or []),
        "source": source_path(rule), "aliases": list(rule.get("aliases") or []),
        "action": dict(zip(("action", "reason"), rule_action(rule, lang))),
        "next": next_line(*rule_action(rule, lang), lang),
    }


def category_page(rs: Any, category: str, *, lang: Optional[str] = None,
                  words: Optional[KbWords] = None) -> dict[str, Any]:
    """A category's page as plain data: its descriptions and its rules, causes and errors first."""
    lang = lang if lang == "zh" else None
    words = words if words is not None else load_kb_words()
    rules = [r for r in rs.rules if r["category"] == category]
    rules.sort(key=lambda r: (r["role"] != "cause", _SEVERITY_ORDER.get(r["severity"], 3),
                              -int(r.get("priority") or 50), r["id"]))
    return {"kind": "category", "lang": lang or "en", "category": category,
            "description": rs.taxonomy.get(category, ""),
            "description_zh": words.category_names.get("zh", {}).get(category, ""),
            "rules": [{"id": r["id"], "title": rs.text(r, lang)["title"], "severity": r["severity"],
                       "role": r["role"]} for r in rules]}


def verification_text(v: Optional[dict[str, Any]], key: Optional[str], labels: dict[str, str]) -> Optional[str]:
    """The line a page shows after a fix with `verified_by` = `key` (None when it has none)."""
    if not key:
        return None
    if v is None:
        return f"{labels['not_run']} ({key})"
    bits = [b for b in (f"torch {v['torch']}" if v.get("torch") else None,
                        transformers_text(v, labels["and"]),
                        str(v["date"])[:10] if v.get("date") else None) if b]
    where = f"{labels['on']} {v.get('device') or '?'}" + (f" ({', '.join(bits)})" if bits else "")
    return f"{'✔ ' + labels['verified'] if v['verified'] else '✖ ' + labels['not_verified']} {where} [{key}]"
