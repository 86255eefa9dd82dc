"""Knowledge base: search the rules, print a rule's page, build a static HTML site (layer 4).

No click here (see cli_kb.py). The search path stays light: with a warm rule cache it loads the
rules from the JSON rule cache (`llmtriage.load_rules()`), compiles the engine and never imports yaml or
pydantic.

Ranking (`search`) combines three signals over one document per rule (English and Chinese text):
  * BM25F over id, title, tags, keywords, category (+ taxonomy line and a Chinese category name),
    message, explanation and fixes, in both languages; English words are lowercased and lightly
    stemmed, Chinese runs become character bigrams;
  * a small symptom synonym table (显存 -> GPU memory / OOM, 卡住 -> hang / timeout, ...) that adds
    weighted expansion terms to the query;
  * the engine itself run over the query text, so a pasted error line or traceback ranks the rule
    that would fire on it first (strongest signal), plus raw regex hits of each rule's patterns.
"""
from __future__ import annotations

import html
import io
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.kb.words import load_kb_words

# ------------------------------------------------------------------ text analysis

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[a-z0-9]+|[{_CJK}]+")
_HAS_CJK = re.compile(rf"[{_CJK}]")
_STOP = frozenset("a an the of to in on for is are was be and or with by at it its this that as from into "
                  "i my me we you your can how what why when does do did after".split())


