"""The credential catalogue, rules/secrets.yaml: read and checked entry by entry (the renderers'
masking, `report.redact`, takes the checked entries from the rule cache)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from llmtriage.errors import RuleLoadError
from llmtriage.ruleset.files import compose_data_file

try:  # pragma: no cover - depends on the install
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None


def load_secrets(path: Path) -> list[dict[str, Any]]:
    """The credential catalogue (a list under `secrets:`), checked entry by entry."""
    data = compose_data_file(path)
    entries = data.get("secrets") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise RuleLoadError([f"{path}:1:1: expected a list 'secrets:' of credential patterns"])
    problems = [f"{path}: secrets[{i}]: {err}" for i, e in enumerate(entries) for err in [check_entry(e)] if err]
    if problems:
        raise RuleLoadError(problems)
    return [dict(e) for e in entries]


def check_entry(spec: Any) -> Optional[str]:
    """None if `spec` is a valid catalogue entry, else the problem."""
    if not isinstance(spec, dict) or not isinstance(spec.get("id"), str) or not isinstance(spec.get("regex"), str):
        return "each entry needs an 'id' and a 'regex' (strings)"
    extra = set(spec) - {"id", "regex", "keywords", "partial", "keep"}
    if extra:
        return f"unknown keys {sorted(extra)}"
    kw = spec.get("keywords", [])
    if not isinstance(kw, list) or not all(isinstance(k, str) and k == k.lower() for k in kw):
        return "keywords must be a list of lower-case strings"
    try:
        re.compile(spec["regex"])
        if _re2 is not None:
            opts = _re2.Options()
            opts.log_errors = False
            _re2.compile(spec["regex"], opts)
    except Exception as exc:  # noqa: BLE001 - any compile error is the entry's problem
        return f"regex does not compile in re and RE2: {exc}"
    return None
