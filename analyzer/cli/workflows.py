"""Workflow subcommands: `run`, `watch`, `env`, `baseline` (imported only when one is invoked)."""
from __future__ import annotations

import io
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Optional

import click

from llmtriage import get_engine, scan_source
from llmtriage.cli.common import FORMATS, SEVERITIES, detect_lang, emit_result, settings as load_settings, use_color
from llmtriage.errors import EXIT_FINDINGS, EXIT_OK, InputError
from llmtriage.findings import reports_to_dict
from llmtriage.job.texts import say
from llmtriage.report.baseline import make_baseline
from llmtriage.engine.redact import SafeWriter, redact, safe_data
from llmtriage.report.render import get_renderer
from llmtriage.report.style import SEV, Style, cut, terminal_width, wrap
from llmtriage.workflows.envdoctor import env_report, render_env_human
from llmtriage.workflows.watch import follow
from llmtriage.workflows.wrapper import STREAMS, run_command, status_line

_FORMATS = click.Choice(["human", "json"])


def _common(rules_dirs: tuple[str, ...], disable: tuple[str, ...], lang: Optional[str]) -> tuple[Any, Optional[str], dict]:
    settings = load_settings()
    lang = detect_lang(lang or settings.get("lang"))
    engine = get_engine(list(tuple(settings.get("rules", ())) + rules_dirs), lang=lang,
                        disabled=tuple(settings.get("disable", ())) + disable)
    return engine, lang, settings


def _rules_opt(f: Any) -> Any:
    f = click.option("--disable", multiple=True, help="Rule id to turn off (repeatable).")(f)
    f = click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of explanations.")(f)
    return click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
                        help="Extra rule folder (repeatable).")(f)


# ------------------------------------------------------------------------------ run

@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="Keep the copy of the output here (default: a temporary file kept only on failure).")
@click.option("--format", "fmt", type=_FORMATS, default="human", show_default=True,
              help="Format of the diagnosis (printed to stderr).")
@click.option("--no-color", is_flag=True, help="Disable colour.")
@click.option("--streams", type=click.Choice(list(STREAMS)), default="auto", show_default=True,
              help="merged: the child's stdout and stderr through one channel (a pseudo-terminal on a terminal), "
                   "in the exact order written, all to stdout; separate: stdout to stdout and stderr to stderr, "
                   "the copy interleaved as received; auto: merged when our stdout and stderr are the same "
                   "file, pipe or terminal, else separate.")
@_rules_opt
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(log_path: Optional[str], fmt: str, no_color: bool, streams: str, rules_dirs: tuple[str, ...],
        disable: tuple[str, ...], lang: Optional[str], command: tuple[str, ...]) -> None:
    """Run COMMAND, pass its output through, diagnose it if it fails.

    \b
    llmtriage run -- torchrun --nproc-per-node 8 train.py --config c.yaml
    llmtriage run --log train.log -- python train.py

    The output keeps the order the command wrote it (see --streams). Exits with the command's exit
    code (128+N when killed by signal N).
    """
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise click.UsageError("no command given: llmtriage run [OPTIONS] -- CMD ARGS...")
    engine, lang, _ = _common(rules_dirs, disable, lang)

    def diagnose(stream: Any, log_name: str, returncode: int) -> None:
        try:
            report = scan_source(engine, stream, name=log_name)
        except InputError as exc:
            os.write(2, f"llmtriage run: cannot triage the output: {exc}\n".encode())
            return
        buf = io.StringIO()
        if fmt == "human":
            buf.write("\n" + "─" * 72 + "\n" + status_line(returncode).replace("llmtriage run: the command", f"llmtriage run: `{shlex.join(argv)[:200]}`")
                      + f"; output kept in {log_name}\n")
        opts = {"width": terminal_width(sys.stderr)} if fmt == "human" else {}
        get_renderer(fmt)([report], buf, color=use_color(no_color, sys.stderr), lang=lang, **opts)
        data = buf.getvalue().encode("utf-8", "replace")
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(2, view):]
            except InterruptedError:
                continue
            except OSError:
                break

    code, _kept = run_command(argv, log_path=log_path, diagnose=diagnose, streams=streams)
    sys.exit(code)


# ------------------------------------------------------------------------------ watch

@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--until-exit", "until_pid", type=int, default=None, help="Stop when process PID has exited.")
@click.option("--interval", type=float, default=0.5, show_default=True, help="Seconds between polls.")
@click.option("--from-end", is_flag=True, help="Skip what the file already holds; report only new output.")
@click.option("--format", "fmt", type=_FORMATS, default="human", show_default=True,
              help="human, or json: one JSON object per line (JSON Lines).")
@click.option("--min-severity", type=click.Choice(["info", "warning", "error"]), default=None,
              help="Report only findings at or above this severity.")
