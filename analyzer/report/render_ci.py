"""CI renderers: SARIF 2.1.0 (code-scanning upload) and GitHub Actions workflow commands (layer 4).

Both redact secrets in evidence and messages (engine/redact.py); their words are the `ci` section
of rules/report.yaml (report/texts.py).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, TextIO
from urllib.parse import quote

from llmtriage.version import __version__
from llmtriage.findings import Finding, Report
from llmtriage.engine.redact import redact
from llmtriage.report.baseline import fingerprint
from llmtriage.report.texts import ci_labels

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://pypi.org/project/llmtriage/"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_CAP = 10          # GitHub shows at most 10 annotations of each kind per step
# The words of the CI formats stay English whatever --lang says (as before the words moved to
# rules/report.yaml, which also has them in Chinese): pass the report language here to change that.
CI_LANG = "en"


def _uri(source: str) -> Optional[str]:
    if source in ("-", ""):
        return None
    p = Path(source)
    if p.is_absolute():
        try:
            p = p.relative_to(Path.cwd())
        except ValueError:
            return p.as_uri()
    return quote(p.as_posix(), safe="/._-~")


def _fixes_text(f: Finding) -> str:
    return "\n".join(f"{i}. {x['title']}: {x['detail']}" for i, x in enumerate(f.fixes, 1))


def render_sarif(reports: list[Report], out: TextIO, **_: Any) -> None:
    C = ci_labels(CI_LANG)
    rules: dict[str, int] = {}
    rule_objs: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    for rep in reports:
        uri = _uri(rep.source)
        for f in rep.findings:
            if f.rule_id not in rules:
                rules[f.rule_id] = len(rule_objs)
                rule: dict[str, Any] = {
                    "id": f.rule_id,
                    "name": "".join(w.capitalize() for w in f.rule_id.split("-")),
                    "shortDescription": {"text": f.title},
                    "defaultConfiguration": {"level": _LEVEL.get(f.severity, "note")},
                    "properties": {"category": f.category, "tags": [f.category, f.role]},
                }
                full = " ".join(x for x in (f.explanation, f.cause) if x)
                if full:
                    rule["fullDescription"] = {"text": full}
                if f.fixes:
                    rule["help"] = {"text": _fixes_text(f),
                                    "markdown": "\n".join(f"{i}. **{x['title']}** — {x['detail']}"
                                                          for i, x in enumerate(f.fixes, 1))}
                if f.references:
                    rule["helpUri"] = f.references[0]
                rule_objs.append(rule)
            msg = redact(f.message)
            if f.count > 1:
                msg += C["occurrences"].format(count=f.count, first=f.line, last=f.last_line or f.line)
            res: dict[str, Any] = {
                "ruleId": f.rule_id,
                "ruleIndex": rules[f.rule_id],
                "level": _LEVEL.get(f.severity, "note"),
                "message": {"text": msg or f.title},
                "partialFingerprints": {"llmtriage/v1": fingerprint(f)},
                "properties": {"category": f.category, "count": f.count, "role": f.role,
                               "confidence": f.confidence, "action": f.action, "action_reason": f.action_reason},
            }
            if f.ranks:
                res["properties"]["ranks"] = list(f.ranks)
            region: dict[str, Any] = {"startLine": max(1, f.line)}
            if f.last_line and f.last_line > f.line and f.count == 1:
                region["endLine"] = f.last_line
            if f.evidence:
                region["snippet"] = {"text": redact(f.evidence)}
            phys: dict[str, Any] = {"region": region}
            if uri is not None:
                phys["artifactLocation"] = {"uri": uri}
            else:
                phys["artifactLocation"] = {"description": {"text": C["stdin"]}}
            res["locations"] = [{"physicalLocation": phys}]
            results.append(res)
    run: dict[str, Any] = {
        "tool": {"driver": {"name": "llmtriage", "version": __version__, "semanticVersion": __version__,
                            "informationUri": INFO_URI, "rules": rule_objs}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    failed = [rep for rep in reports if rep.extra.get("error")]
    if failed:    # inputs that could not be read: the run is reported, with one notification each
        run["invocations"] = [{
            "executionSuccessful": False,
            "toolExecutionNotifications": [
                {"level": "error", "message": {"text": redact(rep.extra["error"])},
                 "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(rep.source)}}}]
                 if _uri(rep.source) else []}
                for rep in failed],
        }]
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    json.dump(doc, out, ensure_ascii=False, indent=2)
    out.write("\n")


def _esc_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _esc_prop(s: str) -> str:
    return _esc_data(s).replace(":", "%3A").replace(",", "%2C")


_CMD = {"error": "error", "warning": "warning", "info": "notice"}


def _annotation(kind: str, source: str, f: Optional[Finding], title: str, text: str) -> str:
    props = []
    if source and source != "-":
        props.append(f"file={_esc_prop(source)}")
        if f is not None:
            props.append(f"line={max(1, f.line)}")
            if f.last_line and f.last_line != f.line:
                props.append(f"endLine={f.last_line}")
    props.append(f"title={_esc_prop(title)}")
    return f"::{kind} {','.join(props)}::{_esc_data(text)}\n"


def render_github(reports: list[Report], out: TextIO, *, cap: int = GITHUB_CAP, **_: Any) -> None:
    """One annotation per merged finding (repeats are already merged into one with a count), at most
    `cap` of each kind: when more would be needed, the last one of that kind summarises the rest."""
    C = ci_labels(CI_LANG)
    items: dict[str, list[tuple[str, Finding]]] = {"error": [], "warning": [], "notice": []}
    for rep in reports:
        for f in rep.findings:
            items[_CMD.get(f.severity, "notice")].append((rep.source, f))
    for kind, lst in items.items():
        # most likely root causes first across files: each report's top finding, then the rest
        lst.sort(key=lambda sf: (0 if sf[1] is _top(reports, sf[0]) else 1,) + sf[1].sort_key())
        shown = lst if len(lst) <= cap else lst[:cap - 1]
        for source, f in shown:
            text = redact(f.message)
            if f.count > 1:
                text += C["repeats"].format(count=f.count, first=f.line, last=f.last_line or f.line)
                if f.ranks:
                    text += C["repeat_ranks"].format(ranks=",".join(map(str, f.ranks[:16])))
            if f.evidence:
                text += "\n" + redact(f.evidence[:500])
            if f.fixes:
                text += "\n" + C["fix"].format(title=f.fixes[0]["title"])
                if len(f.fixes) > 1:
                    text += C["more_fixes"].format(n=len(f.fixes) - 1, rule_id=f.rule_id)
            out.write(_annotation(kind, source, f, f"{f.title} [{f.rule_id}]", text))
        rest = lst[len(shown):]
        if rest:
            files = sorted({s for s, _ in rest})
            text = "; ".join(f"{s}:{f.line} {f.rule_id}" + (f" ({f.count}x)" if f.count > 1 else "")
                             for s, f in rest[:40])
            out.write(_annotation(kind, files[0] if len(files) == 1 else "", None,
                                  C["more_findings"].format(n=len(rest), kind=kind), text))
    for rep in reports:
        if rep.extra.get("error"):
            out.write(_annotation("error", rep.source, None, C["input_error"], redact(rep.extra["error"])))
            continue
        n = len(rep.findings)
        base = rep.extra.get("baselined")
        out.write(C["findings_one" if n == 1 else "findings_many"].format(source=rep.source, n=n)
                  + (C["baselined"].format(n=base) if base else "") + "\n")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(_markdown(reports, C))
        except OSError:
            pass


def _top(reports: list[Report], source: str) -> Optional[Finding]:
    for r in reports:
        if r.source == source:
            return r.top
    return None


def _markdown(reports: list[Report], C: dict[str, str]) -> str:
    lines = ["### llmtriage", "", C["summary_head"], "|---|---|---|---|---|"]
    for rep in reports:
        if not rep.findings:
            lines.append(C["summary_ok"].format(source=rep.source))
        for f in rep.findings:
            lines.append(f"| `{rep.source}` | {f.severity} | {f.title.replace('|', '/')} (`{f.rule_id}`) | "
                         f"{f.line} | {f.count} |")
    return "\n".join(lines) + "\n\n"
