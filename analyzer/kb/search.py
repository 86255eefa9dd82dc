"""Knowledge base search: rank the rules for symptom words or a pasted error (layer 4).

No click here (see cli/kb.py). The search path stays light: with a warm rule cache it loads the
rules from the JSON rule cache (`llmtriage.load_rules()`), compiles the engine and never imports yaml or
pydantic.

Ranking (`search`) combines three signals over one document per rule (English and Chinese text):
  * BM25F over id, title, tags, keywords, category (+ taxonomy line and a Chinese category name),
    message, explanation and fixes, in both languages; English words are lowercased and lightly
    stemmed, CamelCase exception names also yield their words, Chinese runs become character
    bigrams (kb/tokens.py);
  * a small symptom synonym table (rules/kb.yaml, kb/words.py) that adds weighted expansion terms
    to the query (plain-word keys match whole words; Chinese keys and keys with punctuation match
    as substrings, ignoring spaces, the longest first);
  * the engine itself run over the query text, so a pasted error line or traceback ranks the rule
    that would fire on it first (strongest signal), plus raw regex hits of each rule's patterns.
Then each rule gains a share (CATEGORY_WEIGHT) of the scores of its category's next best rules, so the
cause words that several rules of one category share outweigh a model, project or GPU name that one rule
elsewhere carries in a tag or an example.
"""
from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from llmtriage import get_engine
from llmtriage.kb.tokens import camel_parts, has_cjk, stem, tokens
from llmtriage.kb.words import KbWords, load_kb_words

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
CATEGORY_WEIGHT = 0.08      # times the sum of the category's 2nd..CATEGORY_DEPTH-th best scores, added to its rules
CATEGORY_DEPTH = 4
_PRIOR_ROLE = {"cause": 1.0, "symptom": 0.9}
_PRIOR_SEVERITY = {"error": 1.0, "warning": 0.93, "info": 0.88}
_SPACE = re.compile(r"\s+")
_WORD_KEY = re.compile(r"[a-z0-9_ ]+")      # a synonym key of plain words (else it is matched as a substring)