@click.option("--no-color", is_flag=True, help="Disable colour.")
@click.option("--max-seconds", type=float, default=None, hidden=True)
@_rules_opt
def watch(file: str, until_pid: Optional[int], interval: float, from_end: bool, fmt: str, min_severity: Optional[str],
          no_color: bool, max_seconds: Optional[float], rules_dirs: tuple[str, ...], disable: tuple[str, ...],
          lang: Optional[str]) -> None:
    """Follow a growing log and report each new finding as it appears.

    Survives rotation and truncation. Runs until interrupted (Ctrl-C) or, with --until-exit PID,
    until that process has exited. Exit code 1 when an error finding was reported.
    """
    engine, lang, settings = _common(rules_dirs, disable, lang)
    min_severity = min_severity or settings.get("min_severity")
    floor = SEVERITIES.index(min_severity) if min_severity else 0
    raw_out = click.get_text_stream("stdout")
    st = Style(use_color(no_color, raw_out))
    width = terminal_width(raw_out)
    out: Any = raw_out if fmt == "json" else SafeWriter(raw_out)    # masked, terminal-safe, any file name
    err = SafeWriter(click.get_text_stream("stderr"))
    failed = False
    try:
        for ev in follow(file, engine, until_pid=until_pid, interval=interval, from_end=from_end,
                         max_seconds=max_seconds):
            now = time.strftime("%H:%M:%S")
            f = ev.finding
            if f is not None and SEVERITIES.index(f.severity) < floor:
                continue
            if f is not None and f.severity == "error":
                failed = True
            if f is None and (fmt != "json" or ev.kind == "watching"):   # status lines go to stderr
                msg = say("watch", ev.kind, lang, {"file": file, "size": ev.detail}) \
                    if ev.kind in ("waiting", "rotated", "truncated", "watching") else f"{file}: {ev.kind}"
                err.write(st(f"[{now}] {msg}", "dim") + "\n")
                err.flush()
                continue
            if fmt == "json":
                obj: dict[str, Any] = {"event": ev.kind, "time": time.time(), "source": file}
                if f is not None:
                    obj["finding"] = f.to_dict()
                out.write(json.dumps(safe_data(obj), ensure_ascii=False) + "\n")
            else:
                icon, colr = SEV.get(f.severity, ("•", "blue"))
                out.write(f"[{now}] {st(icon + ' ' + f.severity, colr, 'bold')}  {st(f.title, 'bold')}  "
                          f"{st('[' + f.category + ' / ' + f.rule_id + ']', 'dim')}\n")
                out.write(f"    {wrap(redact(f.message), width)}\n")
                where = f"{file}:{f.line}"
                room = 300 if not width else max(width - 6 - len(where), 20)
                out.write(f"    {st(where, 'cyan')}: {st(cut(redact(f.evidence), room), 'dim')}\n")
                if f.fixes:
                    more = len(f.fixes) - 1
                    out.write("    " + say("watch", "fix", lang, {"title": f.fixes[0]["title"], "more": more or None,
                                                                  "rule": f.rule_id}) + "\n")
            out.flush()
    except KeyboardInterrupt:
        pass
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


# ------------------------------------------------------------------------------ env

@click.command()
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="human", show_default=True,
              help="human (wrapped to the terminal width or $COLUMNS), json (the environment and its findings), "
                   "sarif or github (the findings, as `triage` prints them).")
@click.option("--no-pip-check", is_flag=True, help="Skip `pip check` (a few seconds).")
@click.option("--no-torch", is_flag=True, help="Don't import torch (in a child process) to probe CUDA.")
@click.option("--no-color", is_flag=True, help="Disable colour.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when an error is found.")
@_rules_opt
def env(fmt: str, no_pip_check: bool, no_torch: bool, no_color: bool, exit_zero: bool, rules_dirs: tuple[str, ...],
        disable: tuple[str, ...], lang: Optional[str]) -> None:
    """Check the environment: Python, torch/CUDA, GPUs, driver, library versions, pip check, hub
    variables, /dev/shm and cache disk space. Problems are reported as findings; exit 1 on an error."""
    engine, lang, _ = _common(rules_dirs, disable, lang)
    rep = env_report(engine, pip_check=not no_pip_check, torch_probe=not no_torch)
    doc = reports_to_dict([rep])
    doc["environment"] = doc["reports"][0].pop("environment")
    emit_result(_EnvResult([rep]), fmt, lambda res, out, **kw: render_env_human(res.reports[0], out, **kw),
                no_color=no_color, lang=lang, json_doc=doc)
    failed = any(f.severity == "error" for f in rep.findings)
    sys.exit(EXIT_OK if exit_zero or not failed else EXIT_FINDINGS)


class _EnvResult:
    """The environment report in the shape `emit_result` takes (its reports)."""

    def __init__(self, reports: list[Any]):
        self.reports = reports


# ------------------------------------------------------------------------------ baseline

@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the baseline here instead of standard output (paths become relative to its folder).")
@_rules_opt
def baseline(files: tuple[str, ...], output: Optional[str], rules_dirs: tuple[str, ...], disable: tuple[str, ...],
             lang: Optional[str]) -> None:
    """Record the current findings of FILES as acknowledged.

    \b
    llmtriage baseline logs/*.log > .llmtriage-baseline.json
    then in .llmtriage.yaml:  baseline: .llmtriage-baseline.json
    """
    engine, _, _ = _common(rules_dirs, disable, lang)
    reports = [scan_source(engine, Path(f)) for f in files]
    root = Path(output).resolve().parent if output else Path.cwd()
    text = json.dumps(make_baseline(reports, root), ensure_ascii=False, indent=2) + "\n"
    n = sum(len(r.findings) for r in reports)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)
    click.echo(f"baseline: {n} finding{'s' if n != 1 else ''} in {len(files)} file{'s' if len(files) != 1 else ''}",
               err=True)
