"""RuleSet: validated rules, overlays and the data beside them, as plain data (layer 1).

What the engine compiles, the renderers translate and the rule cache stores (`loader`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


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

    def __post_init__(self) -> None:
        self.by_id = {r["id"]: r for r in self.rules}

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
