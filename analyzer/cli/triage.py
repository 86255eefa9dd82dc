"""`llmtriage triage FILES` (also plain `llmtriage FILES`): the default command.

Every input is triaged (in `--jobs` processes when there are several); an input that cannot be read
becomes a report with an `error` entry, the others go on, and the exit status is then 2.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any, Optional

import click

from llmtriage import get_engine, scan_source
from llmtriage.cli.common import FORMATS, SEVERITIES, detect_lang, emit_reports, settings as load_settings
from llmtriage.cli.config import ENGINES
from llmtriage.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, EmptyInputError, InputError, LlmtriageError
from llmtriage.findings import Report


def _file_size(path: str) -> int:
    """Bytes of a regular file (0 for `-`, a pipe or anything unreadable: the scan decides then)."""
    try:
        return os.stat(path).st_size if path != "-" else 0
    except (OSError, ValueError):
        return 0


@click.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="human", show_default=True,
              help="Output format: human (wrapped to the terminal width or $COLUMNS), json, sarif, github.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable).")
@click.option("--min-severity", type=click.Choice(SEVERITIES), default=None, help="Hide findings below this.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of explanations.")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show at most N findings per log (human format).")
@click.option("--no-color", is_flag=True, help="Disable colour (also NO_COLOR=1).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when an error is found.")
@click.option("--disable", multiple=True, help="Rule id to turn off (repeatable).")
@click.option("--select", "--only", "select", multiple=True, metavar="RULE_OR_CATEGORY",
              help="Report only findings of these rule ids or categories (repeatable).")
@click.option("-q", "--quiet", is_flag=True,
              help="One line per input (source, root cause category/rule, action, line) and nothing else.")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to FILE instead of standard output.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None,
              help="Configuration file (.llmtriage.yaml or pyproject.toml); also LLMTRIAGE_CONFIG.")
@click.option("--no-baseline", is_flag=True, help="Show findings that the baseline file acknowledges.")
@click.option("--allow-empty", is_flag=True,
              help="Treat an empty log as healthy instead of an input error (the pre-commit hook uses it).")
@click.option("-v", "--verbose", is_flag=True, help="Show fix snippets and tracebacks of internal errors.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=1, show_default=True,
              help="Scan several FILES in N processes (0 = one per CPU); the output order is unchanged.")
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Block scanner: re2 (default), hyperscan (pip install 'llmtriage[hyperscan]'), or "
                   "python (no compiled dependency). Same findings with each. Also LLMTRIAGE_ENGINE.")
def triage(files: tuple[str, ...], fmt: str, rules_dirs: tuple[str, ...], min_severity: Optional[str],
           lang: Optional[str], top: Optional[int], no_color: bool, exit_zero: bool, disable: tuple[str, ...],
           allow_empty: bool, verbose: bool, jobs: int = 1, engine: Optional[str] = None,
           select: tuple[str, ...] = (), quiet: bool = False, output_file: Optional[str] = None,
           config_file: Optional[str] = None, no_baseline: bool = False) -> None:
    """Triage crashed-job logs (FILES, or standard input with `-` or a pipe).

    An unreadable, missing or empty input is reported for that file (an error entry in every format)
    and the others are still triaged; the exit status is then 2."""
    settings = load_settings(config_file)
    rules_dirs = tuple(settings.get("rules", ())) + rules_dirs
    disable = tuple(settings.get("disable", ())) + disable
    min_severity = min_severity or settings.get("min_severity")
    lang = detect_lang(lang or settings.get("lang"))
    if not files:
        if sys.stdin.isatty():
            raise click.UsageError("no log given: pass FILES, `-`, or pipe a log into llmtriage")
        files = ("-",)
    mode = engine_mode(engine or os.environ.get("LLMTRIAGE_ENGINE") or settings.get("engine"))
    engine = get_engine(list(rules_dirs), lang=lang, disabled=disable, mode=mode)
    engine.expect_bytes(max((_file_size(f) for f in files), default=0))
    n_jobs = min(jobs or os.cpu_count() or 1, len(files))
    if n_jobs > 1 and "-" not in files:
        reports = _scan_parallel(files, n_jobs, (tuple(rules_dirs), lang, disable, mode), allow_empty)
    else:
        reports = []
        for f in files:
            source: Any = sys.stdin.buffer if f == "-" else Path(f)
            try:
                reports.append(scan_source(engine, source, name=f if f == "-" else None))
            except LlmtriageError as exc:
                reports.append(input_error_report(f, exc, allow_empty))
    baseline = None if no_baseline else settings.get("baseline_filter")
    if baseline is not None:
        reports = [r if r.extra.get("error") else baseline(r) for r in reports]
    if min_severity:
        floor = SEVERITIES.index(min_severity)
        for r in reports:
            r.findings = [x for x in r.findings if SEVERITIES.index(x.severity) >= floor]
    if select:
        wanted = set(select)
        for r in reports:
            r.findings = [x for x in r.findings if x.rule_id in wanted or x.category in wanted]
    if output_file:
        with open(output_file, "w", encoding="utf-8", newline="") as out:
            emit_reports(reports, "quiet" if quiet else fmt, out, lang=lang, no_color=True, verbose=verbose, top=top)
    else:
        out = click.get_text_stream("stdout")
        emit_reports(reports, "quiet" if quiet else fmt, out, lang=lang, no_color=no_color, verbose=verbose, top=top)
        out.flush()
    bad = [r for r in reports if r.extra.get("error")]
    for r in bad:      # also one line each on stderr, after the report of the good inputs
        click.echo(f"error: {r.extra['error']}", err=True)
    if bad:
        sys.exit(EXIT_USAGE)
    failed = any(x.severity == "error" for r in reports for x in r.findings)
    sys.exit(EXIT_OK if exit_zero or not failed else EXIT_FINDINGS)


def input_error_report(source: str, exc: LlmtriageError, allow_empty: bool) -> Any:
    """The report of an input that could not be triaged: an `error` entry instead of findings (an empty
    log is healthy under --allow-empty). Errors other than input errors (rules, configuration) abort."""
    if isinstance(exc, EmptyInputError) and allow_empty:
        return Report(source=source)
    if not isinstance(exc, InputError):
        raise exc
    return Report(source=source, extra={"error": str(exc)})


# --jobs: worker processes get the engine by fork (Linux: already compiled in the parent, so free) or
# build it once in their initializer; reports come back in input order; the first input error (in
# input order) is raised in the parent exactly as the sequential loop would.
_WORKER: dict[str, Any] = {}


def _worker_init(rules_dirs: tuple[str, ...], lang: Optional[str], disable: tuple[str, ...], mode: str = "auto"
                 ) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is handled once, by the parent
    _WORKER["engine"] = get_engine(list(rules_dirs), lang=lang, disabled=disable, mode=mode)


def engine_mode(choice: Optional[str]) -> str:
    """The engine asked for (--engine, else LLMTRIAGE_ENGINE, else the config file's `engine`), checked:
    an unknown name or a missing optional scanner is a usage error."""
    mode = choice or "auto"
    if mode not in ENGINES:
        raise click.UsageError(f"unknown engine {mode!r} ({', '.join(ENGINES)})")
    if mode == "hyperscan":
        try:
            import hyperscan  # noqa: F401
        except ImportError:
            raise click.UsageError("the hyperscan engine needs the extra: pip install 'llmtriage[hyperscan]'") from None
    if mode == "re2":
        try:
            import re2  # noqa: F401
        except ImportError:
            raise click.UsageError("the re2 engine needs google-re2: pip install google-re2") from None
    return mode


def _scan_one(path: str) -> tuple[str, Any]:
    try:
        return "ok", scan_source(_WORKER["engine"], Path(path))
    except LlmtriageError as exc:
        return "err", (type(exc).__name__, str(exc), exc.exit_code)


def _scan_parallel(files: tuple[str, ...], jobs: int, key: tuple[Any, ...], allow_empty: bool = False) -> list[Any]:
    import multiprocessing as mp   # deferred: 15 ms of start-up, only for several inputs in parallel

    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    chunk = max(1, len(files) // (jobs * 8))
    reports = []
    with ctx.Pool(jobs, initializer=_worker_init, initargs=key) as pool:
        for path, (kind, val) in zip(files, pool.imap(_scan_one, files, chunksize=chunk)):
            if kind == "err":
                name, msg, code = val
                exc = {"InputError": InputError, "EmptyInputError": EmptyInputError}.get(name, LlmtriageError)(msg)
                exc.exit_code = code
                reports.append(input_error_report(path, exc, allow_empty))
                continue
            reports.append(val)
    return reports


__all__ = ["triage", "engine_mode", "input_error_report"]
