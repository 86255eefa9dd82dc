"""The nearest known failure: the last lead for an error that no rule explains and no family places.

Most errors that end a job unexplained are new wordings of failures some rule already describes
("Processor was not found, please check ..." beside a rule for a missing processor config). Each
active rule becomes a bag of words: its id, title, keywords, tags, message, what it explains, its
fixes' titles, the literal words of its patterns, and the lines of its `examples.match` logs that
share at least two of those words (the signature lines, not the noise around them). An unexplained headline is compared with every
bag (tf-idf, cosine); each category scores its closest rule, and the failure-family cue weights
that did not reach a family's threshold (detect/family.py) are added, scaled by `family_weight`.
The best category is named when its score reaches `min_score`; the finding keeps rule id
`unknown` and low confidence, and says which rule it resembles.

Built from the engine's own rules, so a disabled rule is not in the index (the leave-one-rule-out
benchmark measures exactly this lead), and only on the first unexplained death of a process.
"""
from __future__ import annotations

import json
import math
import re
import weakref
from collections import Counter
from functools import lru_cache
from typing import Any, Iterable, Optional

from llmtriage.ruleset import cachefile
from llmtriage.ruleset.cachefile import blake2b

FORMAT = 2

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+|[\u4e00-\u9fff]+")
_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_SYNTAX = re.compile(r"\\[A-Za-z]|\(\?[a-z]*\)|[\\()\[\]{}?*+|^$.]")
_STOP = frozenset("the a an of to in is and or for on at by be with from this that it as are was not no but if "
                  "error errors line file".split())
_INDEXES: "weakref.WeakKeyDictionary[Any, Index]" = weakref.WeakKeyDictionary()


@lru_cache(maxsize=1 << 16)
def _parts(word: str) -> tuple[str, ...]:
    if "\u4e00" <= word[0] <= "\u9fff":
        return tuple(word[i:i + 2] for i in range(max(1, len(word) - 1)))
    parts = {p.lower() for p in _PART.findall(word.replace("_", " "))} | {word.lower()}
    return tuple(sorted(p for p in parts if len(p) >= 2 and p not in _STOP))


def tokens(text: str) -> list[str]:
    """Lower-case words and their CamelCase / snake_case parts; Chinese runs as character pairs."""
    out: list[str] = []
    for w in _WORD.findall(text):
        out.extend(_parts(w))
    return out


def _patterns(rule: dict[str, Any]) -> Iterable[str]:
    match = rule.get("match") or {}
    for key in ("any", "all"):
        for p in match.get(key) or ():
            if isinstance(p, dict) and isinstance(p.get("regex"), str):
                yield p["regex"]


def rule_words(rule: dict[str, Any]) -> Counter:
    """The bag of words that stands for one rule (see the module text)."""
    literal = " ".join(_SYNTAX.sub(" ", p) for p in _patterns(rule))
    signature = set(tokens(literal + " " + " ".join(rule.get("keywords") or ())))
    parts = [rule["id"].replace("-", " "), str(rule.get("title", "")), " ".join(rule.get("keywords") or ()),
             " ".join(rule.get("tags") or ()), str(rule.get("message", "")), literal,
             str((rule.get("explain") or {}).get("what", "")), *(str(f.get("title", "")) for f in rule.get("fixes") or ())]
    for ex in (rule.get("examples") or {}).get("match") or ():
        log = ex.get("log", "") if isinstance(ex, dict) else str(ex)
        parts.extend(ln for ln in log.splitlines() if len(signature.intersection(tokens(ln))) >= 2)
    return Counter(tokens("\n".join(parts)))


_FIELDS = ("id", "category", "title", "keywords", "tags", "message", "match", "examples", "explain", "fixes")


