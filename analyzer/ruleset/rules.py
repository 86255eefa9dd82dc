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
