"""`llmtriage verify`: regenerate failures with real torch/transformers and verify the fixes."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path


import click

from llmtriage.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, LlmtriageError
from llmtriage.workflows import verify as V


@click.command("verify")
@click.argument("names", nargs=-1, metavar="[SCENARIO|RULE]...")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Where the reproducers run (auto: cuda when available).")
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True,
              help="human: a table and a totals line; json: every scenario with its status, and the totals.")
@click.option("--save-logs", "save_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write each genuine log (<scenario>.<variant>.log + .meta.yaml) into DIR.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Reproducer processes run in parallel.")
@click.option("--record", is_flag=True, help="Write the results into rules/verified.json (read by kb/triage).")
@click.option("--record-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the record here instead of rules/verified.json (implies --record).")
@click.option("--list", "list_only", is_flag=True, help="List the scenarios and their variants, run nothing.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
def verify(names, device, fmt, save_dir, jobs, record, record_file, list_only, quiet) -> None:
    """Reproduce failures for real, check that triage names them, and verify each fix.

    For each scenario the failing variant runs in a child interpreter (tiny models, no downloads,
    HF_HUB_OFFLINE=1); its log must give the expected rule as the top finding. Each fix variant must
    then exit 0, without that rule, and pass the scenario's own check. Exit 1 if any step fails.
    """
    try:
        scenarios = V.select_scenarios(names)
        if list_only:
            _list(scenarios, fmt)
            sys.exit(EXIT_OK)
        env = V.probe_environment()
        t0 = time.monotonic()

        def progress(o, i, n):
            if quiet:
                return
            state = {"verified": "ok", "failed": "FAILED", "skipped": f"skipped ({o.skipped})"}[o.status]
            click.echo(f"[{i}/{n}] {o.name}: {state} ({o.seconds:.1f}s)", err=True)

        outcomes, env = V.run_verification(scenarios, device=device, jobs=jobs, env=env, progress=progress,
                                           include_unsupported=bool(names))
        seconds = time.monotonic() - t0
        if save_dir is not None:
            V.save_logs(outcomes, save_dir, env)
        if record or record_file:
            path = V.record(outcomes, env, record_file)
            if not quiet:
                click.echo(f"recorded results in {path}", err=True)
    except LlmtriageError as exc:
        click.echo(f"llmtriage verify: {str(exc).splitlines()[0] if str(exc) else exc}", err=True)
        sys.exit(EXIT_USAGE)
    if fmt == "json":
        click.echo(json.dumps(V.to_json(outcomes, env, seconds), indent=2, ensure_ascii=False))
    else:
        click.echo(V.format_table(outcomes, seconds, env))
    sys.exit(EXIT_OK if all(o.ok for o in outcomes) else EXIT_FINDINGS)


def _list(scenarios, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps({"scenarios": [
            {"name": s.name, "category": s.category, "devices": list(s.devices), "rules": list(s.rules),
             "description": s.description, "fail": s.fail.name,
             "fixes": [{"name": f.name, "verified_by": f"{s.name}:{f.name}", "description": f.description}
                       for f in s.fixes]} for s in scenarios]}, indent=2))
        return
    for s in scenarios:
        click.echo(f"{s.name}  [{s.category}; {', '.join(s.devices)}]  {s.description}")
        click.echo(f"    fail: {s.fail.name}: {s.fail.description}")
        for f in s.fixes:
            click.echo(f"    fix:  {s.name}:{f.name}: {f.description}")
