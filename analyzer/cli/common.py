"""Helpers every subcommand shares: language and colour choice, project settings, the output
formats of a report (human, json, sarif, github) and the terminal width of human output."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Optional

import click

from llmtriage.cli.config import SEVERITIES, load_settings
from llmtriage.findings import Report
from llmtriage.engine.redact import SafeWriter, safe_data
from llmtriage.report.render import get_renderer
from llmtriage.report.style import terminal_width

FORMATS = ("human", "json", "sarif", "github")
CI_FORMATS = ("sarif", "github")


def detect_lang(explicit: Optional[str]) -> Optional[str]:
    if explicit:
        return None if explicit == "en" else explicit
    for var in ("LLMTRIAGE_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        val = os.environ.get(var)
        if val:
            return "zh" if val.lower().startswith("zh") else None
    return None


def use_color(no_color: bool, stream: Any = None) -> bool:
    if no_color or os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def settings(config_file: Optional[str] = None) -> dict[str, Any]:
    """Project configuration (--config FILE, else [tool.llmtriage] / .llmtriage.yaml found upward)."""
    return load_settings(os.getcwd(), config_file)


def format_option(choices: tuple[str, ...] = FORMATS, help: str = "Output format.") -> Callable[[Any], Any]:
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default="human", show_default=True,
                        help=help)


def emit_reports(reports: list[Report], fmt: str, out: Any, *, lang: Optional[str], no_color: bool = False,
                 **opts: Any) -> None:
    """Reports through the renderer of `fmt` (the one used by `triage`); human output wraps to the
    terminal width."""
    if fmt == "human":
        opts.setdefault("width", terminal_width(out))
    get_renderer(fmt)(reports, out, color=use_color(no_color, out) if fmt == "human" else False, lang=lang, **opts)


def emit_result(res: Any, fmt: str, render_human: Callable[..., None], *, no_color: bool, lang: Optional[str],
                json_doc: Optional[dict[str, Any]] = None, ci_reports: Optional[list[Report]] = None) -> None:
    """A job / diff / env result: json (its own document, redacted), sarif and github (its reports, through
    the triage renderers), or its human renderer (masked, terminal-safe, wrapped)."""
    out = click.get_text_stream("stdout")
    if fmt == "json":
        json.dump(safe_data(json_doc if json_doc is not None else res.to_dict()), out, ensure_ascii=False, indent=2)
        out.write("\n")
    elif fmt in CI_FORMATS:
        emit_reports(list(res.reports if ci_reports is None else ci_reports), fmt, out, lang=lang)
    else:
        render_human(res, SafeWriter(out), color=use_color(no_color, out), lang=lang, width=terminal_width(out))
    out.flush()


__all__ = ["FORMATS", "CI_FORMATS", "SEVERITIES", "detect_lang", "use_color", "settings", "format_option",
           "emit_reports", "emit_result"]
