"""`llmtriage job PATH...` (several ranks of one job) and `llmtriage diff GOOD BAD` (two runs)."""
from __future__ import annotations

import sys
from typing import Optional

import click

from llmtriage.cli.common import FORMATS, detect_lang, emit_result, format_option
from llmtriage.cli.job_render import render_diff_human, render_job_human
from llmtriage.errors import EXIT_FINDINGS, EXIT_OK
from llmtriage.job.analysis import analyze_job
from llmtriage.job.diff import diff_runs

_FORMAT_HELP = ("human (wrapped to the terminal width or $COLUMNS), json (the {what} document), "
                "sarif or github (the findings of {which}, as `triage` prints them).")


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--jobs", "-j", "jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Processes used to read many large per-rank logs.")
@format_option(FORMATS, _FORMAT_HELP.format(what="job", which="every log"))
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable).")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of explanations.")
@click.option("--no-color", is_flag=True, help="Disable colour (also NO_COLOR=1).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when an error is found.")
@click.option("--flight-recorder", "flight_recorder", type=click.Path(), default=None,
              help="Folder of NCCL Flight Recorder dumps (nccl_trace_rank_<N>); dumps among PATHS are found too.")
def job(paths: tuple[str, ...], jobs: int, fmt: str, rules_dirs: tuple[str, ...], lang: Optional[str],
        no_color: bool, exit_zero: bool, flight_recorder: Optional[str]) -> None:
    """Analyse one job's logs: one per rank/node (files, globs, a directory) or one interleaved log.

    Names the first failing rank and its root cause, summarises the cascade (ranks that then timed
    out, the launcher's report) and lists every rank. Exit 1 when a rank has an error finding."""
    lang = detect_lang(lang)
    res = analyze_job(paths, jobs=jobs, lang=lang, rules_dirs=rules_dirs, flight_recorder=flight_recorder)
    emit_result(res, fmt, render_job_human, no_color=no_color, lang=lang)
    sys.exit(EXIT_OK if exit_zero or not res.failed else EXIT_FINDINGS)


@click.command()
@click.argument("good", type=click.Path(dir_okay=False))
@click.argument("bad", type=click.Path(dir_okay=False))
@format_option(FORMATS, _FORMAT_HELP.format(what="diff", which="the bad run"))
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable).")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None, help="Language of explanations.")
@click.option("--max-templates", type=click.IntRange(min=1), default=50, show_default=True,
              help="New templates listed at most.")
@click.option("--no-color", is_flag=True, help="Disable colour (also NO_COLOR=1).")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when the bad run has an error finding.")
def diff(good: str, bad: str, fmt: str, rules_dirs: tuple[str, ...], lang: Optional[str], max_templates: int,
         no_color: bool, exit_zero: bool) -> None:
    """What the failed run BAD has that the good run GOOD did not: new message templates (numbers, hex,
    paths masked), changed versions and arguments, and the first step where the loss diverges.

    Exit 1 when the bad run has an error finding."""
    lang = detect_lang(lang)
    res = diff_runs(good, bad, lang=lang, rules_dirs=rules_dirs, max_templates=max_templates)
    emit_result(res, fmt, render_diff_human, no_color=no_color, lang=lang, ci_reports=res.reports[1:])
    sys.exit(EXIT_OK if exit_zero or not res.failed else EXIT_FINDINGS)


__all__ = ["job", "diff"]
