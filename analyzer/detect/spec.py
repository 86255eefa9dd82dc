"""The verdict's data (rules/verdict.yaml, rules/actions.yaml) and its {en, zh} texts, shared by the
verdict, the unknown finding and the renderers."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Optional

from llmtriage.ruleset.datafiles import data_file


def verdict_spec() -> dict[str, Any]:
    """rules/verdict.yaml: status markers, fatality contexts, unknown-finding text."""
    return data_file("verdict.yaml")


def action_spec() -> dict[str, Any]:
    """rules/actions.yaml: category defaults, generic reasons, context overrides, labels."""
    return data_file("actions.yaml")


def tr(entry: Any, lang: Optional[str], **values: Any) -> str:
    """Text of a {en, zh} entry in `lang`, with `{name}` placeholders filled."""
    text = entry.get("zh" if lang == "zh" else "en") or entry.get("en", "") if isinstance(entry, dict) else str(entry)
    return text.format(**values) if values else text


@lru_cache(maxsize=128)
def compiled(pattern: str) -> Any:
    """A pattern from the verdict's data files, compiled once (the project's own YAML, never user input)."""
    return re.compile(pattern)
