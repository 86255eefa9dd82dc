"""Findings for metric anomalies (`metric_detect`, `throughput`), worded by rules/detectors.yaml
(English and Chinese, like rule prose). The YAML is read only when an anomaly is reported, so a
healthy log never imports yaml.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.templates import render_template
from llmtriage.detect.corroborate import corroborating_categories
from llmtriage.detect.metric_detect import PRIORITY, RULE_IDS, Anomaly
from llmtriage.ruleset.loader import builtin_rules_dir

_DETECTOR_TEXT: dict[str, Any] = {}
_ZH_UNITS = {"steps": "步", "records": "条记录", "requests": "个请求"}


def detector_texts() -> dict[str, Any]:
    """User-facing text of every anomaly kind, from rules/detectors.yaml."""
    if not _DETECTOR_TEXT:
        import yaml     # deferred: only when an anomaly is reported (a healthy log never needs it)

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        text = (builtin_rules_dir() / "detectors.yaml").read_text(encoding="utf-8")
        _DETECTOR_TEXT.update(yaml.load(text, Loader=loader))
    return _DETECTOR_TEXT


def _render(template: str, values: dict[str, Any]) -> str:
    return render_template(template, {k: ("" if v is None else str(v)) for k, v in values.items()})


def detector_text(entry: dict[str, Any], lang: Optional[str]) -> dict[str, Any]:
    """The language block (title, message, what, why, fixes) of one rules/detectors.yaml entry."""
    return entry["zh" if lang == "zh" else "en"]


def detector_finding(entry: dict[str, Any], text: dict[str, Any], values: dict[str, Any], *, line: int,
                     default_priority: int, last_line: Optional[int] = None, evidence: str = "", count: int = 1,
                     captures: Optional[dict[str, str]] = None) -> Finding:
    """The root-cause finding a judgement detector reports, worded by its rules/detectors.yaml entry: `text` is
    the entry's language block (a variant may be merged over it), `values` fill the message; the captures are
    the values that are set unless given. The entry's `priority` wins over the detector's default."""
    message = _render(text["message"], values).strip()
    if captures is None:
        captures = {k: str(v) for k, v in values.items() if v is not None and v != ""}
    return Finding(
        rule_id=entry["rule_id"], category=entry["category"], severity="error", title=text["title"],
        message=message, line=line, last_line=last_line, evidence=evidence or message, count=count,
        captures=captures, cause=text["why"], explanation=text["what"], role="cause", confidence="medium",
        priority=int(entry.get("priority", default_priority)),
        fixes=[{"title": f["title"], "detail": f["detail"]} for f in text["fixes"]])


def to_findings(anomalies: list[Anomaly], existing: list[Any], lang: Optional[str]) -> list[Any]:
    """Findings for the anomalies, skipping those a YAML rule of the same category already reports
    as an error (the rule's text is more specific; the numbers stay in report.extra['metrics']), and
    warnings beside a warning of the same category, unless the verdict weighs the two together
    (detect.corroborate)."""
    zh = lang == "zh"
    have_err = {f.category for f in existing if f.severity == "error"}
    have_any = {f.category for f in existing}
    out = []
    for a in anomalies:
        if a.category in have_err:
            continue
        if a.severity != "error" and a.category in have_any and a.category not in corroborating_categories():
            continue
        entry = detector_texts()[a.kind]
        text = entry["zh" if zh else "en"]
        title, msg, what, why = text["title"], text["message"], text["what"], text["why"]
        values = dict(a.numbers, line=a.line, last_line=a.last_line, count=a.count)
        if zh and "unit" in a.numbers:
            values["unit"] = _ZH_UNITS.get(a.numbers["unit"], a.numbers["unit"])
        message = _render(msg, values).strip().rstrip(";；").strip()
        # conditional fixes: a fix with `when_key` is shown only when that number is set (its condition held)
        keys = [f.get("when_key") for f in entry["en"]["fixes"]]     # conditions are stated once, in English
        fixes = [{"title": f["title"], "detail": f["detail"]} | ({"when": f["when"]} if f.get("when") else {})
                 for k, f in zip(keys, text["fixes"]) if not k or a.numbers.get(k)]
        category = a.category if a.category != "loss-spike" else "loss-suspicious"
        out.append(Finding(
            rule_id=RULE_IDS[a.kind], category=category, severity=a.severity, title=title, message=message,
            line=a.line, last_line=a.last_line, evidence=message, count=a.count,
            captures={k: str(v) for k, v in a.numbers.items() if v is not None},
            cause=why, explanation=what, role="cause" if a.kind != "spike" else "symptom",
            confidence="medium" if a.kind in ("fall", "spike", "overfit", "throughput") else "high",
            priority=a.priority if a.priority is not None else PRIORITY[a.kind], fixes=fixes,
        ))
    return out
