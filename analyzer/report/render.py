"""Renderers of reports: human (terminal), quiet and json; other formats register lazily (layer 4).

No click here: colour is plain ANSI decided by the caller (`color=True/False`, report/style.py);
the words are rules/report.yaml (report/texts.py).
"""
from __future__ import annotations

import json
from importlib import import_module
from typing import Any, Callable, Optional, TextIO

from llmtriage.findings import Finding, Report, reports_to_dict
from llmtriage.engine.redact import redact, safe_reports
from llmtriage.report.style import SEV, Style, cut, text_width, wrap
from llmtriage.detect.actions import next_line, status_word
from llmtriage.report.texts import report_labels
from llmtriage.ruleset.verified import transformers_text

# name -> "module:function" (lazy) or a function(reports, stream, **opts)
RENDERERS: dict[str, Any] = {
    "sarif": "llmtriage.report.render_ci:render_sarif",
    "github": "llmtriage.report.render_ci:render_github",
}


def redact_obj(obj: Any) -> Any:
    """Mask credentials in every string of a JSON-like object."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, list):
        return [redact_obj(x) for x in obj]
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    return obj


# Formats read on a terminal or parsed by the GitHub runner: control characters are neutralised too.
TERMINAL_FORMATS = {"human", "github", "quiet"}


def get_renderer(fmt: str) -> Callable[..., None]:
    """The renderer of `fmt`, behind the one choke point (`redact.safe_reports`): credentials masked
    in every log-derived field before any renderer truncates, control characters neutralised for
    terminal formats."""
    inner = _get_renderer(fmt)
    terminal = fmt in TERMINAL_FORMATS

    def render(reports: list[Report], out: TextIO, **opts: Any) -> None:
        inner(safe_reports(reports, terminal=terminal), out, **opts)

    return render


def _get_renderer(fmt: str) -> Callable[..., None]:
    if fmt == "json":
        return render_json
    if fmt == "human":
        return render_human
    if fmt == "quiet":
        return render_quiet
    target = RENDERERS.get(fmt)
    if target is None:
        raise KeyError(fmt)
    if isinstance(target, str):
        mod, fn = target.split(":")
        target = getattr(import_module(mod), fn)
    return target


def render_json(reports: list[Report], out: TextIO, **_: Any) -> None:
    json.dump(redact_obj(reports_to_dict(reports)), out, ensure_ascii=False, indent=2)
    out.write("\n")


def _where(f: Finding, L: dict[str, str]) -> str:
    s = f"{L['line']} {f.line}"
    if f.count > 1:
        s += f", {f.count}{L['times']}" + (f" ({L['lines']} {f.line}–{f.last_line})" if f.last_line != f.line else "")
    if len(f.ranks) > 1:
        rk = ",".join(str(r) for r in f.ranks[:8]) + ("…" if len(f.ranks) > 8 else "")
        s += f", {L['ranks']} {rk}"
    elif f.rank is not None or f.ranks:
        s += f", {L['rank']} {f.rank if f.rank is not None else f.ranks[0]}"
    return s


def render_human(reports: list[Report], out: TextIO, *, color: bool = False, lang: Optional[str] = None,
                 verbose: bool = False, top: Optional[int] = None, width: Optional[int] = None, **_: Any) -> None:
    """The terminal report; prose wraps to `width` columns (None: one line a paragraph), the evidence
    line is cut to fit, with an ellipsis."""
    st = Style(color)
    L = report_labels(lang)
    for ri, rep in enumerate(reports):
        if ri:
            out.write("\n")
        header = st(rep.source, "bold")
        extra = []
        if rep.extra.get("phase"):
            extra.append(str(rep.extra["phase"]))
        if rep.extra.get("step") is not None:
            extra.append(f"step {rep.extra['step']}")
        status = f"  [{status_word(str(rep.extra['status']), lang)}]" if rep.extra.get("status") else ""
        out.write(header + (st("  (" + ", ".join(extra) + ")", "dim") if extra else "") + st(status, "dim") + "\n")
        if rep.extra.get("error"):
            out.write("  " + st("✖ " + L["input_error"], "red", "bold") + f": {redact(rep.extra['error'])}\n")
            continue
        if rep.extra.get("baselined"):
            out.write("  " + st(f"{rep.extra['baselined']} " + L["baselined"].format(
                file=rep.extra.get("baseline_file") or ".llmtriage-baseline.json"), "dim") + "\n")
        if not rep.findings:
            out.write("  " + st("✔ " + L["none"], "green") + "\n")
            continue
        shown = rep.findings if top is None else rep.findings[:top]
        for i, f in enumerate(shown):
            icon, colr = SEV.get(f.severity, ("•", "blue"))
            head = f"{icon} {f.severity}"
            if i == 0:
                out.write(f"  {st(head, colr, 'bold')}  {st(f.title, 'bold')}  {st('[' + f.category + ' / ' + f.rule_id + ']', 'dim')}\n")
                out.write(f"    {wrap(redact(f.message), width)}\n")
                where = _where(f, L)
                room = 300 if not width else max(width - 6 - text_width(where), 20)
                out.write(f"    {st(where, 'cyan')}: {st(cut(redact(f.evidence), room), 'dim')}\n")
                if f.location is not None:
                    out.write(f"    {L['at']} {f.location.file}:{f.location.line} ({f.location.function})\n")
                if f.action:
                    out.write(f"  {st(wrap(next_line(f.action, redact(f.action_reason), lang), width, 4, 2), 'bold', 'magenta')}\n")
                moved = f.judgement and f.judgement.get("category_was") not in (None, f.category)
                if f.judgement and (f.judgement.get("severity_was") != f.severity or moved):
                    # context changed how fatal it is (survived, finished, hung, explains the death) or what it
                    # is (a category read from the rest of the log): say why
                    was = (f"{f.judgement['category_was']} → {f.category}: " if moved else
                           f"{f.judgement['severity_was']} → {f.severity}: ")
                    out.write(f"  {st(L['judged'], 'bold')}{'：' if lang == 'zh' else ': '}{wrap(was + redact(str(f.judgement['reason'])), width, 4, 4 + text_width(L['judged']))}\n")
                if f.explanation:
                    out.write(f"  {st(L['what'], 'bold')}: {wrap(f.explanation, width, 4, 4 + text_width(L['what']))}\n")
                if f.cause:
                    out.write(f"  {st(L['why'], 'bold')}: {wrap(f.cause, width, 4, 4 + text_width(L['why']))}\n")
                if f.fixes:
                    out.write(f"  {st(L['fixes'], 'bold')}:\n")
                    for n, fx in enumerate(f.fixes, 1):
                        mark = ""
                        if fx.get("verified"):
                            v = fx.get("verification") or {}
                            how = ", ".join(x for x in (v.get("device"), v.get("torch") and f"torch {v['torch']}",
                                                        transformers_text(v, L["and"])) if x)
                            mark = f" {st('✔ ' + L['verified'] + (f' ({how})' if how else ''), 'green')}"
                        out.write(f"    {n}. {st(fx['title'], 'bold')}{mark}\n")
                        out.write(f"       {wrap(fx['detail'], width, 7)}\n")
                        if fx.get("when"):
                            out.write(f"       ({L['when']}: {fx['when']})\n")
                        if fx.get("snippet"):
                            for sl in str(fx["snippet"]).splitlines():
                                out.write(f"         {st(sl, 'cyan')}\n")
                if len(shown) > 1:
                    out.write(f"  {st(L['also'], 'bold')}:\n")
            else:
                out.write(f"    {st(icon, colr)} {f.title} {st('[' + f.rule_id + ']', 'dim')} — {_where(f, L)}\n")
        if top is not None and len(rep.findings) > top:
            out.write(f"    … {len(rep.findings) - top} {L['more']}\n")


def render_quiet(reports: list[Report], out: TextIO, *, lang: Optional[str] = None, **_: Any) -> None:
    """-q: one line per input: source, root cause (category/rule), action, line; or the input error."""
    L = report_labels(lang)
    for rep in reports:
        if rep.extra.get("error"):
            out.write(f"{rep.source}: {L['input_error']}: {redact(rep.extra['error'])}\n")
            continue
        f = rep.top
        if f is None:
            out.write(f"{rep.source}: {L['ok']}\n")
            continue
        action = getattr(f, "action", None) or rep.extra.get("action")
        out.write(f"{rep.source}: {f.severity} {f.category}/{f.rule_id}"
                  + (f" {action}" if action else "") + f" {L['line']} {f.line}\n")
