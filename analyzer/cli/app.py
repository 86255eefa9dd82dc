"""Command line interface (click). The only place that imports click; subcommands of other areas
live in `cli_<area>.py` modules and are imported only when invoked, so `llmtriage crash.log`
starts fast (no pydantic, no yaml with a warm rule cache, never torch)."""
from __future__ import annotations

import os
import sys
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Optional

import click

from llmtriage.version import __version__
from llmtriage.cli.config import ENGINES
from llmtriage.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, LlmtriageError

# command name -> "module:attribute" (imported on first use)
LAZY_COMMANDS: dict[str, str] = {
    "triage": "llmtriage.cli.app:triage",
    "rules": "llmtriage.cli.app:rules",
    "kb": "llmtriage.cli.kb:kb",
    "explain": "llmtriage.cli.kb:explain",
    "verify": "llmtriage.cli.verify:verify",
    "run": "llmtriage.cli.workflows:run",
    "watch": "llmtriage.cli.workflows:watch",
    "env": "llmtriage.cli.workflows:env",
    "baseline": "llmtriage.cli.workflows:baseline",
    "job": "llmtriage.cli.job:job",
    "diff": "llmtriage.cli.job:diff",
    "fleet": "llmtriage.cli.fleet:fleet",
}
SEVERITIES = ("info", "warning", "error")


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, t in LAZY_COMMANDS.items() if find_spec(t.split(":")[0]) is not None)

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        target = LAZY_COMMANDS.get(name)
        if target is None:
            return None
        mod, attr = target.split(":")
        try:
            return getattr(import_module(mod), attr)
        except ModuleNotFoundError as exc:
            if exc.name == mod:
                return None
            raise


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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="llmtriage")
def cli() -> None:
    """Name the root cause of a crashed LLM training/inference job from its log.

    \b
    llmtriage crash.log            triage a log (same as `llmtriage triage crash.log`)
    ... 2>&1 | llmtriage           triage standard input
    llmtriage kb search "显存溢出"   search the knowledge base
    """


def _settings(config_file: Optional[str] = None) -> dict[str, Any]:
    """Project configuration (--config FILE, else [tool.llmtriage] / .llmtriage.yaml found upward)."""
    from llmtriage.cli.config import load_settings

    return load_settings(os.getcwd(), config_file)


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--format", "fmt", type=click.Choice(["human", "json", "sarif", "github"]), default="human",
              show_default=True, help="Output format.")
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
    from llmtriage import get_engine, scan_source
    from llmtriage.report.render import get_renderer

    settings = _settings(config_file)
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
    n_jobs = min(jobs or os.cpu_count() or 1, len(files))
    if n_jobs > 1 and "-" not in files:
        reports = _scan_parallel(files, n_jobs, (tuple(rules_dirs), lang, disable, mode), allow_empty)
    else:
        reports = []
        for f in files:
            source: Any = _stdin_checked() if f == "-" else Path(f)
            try:
                reports.append(scan_source(engine, source, name=f if f == "-" else None))
            except LlmtriageError as exc:
                reports.append(_input_error_report(f, exc, allow_empty))
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
    render = get_renderer("quiet" if quiet else fmt)
    if output_file:
        with open(output_file, "w", encoding="utf-8", newline="") as out:
            render(reports, out, color=False, lang=lang, verbose=verbose, top=top)
    else:
        out = click.get_text_stream("stdout")
        render(reports, out, color=use_color(no_color, out), lang=lang, verbose=verbose, top=top)
        out.flush()
    bad = [r for r in reports if r.extra.get("error")]
    for r in bad:      # also one line each on stderr, after the report of the good inputs
        click.echo(f"error: {r.extra['error']}", err=True)
    if bad:
        sys.exit(EXIT_USAGE)
    failed = any(x.severity == "error" for r in reports for x in r.findings)
    sys.exit(EXIT_OK if exit_zero or not failed else EXIT_FINDINGS)


def _input_error_report(source: str, exc: LlmtriageError, allow_empty: bool) -> Any:
    """The report of an input that could not be triaged: an `error` entry instead of findings (an empty
    log is healthy under --allow-empty). Errors other than input errors (rules, configuration) abort."""
    from llmtriage.errors import EmptyInputError, InputError
    from llmtriage.findings import Report

    if isinstance(exc, EmptyInputError) and allow_empty:
        return Report(source=source)
    if not isinstance(exc, InputError):
        raise exc
    return Report(source=source, extra={"error": str(exc)})


def _stdin_checked() -> Any:
    return sys.stdin.buffer


# --jobs: worker processes get the engine by fork (Linux: already compiled in the parent, so free) or
# build it once in their initializer; reports come back in input order; the first input error (in
# input order) is raised in the parent exactly as the sequential loop would.
_WORKER: dict[str, Any] = {}


