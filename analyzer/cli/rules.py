"""`llmtriage rules list|show|validate|test|schema`: the rule files."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import click

from llmtriage import load_rules
from llmtriage.errors import EXIT_FINDINGS, EXIT_OK, LlmtriageError, RuleLoadError
from llmtriage.ruleset.files import builtin_rules_dir, load_taxonomy
from llmtriage.ruleset.validate import validate_dirs, validate_rule_file
from llmtriage.workflows.testing import check_rules, schema_text


@click.group()
def rules() -> None:
    """List, show, validate and test rules."""


@rules.command("list")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable).")
@click.option("--category", default=None, help="Only the rules of this category.")
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True,
              help="Output format.")
def rules_list(rules_dirs: tuple[str, ...], category: Optional[str], fmt: str) -> None:
    """List rules: id, category, severity, role, title."""
    rs = load_rules(rules_dirs)
    rows = [r for r in rs.rules if category in (None, r["category"])]
    if fmt == "json":
        click.echo(json.dumps([{k: r[k] for k in ("id", "category", "severity", "role", "title")} for r in rows],
                              ensure_ascii=False, indent=2))
        return
    w = max((len(r["id"]) for r in rows), default=10)
    for r in rows:
        click.echo(f"{r['id']:<{w}}  {r['category']:<24} {r['severity']:<7} {r['role']:<7} {r['title']}")
    click.echo(f"{len(rows)} rules", err=True)


@rules.command("show")
@click.argument("rule_id")
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder (repeatable).")
def rules_show(rule_id: str, rules_dirs: tuple[str, ...]) -> None:
    """Print a rule's YAML source."""
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
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra rule folder loaded with the built-in rules (repeatable).")
def rules_test(paths: tuple[str, ...], rules_dirs: tuple[str, ...]) -> None:
    """Run every rule's examples through the full engine (all rules loaded)."""
    dirs, files = _paths_to_dirs(paths)
    rs = load_rules(tuple(rules_dirs) + tuple(d for d in dirs if not _is_builtin_subdir(d)), use_cache=False)
    selected = _select(rs, paths)
    failures, total = check_rules(rs, selected)
    for f in failures:
        click.echo(f"✖ {f}")
    click.echo(f"{total - len(failures)} passed, {len(failures)} failed")
    sys.exit(EXIT_FINDINGS if failures else EXIT_OK)


def _is_builtin_subdir(d: str) -> bool:
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


__all__ = ["rules"]