def _rule_fields(rs: Any, rule: dict[str, Any], words: KbWords) -> dict[str, str]:
    en = rs.text(rule, None)
    zh = rs.text(rule, "zh") if rs.locales.get("zh", {}).get(rule["id"]) else None
    parts: dict[str, list[str]] = {k: [] for k in _FIELDS}
    parts["id"] += [rule["id"], " ".join(rule.get("aliases") or [])]
    parts["keywords"] += list(rule.get("keywords") or [])
    parts["category"].append(rule["category"])
    parts["catdesc"] += [rs.taxonomy.get(rule["category"], ""),
                          words.category_names.get("zh", {}).get(rule["category"], "")]
    parts["tags"] += words.category_tags.get(rule["category"], [])
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

    def __init__(self, rs: Any, engine: Any = None, words: Optional[KbWords] = None):
        self.rs = rs
        self.words = words if words is not None else load_kb_words()
        self._engine = engine
        keys = self.words.synonyms
        self._word_keys = [k for k in keys if _WORD_KEY.fullmatch(k)]
        self._substring_keys = sorted((k for k in keys if not _WORD_KEY.fullmatch(k)),
                                      key=lambda k: (-len(_SPACE.sub("", k)), k))
        self.docs: list[_Doc] = []
        df: dict[str, int] = {}
        for rule in rs.rules:
            if rule.get("status") == "deprecated":
                continue
            fields = _rule_fields(rs, rule, self.words)
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
                       + self.words.category_tags.get(rule["category"], [])}
            titles = (en["title"].lower(), zh["title"].lower())
            self.docs.append(_Doc(rule, tf, length, tuple(p for p in phrases if p), titles))
        n = max(len(self.docs), 1)
        self.avglen = sum(d.length for d in self.docs) / n if self.docs else 1.0
        self.idf = {t: math.log(1.0 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    @property
    def engine(self) -> Any:
        if self._engine is None:
            self._engine = get_engine(self.rs)
        return self._engine

    # -------------------------------------------------------------- query
    def query_terms(self, query: str) -> dict[str, float]:
        q = query.lower()
        terms: dict[str, float] = {}
        for t in tokens(query):
            terms[t] = 1.0
        words = set(re.findall(r"[a-z0-9_]+", q)) | set(camel_parts(query))
        words |= {stem(w) for w in words}      # "slows", "evicting" find the keys "slow", "evict"
        # Chinese keys and keys with punctuation ("torch.compile", "==") match inside the query with spaces
        # removed ("降到 0" = "降到0"), longest first; a match hides the shorter keys inside it, so "显存爆炸"
        # is GPU memory, not the "爆炸" of exploding gradients.
        compact = _SPACE.sub("", q)
        hits = []
        for key in self._substring_keys:
            k = _SPACE.sub("", key)
            if k in compact:
                hits.append(key)
                compact = compact.replace(k, "\0")
        hits += [key for key in self._word_keys if key in words or (" " in key and key in q)]
        for key in hits:
            for t in tokens(self.words.synonyms[key]):
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
        scored = []
        for d, ts in zip(self.docs, text_scores):
            rid = d.rule["id"]
            score = ts / top if top > 0 else 0.0
            signals = []
            if ts > 0:
                signals.append("text")
            if q in d.phrases or q in d.titles:
                score += BONUS_TAG
            elif len(q) >= 2 and (any(len(p) >= 2 and _contains(q, p) for p in d.phrases) or any(q in t for t in d.titles)):
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
            scored.append((d, score, signals))
        # category evidence: a title's cause words usually match several rules of the cause's category,
        # while a model, project or hardware name matches one rule (its example or tag) elsewhere, so
        # each rule gains a share of the scores of its category's runners-up.
        by_cat: dict[str, list[float]] = {}
        for d, score, _ in scored:
            if score > 0:
                by_cat.setdefault(d.rule["category"], []).append(score)
        cat_bonus = {c: CATEGORY_WEIGHT * sum(sorted(v, reverse=True)[1:CATEGORY_DEPTH]) for c, v in by_cat.items()}
        results = []
        for d, score, signals in scored:
            score += cat_bonus.get(d.rule["category"], 0.0)
            if score <= 0.05:
                continue
            results.append({"rule_id": d.rule["id"], "category": d.rule["category"], "title": d.rule["title"],
                            "score": round(score, 3), "severity": d.rule["severity"], "role": d.rule["role"],
                            "signals": signals})
        results.sort(key=lambda r: (-r["score"], r["role"] != "cause", r["rule_id"]))
        return results[:limit] if limit and limit > 0 else results


def _word(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _contains(q: str, p: str) -> bool:
    """`p` occurs in `q` as a phrase: an ASCII word edge of `p` must be a word edge in `q` too ("te"
    is not in "template", "rm" not in "format"; "timeout" is in "timeouts", "chatglm" in "chatglm2");
    Chinese has no word edges and matches anywhere."""
    i = q.find(p)
    while i >= 0:
        j = i + len(p)
        if j < len(q) and q[j] == "s" and (j + 1 == len(q) or not _word(q[j + 1])):
            j += 1      # a plural ("timeouts") is the same word
        elif p[-1].isalpha():
            while j < len(q) and q[j].isdigit():
                j += 1  # a version after a name ("chatglm" in "chatglm2", "llama" in "llama3")
        if (not _word(p[0]) or i == 0 or not _word(q[i - 1])) and (not _word(p[-1]) or j == len(q) or not _word(q[j])):
            return True
        i = q.find(p, i + 1)
    return False


def search(rs: Any, query: str, *, limit: int = 10, lang: Optional[str] = None) -> list[dict[str, Any]]:
    """Rules ranked for `query` (English or Chinese words, or a pasted error), best first.
    Each result: rule_id, category, title (in `lang`), score, severity, role, signals."""
    results = SearchIndex(rs).search(query, limit=limit)
    if lang and lang != "en":
        for r in results:
            r["title"] = rs.text(rs.by_id[r["rule_id"]], lang)["title"]
    return results