def _worker_init(rules_dirs: tuple[str, ...], lang: Optional[str], disable: tuple[str, ...], mode: str = "auto"
                 ) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is handled once, by the parent
    from llmtriage import get_engine

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
    from llmtriage import scan_source

    try:
        return "ok", scan_source(_WORKER["engine"], Path(path))
    except LlmtriageError as exc:
        return "err", (type(exc).__name__, str(exc), exc.exit_code)


def _scan_parallel(files: tuple[str, ...], jobs: int, key: tuple[Any, ...], allow_empty: bool = False) -> list[Any]:
    import multiprocessing as mp

    from llmtriage.errors import EmptyInputError, InputError

    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    chunk = max(1, len(files) // (jobs * 8))
    reports = []
    with ctx.Pool(jobs, initializer=_worker_init, initargs=key) as pool:
        for path, (kind, val) in zip(files, pool.imap(_scan_one, files, chunksize=chunk)):
            if kind == "err":
                name, msg, code = val
                exc = {"InputError": InputError, "EmptyInputError": EmptyInputError}.get(name, LlmtriageError)(msg)
                exc.exit_code = code
                reports.append(_input_error_report(path, exc, allow_empty))
                continue
            reports.append(val)
    return reports


# ------------------------------------------------------------------------------ rules

@cli.group()
def rules() -> None:
    """List, show, validate and test rules."""


@rules.command("list")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False))
@click.option("--category", default=None)
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human")
def rules_list(rules_dirs: tuple[str, ...], category: Optional[str], fmt: str) -> None:
    """List rules: id, category, severity, role, title."""
    from llmtriage import load_rules

    rs = load_rules(rules_dirs)
    rows = [r for r in rs.rules if category in (None, r["category"])]
    if fmt == "json":
        import json

        click.echo(json.dumps([{k: r[k] for k in ("id", "category", "severity", "role", "title")} for r in rows],
                              ensure_ascii=False, indent=2))
        return
    w = max((len(r["id"]) for r in rows), default=10)
    for r in rows:
        click.echo(f"{r['id']:<{w}}  {r['category']:<24} {r['severity']:<7} {r['role']:<7} {r['title']}")
    click.echo(f"{len(rows)} rules", err=True)


@rules.command("show")
@click.argument("rule_id")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False))
def rules_show(rule_id: str, rules_dirs: tuple[str, ...]) -> None:
    """Print a rule's YAML source."""
    from llmtriage import load_rules

    rs = load_rules(rules_dirs)
    rule = rs.by_id.get(rule_id) or next((r for r in rs.rules if rule_id in r["aliases"]), None)
    if rule is None:
        raise LlmtriageError(f"no rule with id '{rule_id}' (see `llmtriage rules list`)")
    with open(rule["file"], encoding="utf-8") as fh:
        click.echo(fh.read().rstrip())


def _paths_to_dirs(paths: tuple[str, ...]) -> tuple[list[str], list[str]]:
    dirs, files = [], []
    for p in paths:
        (dirs if os.path.isdir(p) else files).append(p)
    return dirs, files


@rules.command("validate")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
def rules_validate(paths: tuple[str, ...]) -> None:
    """Validate rule files (the built-in rules, plus PATHs: folders or single files)."""
    from llmtriage.ruleset.validate import (RuleLoadError, builtin_rules_dir, load_taxonomy, validate_dirs, validate_rule_file)
    from pathlib import Path

    dirs, files = _paths_to_dirs(paths)
    builtin = builtin_rules_dir()
    problems: list[str] = []
    n = 0
    try:
        rs = validate_dirs([builtin] + [Path(d) for d in dirs if Path(d).resolve() != builtin.resolve()])
        n = len(rs.rules)
    except RuleLoadError as exc:
        problems += exc.problems
    tax = load_taxonomy(builtin / "taxonomy.yaml")
    for f in files:
        p = Path(f)
        _, probs = validate_rule_file(p, p.parent.parent, tax)
        problems += probs
        n += 1
    if problems:
        raise RuleLoadError(problems)
    click.echo(f"{n} rules valid")


@rules.command("test")
@click.argument("paths", nargs=-1, type=click.Path(exists=True))
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False))
def rules_test(paths: tuple[str, ...], rules_dirs: tuple[str, ...]) -> None:
    """Run every rule's examples through the full engine (all rules loaded)."""
    from llmtriage import load_rules
    from llmtriage.workflows.testing import check_rules

    dirs, files = _paths_to_dirs(paths)
    rs = load_rules(tuple(rules_dirs) + tuple(d for d in dirs if not _is_builtin_subdir(d)), use_cache=False)
    selected = _select(rs, paths)
    failures, total = check_rules(rs, selected)
    for f in failures:
        click.echo(f"✖ {f}")
    click.echo(f"{total - len(failures)} passed, {len(failures)} failed")
    sys.exit(EXIT_FINDINGS if failures else EXIT_OK)


