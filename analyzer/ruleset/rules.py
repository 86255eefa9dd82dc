"""RuleSet: validated rules, overlays and the data beside them, as plain data (layer 1).

What the engine compiles, the renderers translate and the rule cache stores (`loader`).
A RuleSet read from the rule cache holds its details (every rule's `examples` and the translation
overlays, 40% of the cache) unparsed until something asks for them: `locales` loads them on first
access, and the readers of `examples` (rule tests, KB pages, the nearest-failure index) call
`load_details()` first. Triage of a log whose findings are all in English never parses them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional


# A rule's prose: what a finding or a page shows, never what the engine compiles. The rule cache keeps
# it apart (loader._cache_payload) and a rule read from there parses it on first use (LazyRule).
BODY_KEYS = ("title", "message", "explain", "fixes", "references", "tags")
ORDER_KEY = "@k"          # in a cached body: the rule's keys in their original order


class LazyRule(dict):
    """A rule dict from the rule cache whose prose (BODY_KEYS) is parsed on first use: any access to a
    key it lacks, or to the whole mapping (iteration, items, len, equality, copies, JSON), fills it in
    first, in the rule's original key order. Triage parses only the rules that fire (~3 MB and ~20 ms
    less per start with 874 rules). `body()` returns the prose as a dict (with ORDER_KEY)."""

    __slots__ = ("_body",)

    def __init__(self, hot: dict[str, Any], body: Callable[[], dict[str, Any]]):
        dict.__init__(self, hot)
        self._body: Optional[Callable[[], dict[str, Any]]] = body

    def inflate(self) -> "LazyRule":
        body = self._body
        if body is not None:
            self._body = None
            full = dict(body())
            order = full.pop(ORDER_KEY, None) or []
            merged = {**dict(self.__iter_plain()), **full}
            known = set(order)
            keys = [k for k in order if k in merged] + [k for k in merged if k not in known]
            dict.clear(self)
            dict.update(self, {k: merged[k] for k in keys})
        return self

    def __iter_plain(self) -> Any:
        return dict.items(self)

    def __missing__(self, key: Any) -> Any:
        if self._body is None:
            raise KeyError(key)
        self.inflate()
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        if self._body is not None and not dict.__contains__(self, key):
            self.inflate()
        return dict.get(self, key, default)

    def __contains__(self, key: Any) -> bool:
        if self._body is not None and not dict.__contains__(self, key):
            self.inflate()
        return dict.__contains__(self, key)

    def __iter__(self) -> Any:
        return dict.__iter__(self.inflate())

    def __len__(self) -> int:
        return dict.__len__(self.inflate())

    def keys(self) -> Any:
        return dict.keys(self.inflate())

    def values(self) -> Any:
        return dict.values(self.inflate())

    def items(self) -> Any:
        return dict.items(self.inflate())

    def copy(self) -> dict[str, Any]:
        return dict(dict.items(self.inflate()))

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, LazyRule):
            other.inflate()
        return dict.__eq__(self.inflate(), other)

    def __ne__(self, other: Any) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return dict.__repr__(self.inflate())

    def __delitem__(self, key: Any) -> None:
        dict.__delitem__(self.inflate(), key)

    def pop(self, key: Any, *default: Any) -> Any:
        return dict.pop(self.inflate(), key, *default)

    def popitem(self) -> Any:
        return dict.popitem(self.inflate())

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if self._body is not None and not dict.__contains__(self, key):
            self.inflate()
        return dict.setdefault(self, key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        dict.update(self.inflate(), *args, **kwargs)

    def __or__(self, other: Any) -> Any:
        return dict.__or__(self.copy(), other)

    def __ror__(self, other: Any) -> Any:
        return dict.__or__(dict(other), self.copy())

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (dict, (self.copy(),))

    def __copy__(self) -> dict[str, Any]:
        return self.copy()

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        import copy   # deferred: only when a caller deep-copies rules

        return copy.deepcopy(self.copy(), memo)


@dataclass
class RuleSet:
    """Validated rules as plain dicts (what the matcher, KB and renderers use)."""

    rules: list[dict[str, Any]]
    locales: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    taxonomy: dict[str, str] = field(default_factory=dict)
    dirs: tuple[str, ...] = ()
    verified: dict[str, Any] = field(default_factory=dict)   # rules/verified.json "fixes" (by verify --record)
    data: dict[str, Any] = field(default_factory=dict)       # DATA_FILES by name (built-in rules only)
    secrets: list[dict[str, Any]] = field(default_factory=list)  # rules/secrets.yaml (see redact.py)
    # (examples by rule id, locales), parsed on demand; set by the rule cache (`loader`) only
    details: Optional[Callable[[], tuple[dict[str, Any], dict[str, Any]]]] = field(default=None, repr=False,
                                                                                  compare=False)
    # the rule cache's key (a fingerprint of every rule file) when it came from or went to the cache:
    # caches derived from these rules alone (detect/nearest.py) are keyed on it
    cache_key: Optional[str] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.by_id = {r["id"]: r for r in self.rules}
        if self.details is not None:
            del self.locales                 # read through __getattr__ until the details are parsed

    def __getattr__(self, name: str) -> Any:
        if name == "locales" and self.__dict__.get("details") is not None:
            self.load_details()
            return self.__dict__["locales"]
        raise AttributeError(name)

    def load_details(self) -> "RuleSet":
        """Parse the details held back by the rule cache (each rule's `examples`, `locales`); idempotent."""
        details = self.__dict__.get("details")
        if details is not None:
            examples, locales = details()
            for r in self.rules:
                if "examples" not in r:
                    r["examples"] = examples.get(r["id"]) or {"match": [], "no_match": []}
            self.locales = locales
            self.details = None
        return self

    def __len__(self) -> int:
        return len(self.rules)

    def text(self, rule: dict[str, Any], lang: Optional[str]) -> dict[str, Any]:
        """User-facing text of `rule` in `lang` (title, message, explain, fixes, tags)."""
        base = {k: rule[k] for k in ("title", "message", "explain", "fixes", "tags")}
        if lang and lang != "en":
            over = self.locales.get(lang, {}).get(rule["id"])
            if over:
                fixes = [dict(f, **{k: o[k] for k in ("title", "detail", "when") if o.get(k)})
                         for f, o in zip(rule["fixes"], over["fixes"])]
                base = {"title": over["title"], "message": over["message"], "explain": over["explain"],
                        "fixes": fixes, "tags": list(rule["tags"]) + list(over.get("tags", []))}
        return base
