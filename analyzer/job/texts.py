"""User-facing text of `llmtriage job`'s Flight Recorder and stall verdicts: rules/job_texts.yaml."""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.engine.matcher import render_template
from llmtriage.ruleset.loader import builtin_rules_dir

_TEXTS: dict[str, Any] = {}


def job_texts() -> dict[str, Any]:
    if not _TEXTS:
        import yaml   # deferred: the triage path (stalls' observer imports this module) never loads yaml

        text = (builtin_rules_dir() / "job_texts.yaml").read_text(encoding="utf-8")
        _TEXTS.update(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    return _TEXTS


def say(section: str, key: str, lang: Optional[str], values: dict[str, Any]) -> str:
    """The `key` text of `section` in `lang` (en unless zh), placeholders filled; words joined by spaces."""
    tpl = job_texts()[section]["zh" if lang == "zh" else "en"][key]
    tpl = " ".join(tpl.split())
    return render_template(tpl, {k: ("" if v is None else str(v)) for k, v in values.items()})