def _is_builtin_subdir(d: str) -> bool:
    from llmtriage.ruleset.files import builtin_rules_dir

    try:
        os.path.relpath(os.path.realpath(d), os.path.realpath(builtin_rules_dir()))
        return os.path.realpath(d).startswith(os.path.realpath(builtin_rules_dir()))
    except ValueError:
        return False


def _select(rs: Any, paths: tuple[str, ...]) -> list[dict[str, Any]]:
    if not paths:
        return list(rs.rules)
    real = [os.path.realpath(p) for p in paths]
    return [r for r in rs.rules if any(os.path.realpath(r["file"]) == p or
                                       os.path.realpath(r["file"]).startswith(p.rstrip("/") + "/") for p in real)]


@rules.command("schema")
@click.option("--check", is_flag=True, help="Exit 1 if rules/schema.json is stale.")
@click.option("--write", is_flag=True, help="Rewrite rules/schema.json.")
def rules_schema(check: bool, write: bool) -> None:
    """Print the JSON Schema of a rule file."""
    from llmtriage.ruleset.files import builtin_rules_dir
    from llmtriage.workflows.testing import schema_text

    text = schema_text()
    path = builtin_rules_dir() / "schema.json"
    if check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            click.echo(f"{path} is stale: run `llmtriage rules schema --write`", err=True)
            sys.exit(EXIT_FINDINGS)
        click.echo(f"{path} is up to date")
        return
    if write:
        path.write_text(text, encoding="utf-8")
        click.echo(f"wrote {path}")
        return
    click.echo(text, nl=False)


# ------------------------------------------------------------------------------ entry point

def _default_to_triage(argv: list[str]) -> list[str]:
    if not argv:
        return ["triage"]
    first = argv[0]
    if first in LAZY_COMMANDS or first in ("-h", "--help", "-V", "--version"):
        return argv
    return ["triage"] + argv


def main(argv: Optional[list[str]] = None) -> int:
    import signal

    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = _default_to_triage(list(sys.argv[1:] if argv is None else argv))
    verbose = "-v" in args or "--verbose" in args
    problem = _check_std_streams()
    if problem:
        _say(f"error: {problem}")
        return EXIT_USAGE
    from llmtriage.ruleset import loader

    loader.ISOLATE_VALIDATION = True     # a cold rule cache costs no memory in this process
    try:
        cli.main(args=args, prog_name="llmtriage", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except click.exceptions.Abort:
        return 130
    except KeyboardInterrupt:
        return 130
    except LlmtriageError as exc:
        msg = str(exc)
        _say(msg if "\n" in msg and msg.count(":") > 2 else f"error: {msg}")
        return exc.exit_code
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:       # writing the report failed (/dev/full, a closed pipe)
            return _output_failed(exc)
        if verbose:
            raise
        _say(f"error: internal error: {type(exc).__name__}: {exc} (run with -v for the traceback)")
        return EXIT_USAGE
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # a bug: one line, the traceback only with -v
        if verbose:
            raise
        _say(f"error: internal error: {type(exc).__name__}: {exc} (run with -v for the traceback)")
        return EXIT_USAGE
    if not _stdout_ok():
        return _output_failed(_STDOUT_ERROR[0])
    return EXIT_OK


_OUTPUT_ERRNOS = {28, 32, 9, 5, 122}     # ENOSPC, EPIPE, EBADF, EIO, EDQUOT
_STDOUT_ERROR: list[Any] = [None]


class _ClosedStdin:
    """Stands in for a closed standard input: reading it is an input error, not a crash."""

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(9, "standard input is closed")

    @property
    def buffer(self) -> Any:
        raise LlmtriageError("standard input is closed (nothing to read; give a log file)")

    def read(self, *a: Any) -> str:
        raise LlmtriageError("standard input is closed (nothing to read; give a log file)")

    readline = read


def _check_std_streams() -> Optional[str]:
    """Closed standard streams become one clear line, and file names that are not UTF-8 print as
    escapes (surrogateescape in, backslashreplace out) instead of aborting the run."""
    if sys.stdin is None:
        sys.stdin = _ClosedStdin()      # type: ignore[assignment]
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass
    if sys.stdout is None:
        return "standard output is closed (nowhere to write the report)"
    return None


def _stdout_ok() -> bool:
    """Flush standard output now; False (the error kept) if it cannot be written."""
    if sys.stdout is None:
        return False
    try:
        sys.stdout.flush()
        return True
    except (OSError, ValueError) as exc:
        _STDOUT_ERROR[0] = exc
        return False


def _output_failed(exc: Any) -> int:
    """One line for output that cannot be written (/dev/full, a closed pipe), and no second error
    when Python flushes stdout at exit: point fd 1 at /dev/null."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    except OSError:
        pass
    if getattr(exc, "errno", None) == 32:        # EPIPE: the reader went away, as after `| head`
        return EXIT_USAGE
    why = getattr(exc, "strerror", None) or str(exc)
    _say(f"error: cannot write the report to standard output: {why}")
    return EXIT_USAGE


def _say(line: str) -> None:
    """One line on standard error, if there is one."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
