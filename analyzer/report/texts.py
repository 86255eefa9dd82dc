"""The words of the report renderers, from rules/report.yaml (layer 4).

Parsed with the rule cache (`ruleset.datafiles`), so rendering never imports yaml.
"""
from __future__ import annotations

from typing import Optional

from llmtriage.ruleset.datafiles import data_file

REPORT_FILE = "report.yaml"


def _pick(section: str, lang: Optional[str]) -> dict[str, str]:
    return data_file(REPORT_FILE)[section]["zh" if lang == "zh" else "en"]


def report_labels(lang: Optional[str]) -> dict[str, str]:
    """Labels of the human and quiet formats in `lang` (English unless "zh")."""
    return _pick("labels", lang)


def ci_labels(lang: Optional[str]) -> dict[str, str]:
    """Words of the GitHub and SARIF formats in `lang` (English unless "zh")."""
    return _pick("ci", lang)
