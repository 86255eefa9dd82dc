"""User-facing text of `llmtriage job` and `llmtriage diff` (rules/job_texts.yaml, en and zh): the
Flight Recorder and stall verdicts, the cascade sentence and the labels of the human output."""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.ruleset.files import builtin_rules_dir
from llmtriage.templates import render_template

_TEXTS: dict[str, Any] = {}


def job_texts() -> dict[str, Any]:
    if not _TEXTS:
        import yaml   # deferred: `kb search` words its empty result from here and never loads yaml otherwise

        text = (builtin_rules_dir() / "job_texts.yaml").read_text(encoding="utf-8")
        _TEXTS.update(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    return _TEXTS


def word(section: str, key: str, lang: Optional[str]) -> str:
    """The `key` text of `section` in `lang` (en unless zh), verbatim (separators keep their spaces)."""
    return str(job_texts()[section]["zh" if lang == "zh" else "en"][key])


def say(section: str, key: str, lang: Optional[str], values: Optional[dict[str, Any]] = None) -> str:
    """The `key` text of `section` in `lang` (en unless zh), placeholders filled; words joined by spaces."""
    tpl = " ".join(word(section, key, lang).split())
    return render_template(tpl, {k: ("" if v is None else str(v)) for k, v in (values or {}).items()})


__all__ = ["job_texts", "say", "word"]
