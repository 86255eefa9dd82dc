"""`llmtriage fleet SOURCE...`: triage every failed job of a cluster (local processes or Ray)."""
from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from importlib.util import find_spec
from typing import Optional

import click

from llmtriage.cli.common import detect_lang
from llmtriage.errors import EXIT_OK, InputError
from llmtriage.fleet.run import expand_sources, run, texts, write_parquet
from llmtriage.fleet.summary import render_human, summarize, to_json


def _since(value: Optional[str], lang: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(texts(lang)["bad_since"].format(value=value)) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


@click.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--engine", type=click.Choice(["ray", "local"]), default=None,
              help="ray (Ray Data; the default when ray is installed) or local processes.")
@click.option("--address", default=None, help="Ray cluster address (else RAY_ADDRESS, else a local cluster).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="Write one row per log or job to this Parquet file (needs pyarrow).")
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True,
              help="Output format.")
@click.option("--since", default=None, help="Only logs modified on or after this date (YYYY-MM-DD[THH:MM:SS], UTC).")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=0, show_default=True,
              help="Worker processes (local) or CPUs of a local Ray cluster; 0 = one per CPU.")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable).")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of the summary.")
def fleet(sources: tuple[str, ...], engine: Optional[str], address: Optional[str], out_path: Optional[str],
          fmt: str, since: Optional[str], jobs: int, rules_dirs: tuple[str, ...], lang: Optional[str]) -> None:
    """Triage every log under SOURCE (files, directories, globs, file:// s3:// gs:// URLs).

    \b
    A directory whose log files are all named per rank (rank0.log, worker-3.out, ...) is one job,
    analysed like `llmtriage job`; any other log file is one log. Prints a summary (by category and
    action, repeat-offender nodes, unrecognised failures with draft rules); --out writes the rows.
    """
    lang = detect_lang(lang)
    if engine is None:
        engine = "ray" if find_spec("ray") is not None else "local"
    items = expand_sources(sources, since=_since(since, lang), lang=lang)
    rows = run(items, engine=engine, jobs=jobs, address=address or os.environ.get("RAY_ADDRESS"),
               rules_dirs=tuple(rules_dirs), lang=lang)
    if out_path:
        write_parquet(rows, out_path, lang)
    summary = summarize(rows, lang)
    if fmt == "json":
        sys.stdout.write(json.dumps(to_json(summary), ensure_ascii=False, indent=2) + "\n")
    else:
        render_human(summary, sys.stdout, lang=lang, parquet=out_path)
    sys.exit(EXIT_OK)