def _bags(rules: list[dict[str, Any]]) -> dict[str, tuple[str, Counter]]:
    """rule id -> (category, bag of words), from the private cache folder when a file for exactly
    these rules is there (checked JSON, ruleset/cachefile.py), computed and written otherwise."""
    blob = json.dumps([[r.get(k) for k in _FIELDS] for r in rules], ensure_ascii=False, sort_keys=True, default=str)
    key = blake2b(f"near {FORMAT}\n{blob}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()[:24]
    folder = cachefile.cache_dir()
    ids = {r["id"] for r in rules}

    def decode(body: Any) -> dict[str, tuple[str, Counter]]:
        bags = {str(rid): (str(cat), Counter({str(t): int(n) for t, n in bag.items()})) for rid, (cat, bag) in body.items()}
        if set(bags) != ids:
            raise ValueError("not these rules")
        return bags

    return cachefile.cached_json(folder / f"near-{key}.json" if folder is not None else None, decode,
                                 lambda: {r["id"]: (r["category"], rule_words(r)) for r in rules},
                                 lambda bags: {rid: [cat, dict(bag)] for rid, (cat, bag) in bags.items()})


class Index:
    """tf-idf vectors of the active rules, by rule id, with each rule's category."""

    def __init__(self, rules: Iterable[dict[str, Any]], universe: Optional[list[dict[str, Any]]] = None):
        """`universe`: a superset of `rules` (the rule set before rules were disabled) whose word bags
        are cached once and subset here; a bag depends on its rule alone."""
        active = list(rules)
        every = _bags(universe) if universe else {}
        bags = {r["id"]: every[r["id"]] for r in active if r["id"] in every}
        if len(bags) < len(active):
            bags = _bags(active)
        df: Counter = Counter()
        for _, bag in bags.values():
            df.update(bag.keys())
        n = max(len(bags), 1)
        self.idf = {t: math.log(n / k) for t, k in df.items() if k < n}
        self.rules = {rid: (cat, self.vector(bag)) for rid, (cat, bag) in bags.items()}

    def vector(self, bag: Counter) -> dict[str, float]:
        v = {t: (1 + math.log(k)) * self.idf[t] for t, k in bag.items() if t in self.idf}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        return {t: x / norm for t, x in v.items()}

    def closest(self, text: str) -> dict[str, tuple[float, str]]:
        """category -> (similarity, rule id) of its closest rule to `text`."""
        q = self.vector(Counter(tokens(text)))
        best: dict[str, tuple[float, str]] = {}
        for rid, (cat, v) in self.rules.items():
            s = sum(x * v.get(t, 0.0) for t, x in q.items())
            if s > best.get(cat, (0.0, ""))[0]:
                best[cat] = (s, rid)
        return best


NEAR_FORMAT = 1


class Postings:
    """The same index as `Index`, kept as postings in a checked JSON file of the cache folder and
    read only for the words of a query: one line per word, `[word, idf, [rule, weight, ...]]` (rules
    by position), after a head line naming the rules. `Index` held ~5 MB of vectors (and building
    it parsed every rule's examples, ~7 MB more) for a lookup that touches a few dozen words.
    `closest` computes exactly what `Index.closest` does (same floats, same order of summation)."""

    def __init__(self, ids: list[str], cats: list[str], blob: Optional[bytes], path: Any = None,
                 rebuild: Any = None):
        self.rules = dict(zip(ids, cats))           # rule id -> category (what the index holds)
        self._ids, self._cats = ids, cats
        self._blob, self._path, self._rebuild = blob, path, rebuild
        self._seen: dict[str, Optional[tuple[float, list[Any]]]] = {}

    @staticmethod
    def encode(index: Index, head: dict[str, Any]) -> bytes:
        """`index` as a postings file (the head line, then one line per word)."""
        ids = list(index.rules)
        pos = {rid: i for i, rid in enumerate(ids)}
        post: dict[str, list[Any]] = {}
        for rid, (_, vec) in index.rules.items():
            for t, w in vec.items():
                post.setdefault(t, []).extend((pos[rid], w))
        lines = [json.dumps({**head, "rules": [[rid, index.rules[rid][0]] for rid in ids]}, ensure_ascii=False,
                            separators=(",", ":"))]
        lines += [json.dumps([t, index.idf[t], post[t]], ensure_ascii=False, separators=(",", ":"))
                  for t in sorted(post)]
        return "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"

    def _text(self) -> bytes:
        if self._blob is not None:
            return self._blob
        blob = cachefile.read(self._path) if self._path is not None else None
        if blob is None:                         # removed (or spoiled) since: built again, kept in memory
            blob = self._blob = self._rebuild()
        return blob

    def _lookup(self, terms: Iterable[str]) -> dict[str, tuple[float, list[Any]]]:
        missing = [t for t in terms if t not in self._seen]
        if missing:
            blob = self._text()
            for t in missing:
                at = blob.find(b"\n" + json.dumps([t], ensure_ascii=False)[:-1].encode("utf-8", "surrogatepass") + b",")
                if at < 0:
                    self._seen[t] = None
                    continue
                end = blob.find(b"\n", at + 1)
                word, idf, flat = json.loads(blob[at + 1:end].decode("utf-8", "surrogatepass"))
                if word != t or not isinstance(flat, list) or len(flat) % 2:
                    raise ValueError("malformed postings")
                self._seen[t] = (float(idf), flat)
        return {t: got for t in terms if (got := self._seen[t]) is not None}

    def closest(self, text: str) -> dict[str, tuple[float, str]]:
        """category -> (similarity, rule id) of its closest rule to `text` (as Index.closest)."""
        bag = Counter(tokens(text))
        post = self._lookup(bag)
        v = {t: (1 + math.log(k)) * post[t][0] for t, k in bag.items() if t in post}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        q = {t: x / norm for t, x in v.items()}
        per: dict[int, dict[str, float]] = {}
        for t in q:
            flat = post[t][1]
            for i in range(0, len(flat), 2):
                per.setdefault(int(flat[i]), {})[t] = float(flat[i + 1])
        best: dict[str, tuple[float, str]] = {}
        for ri in sorted(per):             # rules in index order; a rule sharing no word scores 0 and never leads
            w = per[ri]
            s = sum(x * w.get(t, 0.0) for t, x in q.items())
            cat = self._cats[ri]
            if s > best.get(cat, (0.0, ""))[0]:
                best[cat] = (s, self._ids[ri])
        return best

    def knows(self, rid: str, term: str) -> bool:
        """Whether `term` is in rule `rid`'s vector (a word of its bag that some other rule lacks)."""
        got = self._lookup([term]).get(term)
        if got is None:
            return False
        ri = self._ids.index(rid)
        flat = got[1]
        return any(int(flat[i]) == ri for i in range(0, len(flat), 2))


def _index_knows(idx: Any, rid: str, term: str) -> bool:
    if isinstance(idx, Postings):
        return idx.knows(rid, term)
    return term in idx.rules[rid][1]


def index_for(engine: Any) -> Any:
    """The engine's index (a `Postings`), built on first use and kept as long as the engine lives.
    With a rule set from the rule cache, the postings file is keyed on that cache's key and the
    active rules; it is built (from `Index`, which reads every rule's examples) only when missing."""
    idx = _INDEXES.get(engine)
    if idx is None:
        idx = _INDEXES[engine] = _postings(engine)
    return idx


def _postings(engine: Any) -> Postings:
    ruleset = getattr(engine, "ruleset", None)
    ids = [r["id"] for r in engine.rules]
    cache_key = getattr(ruleset, "cache_key", None)
    folder = cachefile.cache_dir()
    path = None
    head: dict[str, Any] = {"format": NEAR_FORMAT, "key": "", "ids": ""}
    if cache_key and folder is not None:
        digest = blake2b(f"nearx {NEAR_FORMAT}\n{cache_key}\n".encode(), digest_size=16)
        digest.update("\0".join(ids).encode("utf-8", "surrogatepass"))
        key = digest.hexdigest()[:24]
        head = {"format": NEAR_FORMAT, "key": key}
        path = folder / f"nearx-{key}.json"

    def build() -> bytes:
        if ruleset is not None and hasattr(ruleset, "load_details"):
            ruleset.load_details()         # a rule's bag of words includes its example logs
        universe = [r for r in ruleset.rules if r.get("status") != "deprecated"] if ruleset is not None else None
        return Postings.encode(Index(engine.rules, universe), head)

    if path is not None:
        blob = cachefile.read(path)
        if blob is not None:
            try:
                first = json.loads(blob[:blob.index(b"\n")].decode("utf-8", "surrogatepass"))
                pairs = first["rules"]
                if first.get("format") != NEAR_FORMAT or first.get("key") != head["key"] or [p[0] for p in pairs] != ids:
                    raise ValueError("not these rules")
                return Postings(ids, [str(p[1]) for p in pairs], None, path, build)
            except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
                cachefile.remove(path)
    blob = build()
    pairs = json.loads(blob[:blob.index(b"\n")].decode("utf-8", "surrogatepass"))["rules"]
    if path is not None and cachefile.write(path, blob):
        return Postings([p[0] for p in pairs], [p[1] for p in pairs], None, path, build)
    return Postings([p[0] for p in pairs], [p[1] for p in pairs], blob)


def nearest(text: str, engine: Any, family_scores: list[tuple[int, str, list[str]]], spec: dict[str, Any],
            ignore: str = "") -> Optional[tuple[str, str, float]]:
    """(category, closest rule id or "", score) for an unexplained headline `text`, or None.

    Named when the score reaches `spec.min_score` and either `spec.min_shared` words of `text` are
    in that rule's vocabulary (a word counts once however many of its parts are: `KeyError:
    'input_ids'` is one identifier, not evidence; `ignore`, the exception's type name, does not
    count: "RuntimeError" alone says nothing) or the category's own family cues weigh
    `spec.family_lean` or more."""
    if engine is None or not getattr(engine, "rules", None):
        return None
    idx = index_for(engine)
    closest = idx.closest(text)
    total = {cat: s for cat, (s, _) in closest.items()}
    lean: dict[str, int] = {}
    for weight, cat, _ in family_scores:
        total[cat] = total.get(cat, 0.0) + float(spec["family_weight"]) * weight
        lean[cat] = weight
    if not total:
        return None
    cat, score = max(total.items(), key=lambda kv: (kv[1], kv[0]))
    rid = closest.get(cat, (0.0, ""))[1]
    skip = set(_WORD.findall(ignore))
    shared = {w for w in _WORD.findall(text)
              if w not in skip and rid and any(_index_knows(idx, rid, p) for p in _parts(w))}
    if score < float(spec["min_score"]):
        return None
    if len(shared) < int(spec["min_shared"]) and lean.get(cat, 0) < int(spec["family_lean"]):
        return None
    return cat, rid, score
