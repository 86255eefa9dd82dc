"""User-facing text of `llmtriage job`'s Flight Recorder and stall verdicts: rules/job_texts.yaml."""
from __future__ import annotations

from importlib.resources import files
from typing import Any, Optional

from llmtriage.templates import render_template

_TEXTS: dict[str, Any] = {}


def job_texts() -> dict[str, Any]:
    if not _TEXTS:
        import yaml   # deferred: the triage path (stalls' observer imports this module) never loads yaml

        text = files("llmtriage.rules").joinpath("job_texts.yaml").read_text(encoding="utf-8")
        _TEXTS.update(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    return _TEXTS


def say(section: str, key: str, lang: Optional[str], values: dict[str, Any]) -> str:
    """The `key` text of `section` in `lang` (en unless zh), placeholders filled; words joined by spaces."""
    tpl = job_texts()[section]["zh" if lang == "zh" else "en"][key]
    tpl = " ".join(tpl.split())
    return render_template(tpl, {k: ("" if v is None else str(v)) for k, v in values.items()})