def _stem(w: str) -> str:
    if len(w) <= 4 or w.isdigit():
        return w
    if w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith(("ches", "shes", "xes")):
        return w[:-2]
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 5 and not w.endswith("eed"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    else:
        return w
    if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    return w


def tokens(text: str) -> list[str]:
    """Search terms of `text`: stemmed lowercase words and CJK character bigrams."""
    out: list[str] = []
    for m in _TOKEN.finditer(text.lower()):
        t = m.group()
        if _HAS_CJK.match(t):
            if len(t) == 1:
                out.append(t)
            else:
                out.extend(t[i:i + 2] for i in range(len(t) - 1))
        elif t not in _STOP:
            out.append(_stem(t))
    return out


# The search vocabulary lives in rules/kb.yaml (synonyms, Chinese category names, per-category
# search words); see analyzer/kbwords.py.
_WORDS = load_kb_words()
SYNONYMS: dict[str, str] = _WORDS.synonyms
CATEGORY_ZH: dict[str, str] = _WORDS.category_names.get("zh", {})
CATEGORY_TAGS: dict[str, list[str]] = _WORDS.category_tags

# field -> weight in the BM25F document
_FIELDS = {"id": 3.0, "title": 3.0, "tags": 3.0, "keywords": 2.5, "category": 2.5, "catdesc": 1.0,
           "message": 1.0, "explain": 1.0, "fixes": 0.6}
_K1, _B = 1.2, 0.6
_SYN_WEIGHT = 0.5
BONUS_ENGINE_TOP = 2.0      # the engine names this rule as the top finding of the pasted text
BONUS_ENGINE = 1.2          # the engine reports it (not first)
BONUS_PATTERN = 0.8         # one of its regexes matches the query (requires/unless ignored)
BONUS_ID = 3.0              # the query is the rule's id or an alias
BONUS_TAG = 0.4             # the query equals a tag / keyword / title (any language)
BONUS_PHRASE = 0.2          # a tag or keyword occurs in the query, or the query in the title
_PRIOR_ROLE = {"cause": 1.0, "symptom": 0.9}
_PRIOR_SEVERITY = {"error": 1.0, "warning": 0.93, "info": 0.88}


def _rule_fields(rs: Any, rule: dict[str, Any]) -> dict[str, str]:
    en = rs.text(rule, None)
    zh = rs.text(rule, "zh") if rs.locales.get("zh", {}).get(rule["id"]) else None
    parts: dict[str, list[str]] = {k: [] for k in _FIELDS}
    parts["id"] += [rule["id"], " ".join(rule.get("aliases") or [])]
    parts["keywords"] += list(rule.get("keywords") or [])
    parts["category"].append(rule["category"])
    parts["catdesc"] += [rs.taxonomy.get(rule["category"], ""), CATEGORY_ZH.get(rule["category"], "")]
    parts["tags"] += CATEGORY_TAGS.get(rule["category"], [])
    for t in (en, zh):
        if t is None:
            continue
        parts["title"].append(t["title"])
        parts["tags"] += list(t.get("tags") or [])
        parts["message"].append(re.sub(r"\{[A-Za-z_]\w*\}", " ", t["message"]))
        parts["explain"] += [str(t["explain"].get("what", "")), str(t["explain"].get("why", ""))]
        for f in t["fixes"]:
            parts["fixes"] += [str(f.get("title", "")), str(f.get("detail", ""))]
    return {k: "\n".join(v) for k, v in parts.items()}


@dataclass
class _Doc:
    rule: dict[str, Any]
    tf: dict[str, float]
    length: float
    phrases: tuple[str, ...]      # lowercased tags, keywords and titles for phrase bonuses
    titles: tuple[str, ...]


class SearchIndex:
    """BM25F index over a RuleSet (both languages) plus the engine for pasted errors."""

    def __init__(self, rs: Any, engine: Any = None):
        self.rs = rs
        self._engine = engine
        self.docs: list[_Doc] = []
        df: dict[str, int] = {}
        for rule in rs.rules:
            if rule.get("status") == "deprecated":
                continue
            fields = _rule_fields(rs, rule)
            tf: dict[str, float] = {}
            length = 0.0
            for name, text in fields.items():
                w = _FIELDS[name]
                toks = tokens(text)
                length += w * len(toks)
                for t in toks:
                    tf[t] = tf.get(t, 0.0) + w
            for t in tf:
                df[t] = df.get(t, 0) + 1
            en = rs.text(rule, None)
            zh = rs.text(rule, "zh")
            phrases = {p.lower().strip() for p in list(en["tags"]) + list(zh["tags"]) + list(rule["keywords"])
                       + CATEGORY_TAGS.get(rule["category"], [])}
            titles = (en["title"].lower(), zh["title"].lower())
            self.docs.append(_Doc(rule, tf, length, tuple(p for p in phrases if p), titles))
        n = max(len(self.docs), 1)
        self.avglen = sum(d.length for d in self.docs) / n if self.docs else 1.0
        self.idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    @property
    def engine(self) -> Any:
        if self._engine is None:
            from llmtriage import get_engine

            self._engine = get_engine(self.rs)
        return self._engine

    # -------------------------------------------------------------- query
    def query_terms(self, query: str) -> dict[str, float]:
        q = query.lower()
        terms: dict[str, float] = {}
        for t in tokens(q):
            terms[t] = 1.0
        words = set(re.findall(r"[a-z0-9_]+", q))
        words |= {_stem(w) for w in words}      # "slows", "evicting" find the keys "slow", "evict"
        for key, expansion in SYNONYMS.items():
            hit = (key in q) if _HAS_CJK.search(key) else (key in words or (" " in key and key in q))
            if hit:
                for t in tokens(expansion):
                    if terms.get(t, 0.0) < _SYN_WEIGHT:
                        terms[t] = _SYN_WEIGHT
        return terms

    def _bm25(self, doc: _Doc, terms: dict[str, float]) -> float:
        s = 0.0
        norm = _K1 * (1 - _B + _B * doc.length / self.avglen)
        for t, qw in terms.items():
            f = doc.tf.get(t)
            if f:
                s += qw * self.idf.get(t, 0.0) * f * (_K1 + 1) / (f + norm)
        return s

    def _engine_hits(self, query: str) -> tuple[dict[str, int], set[str]]:
        """(rule id -> position among the engine's findings, rule ids with a raw pattern hit)."""
        text = query if query.endswith("\n") else query + "\n"
        data = text.encode("utf-8", errors="replace")
        found: dict[str, int] = {}
        try:
            rep = self.engine.scan(io.BytesIO(data), "query")
            pos = 0
            for f in rep.findings:
                if f.rule_id != "unknown" and f.rule_id not in found:
                    found[f.rule_id] = pos
                    pos += 1
        except Exception:  # a query is never worth a crash; the text signals still work
            pass
        raw: set[str] = set()
        try:
            eng = self.engine
            for pi in eng._flagged(data):
                for ri in eng.any_users[pi]:
                    raw.add(eng.rules[ri]["id"])
        except Exception:
            pass
        return found, raw

    def search(self, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
        query = query.strip()
        if not query:
            return []
        terms = self.query_terms(query)
        text_scores = [self._bm25(d, terms) for d in self.docs]
        top = max(text_scores, default=0.0)
        found, raw = self._engine_hits(query)
        q = " ".join(query.lower().split())
        results = []
        for d, ts in zip(self.docs, text_scores):
            rid = d.rule["id"]
            score = ts / top if top > 0 else 0.0
            signals = []
            if ts > 0:
                signals.append("text")
            if q in d.phrases or q in d.titles:
                score += BONUS_TAG
            elif len(q) >= 2 and (any(len(p) >= 2 and p in q for p in d.phrases) or any(q in t for t in d.titles)):
                score += BONUS_PHRASE
            # people search for what broke their run: causes and errors before symptoms and notices
            score *= _PRIOR_ROLE.get(d.rule["role"], 1.0) * _PRIOR_SEVERITY.get(d.rule["severity"], 1.0)
            if rid in found:
                score += BONUS_ENGINE_TOP if found[rid] == 0 else BONUS_ENGINE
                signals.append("engine")
            elif rid in raw:
                score += BONUS_PATTERN
                signals.append("regex")
            if q == rid or q in (a.lower() for a in d.rule.get("aliases") or ()):
                score += BONUS_ID
                signals.append("id")
            if score <= 0.05:
                continue
            results.append({"rule_id": rid, "category": d.rule["category"], "title": d.rule["title"],
                            "score": round(score, 3), "severity": d.rule["severity"], "role": d.rule["role"],
                            "signals": signals})
        results.sort(key=lambda r: (-r["score"], r["role"] != "cause", r["rule_id"]))
        return results[:limit] if limit and limit > 0 else results


def search(rs: Any, query: str, *, limit: int = 10, lang: Optional[str] = None) -> list[dict[str, Any]]:
    """Rules ranked for `query` (English or Chinese words, or a pasted error), best first.
    Each result: rule_id, category, title (in `lang`), score, severity, role, signals."""
    results = SearchIndex(rs).search(query, limit=limit)
    if lang and lang != "en":
        for r in results:
            r["title"] = rs.text(rs.by_id[r["rule_id"]], lang)["title"]
    return results


def has_cjk(text: str) -> bool:
    return bool(_HAS_CJK.search(text))


# ------------------------------------------------------------------ verified fixes

def verified_file() -> Path:
    try:
        from llmtriage.workflows.verify import verified_path

        return verified_path()
    except Exception:
        from llmtriage.ruleset.files import builtin_rules_dir

        return builtin_rules_dir() / "verified.json"


def load_verified(path: Optional[os.PathLike[str] | str] = None) -> dict[str, Any]:
    """The record written by `llmtriage verify --record` ({} when absent or unreadable)."""
    p = Path(path) if path else verified_file()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def verification(verified_by: Optional[str], data: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The recorded result of a fix's `verified_by` ('scenario:variant'), or None if never run.

    Accepts {"fixes": {KEY: {"verified", "device", "torch", "transformers", "date"}}} and the
    per-device form {"fixes": {KEY: {"devices": {DEV: {"verified", "torch", ...}}}}} (a verified
    run preferred, a GPU over the CPU). Returns {verified, device, torch, transformers, date}."""
    if not verified_by or not isinstance(data, dict):
        return None
    fixes = data.get("fixes")
    entry = fixes.get(verified_by) if isinstance(fixes, dict) else None
    if not isinstance(entry, dict):
        return None
    runs = entry.get("devices")
    cands: list[dict[str, Any]] = []
    if isinstance(runs, dict):
        for dev, rec in runs.items():
            if isinstance(rec, dict):
                cands.append(dict(rec, device=rec.get("device") or dev))
    if "verified" in entry and not cands:
        cands.append(dict(entry))
    if not cands:
        return None
    cands.sort(key=lambda r: (not r.get("verified"), str(r.get("device")) == "cpu", str(r.get("date") or "")))
    best = cands[0]
    return {"verified": bool(best.get("verified") is True), "device": best.get("device"),
            "torch": best.get("torch"), "transformers": best.get("transformers"), "date": best.get("date"),
            "key": verified_by}


# ------------------------------------------------------------------ pages

LABELS = {
    "en": {"category": "Category", "severity": "severity", "role": "role", "confidence": "confidence",
           "priority": "priority", "tags": "Tags", "what": "What happened", "why": "Why",
           "signature": "Signatures", "any": "matches a line", "not": "vetoed on the same line by",
           "requires": "requires elsewhere in the log", "unless": "silent if the log contains",
           "keywords": "keywords", "example": "Example log", "output": "What llmtriage prints for it",
           "fixes": "Fixes", "when": "when", "verified": "verified", "not_verified": "verification failed",
           "not_run": "verification not recorded yet", "on": "on", "confused": "Not to be confused with",
           "instead": "this is", "references": "References", "none": "none", "source": "Source",
           "rules": "Rules", "index": "Knowledge base", "categories": "Categories", "other_lang": "中文",
           "rule": "rule", "no_fire": "(no rule fires)", "title": "llmtriage knowledge base",
           "filter": "Filter rules…", "back": "All categories", "lang_note": ""},
    "zh": {"category": "类别", "severity": "严重性", "role": "角色", "confidence": "置信度",
           "priority": "优先级", "tags": "标签", "what": "含义", "why": "原因",
           "signature": "特征（正则）", "any": "匹配一行", "not": "同一行出现时否决",
           "requires": "日志中还必须出现", "unless": "日志中出现时不触发",
           "keywords": "关键词", "example": "示例日志", "output": "llmtriage 对它的输出",
           "fixes": "修复方法", "when": "适用条件", "verified": "已验证", "not_verified": "验证未通过",
           "not_run": "尚无验证记录", "on": "于", "confused": "不要混淆",
           "instead": "这是", "references": "参考资料", "none": "无", "source": "源文件",
           "rules": "规则", "index": "知识库", "categories": "类别", "other_lang": "English",
           "rule": "规则", "no_fire": "（没有规则触发）", "title": "llmtriage 知识库",
           "filter": "筛选规则…", "back": "全部类别", "lang_note": "（暂无中文翻译，显示英文）"},
}


def _L(lang: Optional[str]) -> dict[str, str]:
    return LABELS["zh" if lang == "zh" else "en"]


def find_rule(rs: Any, ident: str) -> Optional[dict[str, Any]]:
    rule = rs.by_id.get(ident)
    if rule is None:
        rule = next((r for r in rs.rules if ident in (r.get("aliases") or ())), None)
    return rule


def source_path(rule: dict[str, Any]) -> str:
    """The rule file, relative to the rules package when built in (e.g. rules/cuda-oom/x.yaml)."""
    path = Path(rule.get("file", ""))
    try:
        from llmtriage.ruleset.files import builtin_rules_dir

        rel = path.resolve().relative_to(builtin_rules_dir().resolve())
        return str(Path("rules") / rel)
    except (ValueError, OSError):
        return str(path)


def example_output(engine: Any, log: str, lang: Optional[str]) -> tuple[str, Optional[str]]:
    """What `llmtriage` prints for `log` (human format, no colour) and the top rule id."""
    from llmtriage.report.render import render_human

    data = log if log.endswith("\n") else log + "\n"
    rep = engine.scan(io.BytesIO(data.encode("utf-8")), "example.log")
    buf = io.StringIO()
    render_human([rep], buf, color=False, lang=lang, top=3)
    top = rep.findings[0].rule_id if rep.findings else None
    # keep the headline, message, evidence line and "also found"; the explanation and fixes are
    # the page itself
    kept: list[str] = []
    skipping = False
    for line in buf.getvalue().rstrip("\n").splitlines():
        if line.startswith(("  What:", "  含义:", "  Why:", "  原因:", "  Fixes:", "  修复方法:")):
            if not skipping:
                kept.append("  …")
            skipping = True
            continue
        if line.startswith(("  Also found:", "  其他发现:")):
            skipping = False
        if not skipping:
            kept.append(line)
    return "\n".join(kept), top


def rule_page(rs: Any, rule: dict[str, Any], *, lang: Optional[str] = None, engine: Any = None,
              verified: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Everything a rule's page shows, as plain data (rendered by `render_rule_text` / HTML)."""
    from llmtriage.report.render import redact
    from llmtriage.detect.verdict import next_line, rule_action   # page rendering only: kept off the search path (yaml)

    lang = lang if lang == "zh" else None
    t = rs.text(rule, lang)
    translated = lang is None or rule["id"] in rs.locales.get(lang, {})
    verified = load_verified() if verified is None else verified
    if engine is None:
        from llmtriage import get_engine

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
    return {
        "kind": "rule", "lang": lang or "en", "translated": translated, "id": rule["id"],
        "title": t["title"], "category": rule["category"],
        "category_desc": CATEGORY_ZH.get(rule["category"]) if lang == "zh" else rs.taxonomy.get(rule["category"], ""),
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


def category_page(rs: Any, category: str, *, lang: Optional[str] = None) -> dict[str, Any]:
    lang = lang if lang == "zh" else None
    rules = [r for r in rs.rules if r["category"] == category]
    rules.sort(key=lambda r: (r["role"] != "cause", {"error": 0, "warning": 1, "info": 2}.get(r["severity"], 3),
                              -int(r.get("priority") or 50), r["id"]))
    return {"kind": "category", "lang": lang or "en", "category": category,
            "description": rs.taxonomy.get(category, ""), "description_zh": CATEGORY_ZH.get(category, ""),
            "rules": [{"id": r["id"], "title": rs.text(r, lang)["title"], "severity": r["severity"],
                       "role": r["role"]} for r in rules]}


# ------------------------------------------------------------------ terminal rendering

def _wrap(text: str, indent: int, width: int) -> str:
    import textwrap

    pad = " " * indent
    text = " ".join(str(text).split())
    if has_cjk(text):
        return pad + text
    return textwrap.fill(text, width=max(width, 40), initial_indent=pad, subsequent_indent=pad)


def _verif_text(v: Optional[dict[str, Any]], key: Optional[str], L: dict[str, str]) -> Optional[str]:
    if not key:
        return None
    if v is None:
        return f"{L['not_run']} ({key})"
    bits = [b for b in (f"torch {v['torch']}" if v.get("torch") else None,
                        f"transformers {v['transformers']}" if v.get("transformers") else None,
                        str(v["date"])[:10] if v.get("date") else None) if b]
    where = f"{L['on']} {v.get('device') or '?'}" + (f" ({', '.join(bits)})" if bits else "")
    return f"{'✔ ' + L['verified'] if v['verified'] else '✖ ' + L['not_verified']} {where} [{key}]"


def render_rule_text(page: dict[str, Any], *, color: bool = False, width: int = 100) -> str:
    from llmtriage.report.render import _Style

    st = _Style(color)
    L = _L(page["lang"])
    out: list[str] = []
    w = out.append
    w(st(page["title"], "bold") + "  " + st(f"[{page['category']} / {page['id']}]", "dim"))
    meta = (f"{L['category']}: {page['category']}"
            f"{' — ' + page['category_desc'] if page['category_desc'] else ''}")
    w(meta)
    w(f"{L['severity']}: {page['severity']} · {L['role']}: {page['role']} · {L['confidence']}: "
      f"{page['confidence']} · {L['priority']}: {page['priority']}")
    if page["tags"]:
        w(f"{L['tags']}: {', '.join(page['tags'])}")
    if not page["translated"]:
        w(st(L["lang_note"], "yellow"))
    w("")
    for key in ("what", "why"):
        w(st(L[key], "bold"))
        w(_wrap(page[key], 2, width))
        w("")
    w(st(L["signature"], "bold"))
    w(f"  {L['keywords']}: {', '.join(page['keywords'])}")
    for kind in ("any", "not", "requires", "unless"):
        pats = page["signatures"][kind]
        if not pats:
            continue
        w(f"  {L[kind]}:")
        for p in pats:
            w(f"    {st(p['name'] or '-', 'cyan')}  {p['regex']}")
    w("")
    ex = page["example"]
    w(st(L["example"], "bold") + (f" ({ex['name']})" if ex.get("name") else ""))
    for line in ex["log"].splitlines():
        w("  │ " + line)
    w("")
    w(st(L["output"], "bold"))
    for line in (ex["output"] or L["no_fire"]).splitlines():
        w("  │ " + line)
    w("")
    w(st(page["next"], "bold"))
    w(st(L["fixes"], "bold"))
    for n, f in enumerate(page["fixes"], 1):
        vt = _verif_text(f["verification"], f["verified_by"], L)
        ok = bool(f["verification"] and f["verification"]["verified"])
        w(f"  {n}. {st(f['title'], 'bold')}" + (f"  {st(vt, 'green' if ok else 'yellow')}" if vt else ""))
        w(_wrap(f["detail"], 5, width))
        if f.get("when"):
            w(f"     ({L['when']}: {f['when']})")
        if f.get("snippet"):
            for sl in str(f["snippet"]).splitlines():
                w("       " + st(sl, "cyan"))
    w("")
    w(st(L["confused"], "bold"))
    for c in page["confused"]:
        head = f"  - {c['why']}"
        if c["expect_rule"]:
            head += f" → {L['instead']} {c['expect_rule']}" + (f" ({c['expect_title']})" if c["expect_title"] else "")
        w(head)
        for line in c["log"].splitlines():
            w("      │ " + line)
    w("")
    w(st(L["references"], "bold"))
    for ref in page["references"] or [L["none"]]:
        w(f"  - {ref}")
    w("")
    w(f"{L['source']}: {page['source']}")
    return "\n".join(out) + "\n"


def render_category_text(page: dict[str, Any], *, color: bool = False) -> str:
    from llmtriage.report.render import _Style

    st = _Style(color)
    L = _L(page["lang"])
    out = [st(page["category"], "bold") + " — " + page["description"]]
    if page["lang"] == "zh" and page["description_zh"]:
        out.append(page["description_zh"])
    out.append("")
    out.append(st(f"{L['rules']} ({len(page['rules'])})", "bold"))
    width = max((len(r["id"]) for r in page["rules"]), default=10)
    for r in page["rules"]:
        out.append(f"  {r['id']:<{width}}  {r['severity']:<7} {r['role']:<7} {r['title']}")
    out.append("")
    out.append(f"llmtriage kb show {page['rules'][0]['id'] if page['rules'] else 'ID'}")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ static site

REQUIRED_RULE_SECTIONS = ("what", "signature", "example", "output", "fixes", "confused", "references", "source")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI","PingFang SC","Microsoft YaHei",sans-serif;max-width:60rem;
margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1d1d1f}
a{color:#0b5cad}pre{background:#f5f5f7;padding:.6rem .8rem;overflow-x:auto;border-radius:4px;font-size:.85rem}
code{font-size:.9em}.meta{color:#555}.sev-error{color:#b00020}.sev-warning{color:#a15c00}.sev-info{color:#0b5cad}
.verified{color:#107c10;font-weight:600}.unverified{color:#a15c00}table{border-collapse:collapse}
td,th{padding:.2rem .6rem;text-align:left;vertical-align:top;border-bottom:1px solid #e5e5e5}
nav{margin-bottom:1rem}.tag{display:inline-block;background:#eef;border-radius:3px;padding:0 .3rem;margin:.1rem}
"""

_FILTER_JS = """
document.getElementById('q').addEventListener('input',function(){var q=this.value.toLowerCase();
document.querySelectorAll('tr[data-s]').forEach(function(r){r.style.display=r.dataset.s.indexOf(q)<0?'none':''});});
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _doc(title: str, body: str, lang: str) -> str:
    hl = "zh-CN" if lang == "zh" else "en"
    return (f"<!DOCTYPE html>\n<html lang=\"{hl}\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{_e(title)}</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _prefix(lang: str) -> str:
    """Path from a language root to the site root ("" for en, "zh/" for zh)."""
    return "zh/" if lang == "zh" else ""


def _other_lang_link(lang: str, rel: str, depth: int) -> str:
    """Link from a page at `rel` (relative to its language root, `depth` folders deep) to the same
    page in the other language."""
    up = "../" * depth
    if lang == "zh":
        return up + "../" + rel
    return up + "zh/" + rel


def _nav(lang: str, depth: int, rel: str, langs: tuple[str, ...], extra: str = "") -> str:
    L = _L(lang)
    up = "../" * depth
    parts = [f"<a href=\"{up}index.html\">{_e(L['index'])}</a>"]
    if extra:
        parts.append(extra)
    other = "en" if lang == "zh" else "zh"
    if other in langs:
        parts.append(f"<a href=\"{_other_lang_link(lang, rel, depth)}\" hreflang=\"{'zh-CN' if other == 'zh' else 'en'}\">"
                     f"{_e(L['other_lang'])}</a>")
    return "<nav>" + " · ".join(parts) + "</nav>"


def _html_rule(page: dict[str, Any], langs: tuple[str, ...], rule_ids: set[str]) -> str:
    L = _L(page["lang"])
    lang = page["lang"]
    cat = page["category"]
    nav = _nav(lang, 1, f"rules/{page['id']}.html", langs,
               f"<a href=\"../category/{_e(cat)}.html\">{_e(cat)}</a>")
    b: list[str] = [nav, f"<h1>{_e(page['title'])}</h1>"]
    b.append(f"<p class=\"meta\"><code>{_e(page['id'])}</code> · {_e(L['category'])}: "
             f"<a href=\"../category/{_e(cat)}.html\">{_e(cat)}</a> · {_e(L['severity'])}: "
             f"<span class=\"sev-{_e(page['severity'])}\">{_e(page['severity'])}</span> · {_e(L['role'])}: "
             f"{_e(page['role'])} · {_e(L['confidence'])}: {_e(page['confidence'])} · {_e(L['priority'])}: "
             f"{_e(page['priority'])}</p>")
    if page["tags"]:
        b.append("<p>" + " ".join(f"<span class=\"tag\">{_e(t)}</span>" for t in page["tags"]) + "</p>")
    if not page["translated"]:
        b.append(f"<p class=\"unverified\">{_e(L['lang_note'])}</p>")
    b.append(f"<section id=\"what\"><h2>{_e(L['what'])}</h2><p>{_e(page['what'])}</p>"
             f"<h2 id=\"why\">{_e(L['why'])}</h2><p>{_e(page['why'])}</p></section>")
    sig = [f"<section id=\"signature\"><h2>{_e(L['signature'])}</h2>",
           f"<p>{_e(L['keywords'])}: " + ", ".join(f"<code>{_e(k)}</code>" for k in page["keywords"]) + "</p>"]
    for kind in ("any", "not", "requires", "unless"):
        pats = page["signatures"][kind]
        if pats:
            sig.append(f"<h3>{_e(L[kind])}</h3><table>")
            sig += [f"<tr><td>{_e(p['name'] or '-')}</td><td><code>{_e(p['regex'])}</code></td></tr>" for p in pats]
            sig.append("</table>")
    sig.append("</section>")
    b += sig
    ex = page["example"]
    b.append(f"<section id=\"example\"><h2>{_e(L['example'])}"
             f"{(' — ' + _e(ex['name'])) if ex.get('name') else ''}</h2><pre>{_e(ex['log'])}</pre></section>")
    b.append(f"<section id=\"output\"><h2>{_e(L['output'])}</h2><pre>{_e(ex['output'] or L['no_fire'])}</pre></section>")
    b.append(f"<p id=\"next\"><strong>{_e(page['next'])}</strong></p>")
    fx = [f"<section id=\"fixes\"><h2>{_e(L['fixes'])}</h2><ol>"]
    for f in page["fixes"]:
        item = f"<li><strong>{_e(f['title'])}</strong>"
        vt = _verif_text(f["verification"], f["verified_by"], L)
        if vt:
            ok = bool(f["verification"] and f["verification"]["verified"])
            item += f" <span class=\"{'verified' if ok else 'unverified'}\">{_e(vt)}</span>"
        item += f"<p>{_e(f['detail'])}</p>"
        if f.get("when"):
            item += f"<p><em>{_e(L['when'])}:</em> {_e(f['when'])}</p>"
        if f.get("snippet"):
            item += f"<pre>{_e(f['snippet'])}</pre>"
        fx.append(item + "</li>")
    fx.append("</ol></section>")
    b += fx
    cf = [f"<section id=\"confused\"><h2>{_e(L['confused'])}</h2><ul>"]
    for c in page["confused"]:
        item = f"<li>{_e(c['why'])}"
        if c["expect_rule"]:
            target = c["expect_rule"]
            label = _e(target) + (f" — {_e(c['expect_title'])}" if c["expect_title"] else "")
            item += (f" → {_e(L['instead'])} <a href=\"{_e(target)}.html\">{label}</a>" if target in rule_ids
                     else f" → {_e(L['instead'])} <code>{label}</code>")
        item += f"<pre>{_e(c['log'])}</pre></li>"
        cf.append(item)
    cf.append("</ul></section>")
    b += cf
    refs = page["references"]
    if refs:
        b.append(f"<section id=\"references\"><h2>{_e(L['references'])}</h2><ul>" +
                 "".join(f"<li><a href=\"{_e(u)}\" rel=\"noreferrer\">{_e(u)}</a></li>" for u in refs) + "</ul></section>")
    else:
        b.append(f"<section id=\"references\"><h2>{_e(L['references'])}</h2><p>{_e(L['none'])}</p></section>")
    b.append(f"<section id=\"source\"><p class=\"meta\">{_e(L['source'])}: <code>{_e(page['source'])}</code></p></section>")
    return _doc(f"{page['title']} — {page['id']}", "\n".join(b), lang)


def _rules_table(rows: list[dict[str, Any]], href_prefix: str, with_filter_data: bool = False,
                 extra: Optional[dict[str, str]] = None) -> str:
    out = ["<table>"]
    for r in rows:
        data = f" data-s=\"{_e((r['id'] + ' ' + r['title'] + ' ' + (extra or {}).get(r['id'], '')).lower())}\"" \
            if with_filter_data else ""
        out.append(f"<tr{data}><td><a href=\"{href_prefix}{_e(r['id'])}.html\">{_e(r['id'])}</a></td>"
                   f"<td class=\"sev-{_e(r['severity'])}\">{_e(r['severity'])}</td><td>{_e(r['role'])}</td>"
                   f"<td>{_e(r['title'])}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _html_category(page: dict[str, Any], langs: tuple[str, ...]) -> str:
    L = _L(page["lang"])
    lang = page["lang"]
    b = [_nav(lang, 1, f"category/{page['category']}.html", langs),
         f"<h1>{_e(page['category'])}</h1>", f"<p>{_e(page['description'])}</p>"]
    if lang == "zh" and page["description_zh"]:
        b.append(f"<p>{_e(page['description_zh'])}</p>")
    b.append(f"<section id=\"rules\"><h2>{_e(L['rules'])} ({len(page['rules'])})</h2>")
    b.append(_rules_table(page["rules"], "../rules/"))
    b.append("</section>")
    return _doc(f"{page['category']} — llmtriage", "\n".join(b), lang)


def _html_index(rs: Any, lang: str, langs: tuple[str, ...], cats: list[str]) -> str:
    L = _L(lang)
    code_lang = lang if lang == "zh" else None
    b = [_nav(lang, 0, "index.html", langs), f"<h1>{_e(L['title'])}</h1>",
         f"<p><input id=\"q\" type=\"search\" placeholder=\"{_e(L['filter'])}\" size=\"40\"></p>",
         f"<section id=\"categories\"><h2>{_e(L['categories'])}</h2>"]
    for cat in cats:
        rules = category_page(rs, cat, lang=code_lang)["rules"]
        desc = CATEGORY_ZH.get(cat, "") if lang == "zh" else rs.taxonomy.get(cat, "")
        extra = {r["id"]: " ".join(rs.text(rs.by_id[r["id"]], code_lang).get("tags") or []) + " " + cat
                 for r in rules}
        b.append(f"<h3 id=\"cat-{_e(cat)}\"><a href=\"category/{_e(cat)}.html\">{_e(cat)}</a></h3>"
                 f"<p class=\"meta\">{_e(desc)}</p>")
        b.append(_rules_table(rules, "rules/", with_filter_data=True, extra=extra))
    b.append("</section>")
    b.append(f"<script>{_FILTER_JS}</script>")
    return _doc(L["title"], "\n".join(b), lang)


def build_site(rs: Any, out: os.PathLike[str] | str, *, langs: Iterable[str] = ("en", "zh"),
               verified: Optional[dict[str, Any]] = None) -> list[Path]:
    """Write the static site: OUT/index.html, OUT/category/<cat>.html, OUT/rules/<id>.html, and the
    same under OUT/zh/ for Chinese. Returns the files written."""
    from llmtriage import get_engine

    root = Path(out)
    langs = tuple(dict.fromkeys(l if l == "zh" else "en" for l in langs))
    verified = load_verified() if verified is None else verified
    cats = [c for c in rs.taxonomy if any(r["category"] == c for r in rs.rules)]
    cats += sorted({r["category"] for r in rs.rules} - set(cats))
    rule_ids = {r["id"] for r in rs.rules}
    written: list[Path] = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    for lang in langs:
        code_lang = "zh" if lang == "zh" else None
        base = root / _prefix(lang)
        engine = get_engine(rs, lang=code_lang)
        write(base / "index.html", _html_index(rs, lang, langs, cats))
        for cat in cats:
            write(base / "category" / f"{cat}.html", _html_category(category_page(rs, cat, lang=code_lang), langs))
        for rule in rs.rules:
            page = rule_page(rs, rule, lang=code_lang, engine=engine, verified=verified)
            write(base / "rules" / f"{rule['id']}.html", _html_rule(page, langs, rule_ids))
    return written


class _PageParser:
    """Collects section ids, internal links and a few contents of a generated page (stdlib only)."""

    def __init__(self) -> None:
        from html.parser import HTMLParser

        outer = self
        self.sections: dict[str, int] = {}      # section id -> number of <pre>/<li>/<p> inside
        self.links: list[str] = []
        self.ids: set[str] = set()
        self._stack: list[str] = []

        class P(HTMLParser):
            def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
                a = dict(attrs)
                if a.get("id"):
                    outer.ids.add(str(a["id"]))
                if tag == "section":
                    outer._stack.append(str(a.get("id") or ""))
                    outer.sections.setdefault(outer._stack[-1], 0)
                elif tag in ("pre", "li", "p", "tr") and outer._stack:
                    outer.sections[outer._stack[-1]] += 1
                if tag == "a" and a.get("href"):
                    outer.links.append(str(a["href"]))
                if tag in ("link", "script", "img") and (a.get("src") or a.get("href")):
                    outer.links.append(str(a.get("src") or a.get("href")))

            def handle_endtag(self, tag: str) -> None:
                if tag == "section" and outer._stack:
                    outer._stack.pop()

        self.parser = P(convert_charrefs=True)

    def feed(self, text: str) -> "_PageParser":
        self.parser.feed(text)
        self.parser.close()
        return self


def check_site(out: os.PathLike[str] | str) -> list[str]:
    """Problems of a built site: rule pages lacking a required section (or with it empty), internal
    links that do not resolve, external assets. Empty list: the site is complete."""
    root = Path(out)
    problems: list[str] = []
    pages = sorted(root.rglob("*.html"))
    if not (root / "index.html").exists():
        problems.append(f"{root / 'index.html'}: missing")
    for p in pages:
        parsed = _PageParser().feed(p.read_text(encoding="utf-8"))
        rel = p.relative_to(root)
        if rel.parent.name == "rules":
            for sec in REQUIRED_RULE_SECTIONS:
                if sec not in parsed.sections:
                    problems.append(f"{rel}: missing section '{sec}'")
                elif parsed.sections[sec] == 0 and sec not in ("references",):
                    problems.append(f"{rel}: section '{sec}' is empty")
        for href in parsed.links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith("//"):
                if href.startswith(("http://", "https://")) and rel.parent.name == "rules":
                    continue          # references are external links by nature
                problems.append(f"{rel}: external link or asset '{href}'")
                continue
            target, _, frag = href.partition("#")
            dest = (p.parent / target).resolve() if target else p.resolve()
            if not dest.exists():
                problems.append(f"{rel}: broken link '{href}'")
            elif frag and target:
                if frag not in _PageParser().feed(dest.read_text(encoding="utf-8")).ids:
                    problems.append(f"{rel}: broken anchor '{href}'")
    return problems
