"""Command line interface (click): the `llmtriage` group and the entry point `main`.

Only `llmtriage.cli` imports click. Each subcommand lives in its own module of this package and is
imported only when invoked (`LAZY_COMMANDS`), so `llmtriage crash.log` starts fast (no pydantic, no
yaml with a warm rule cache, never torch). `main` turns errors into one line and an exit status."""
from __future__ import annotations

import os
import signal
import sys
from importlib import import_module
from importlib.util import find_spec
from typing import Any, Optional

import click

from llmtriage.ruleset import loader
from llmtriage.version import __version__
from llmtriage.errors import EXIT_OK, EXIT_USAGE, LlmtriageError

# command name -> "module:attribute" (imported on first use)
LAZY_COMMANDS: dict[str, str] = {
    "triage": "llmtriage.cli.triage:triage",
    "rules": "llmtriage.cli.rules:rules",
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


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="llmtriage")
def cli() -> None:
    """Name the root cause of a crashed LLM training/inference job from its log.

    \b
    llmtriage crash.log            triage a log (same as `llmtriage triage crash.log`)
    ... 2>&1 | llmtriage           triage standard input
    llmtriage kb search "显存溢出"   search the knowledge base
    """


# ------------------------------------------------------------------------------ entry point

def _default_to_triage(argv: list[str]) -> list[str]:
    if not argv:
        return ["triage"]
    first = argv[0]
    if first in LAZY_COMMANDS or first in ("-h", "--help", "-V", "--version"):
        return argv
    return ["triage"] + argv


def main(argv: Optional[list[str]] = None) -> int:
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = _default_to_triage(list(sys.argv[1:] if argv is None else argv))
    verbose = "-v" in args or "--verbose" in args
    problem = _check_std_streams()
    if problem:
        _say(f"error: {problem}")
        return EXIT_USAGE
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
