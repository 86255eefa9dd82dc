"""`llmtriage kb search|show|build` and the top-level alias `llmtriage explain ID|CATEGORY`.

Thin click layer over the kb package (search, pages, page_text, site, site_check); its words are rules/kb.yaml labels. Exit codes: 0 ok, 1 `kb build --check` found problems,
2 usage errors (unknown rule or category, bad rules).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Optional

import click

from llmtriage import load_rules
from llmtriage.cli.common import detect_lang, use_color
from llmtriage.errors import EXIT_FINDINGS, LlmtriageError
from llmtriage.kb.page_text import render_category_text, render_rule_text
from llmtriage.kb.pages import category_page, find_rule, rule_page
from llmtriage.kb.search import search
from llmtriage.kb.site import build_site
from llmtriage.kb.site_check import check_site
from llmtriage.kb.tokens import has_cjk
from llmtriage.kb.words import load_kb_words
from llmtriage.report.style import Style, terminal_width
from llmtriage.ruleset.verified import fix_table, read_record

_LANG = click.option("--lang", type=click.Choice(["en", "zh"]), default=None,
                     help="Language of the text (default: LANG=zh_* selects Chinese).")
_RULES = click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False),
                      help="Extra rule folder (repeatable).")


def _env_zh() -> bool:
    return detect_lang(None) == "zh"


@click.group()
def kb() -> None:
    """Search the knowledge base, print a rule's page, build a static HTML site."""


@kb.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True,
              help="Output format.")
@_LANG
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Number of results.")
@_RULES
@click.option("--no-color", is_flag=True, help="Disable colour (also NO_COLOR=1).")
def kb_search(query: tuple[str, ...], fmt: str, lang: Optional[str], limit: int, rules_dirs: tuple[str, ...],
              no_color: bool) -> None:
    """Rank rules for QUERY: symptom words (English or Chinese) or a pasted error line.

    \b
    llmtriage kb search 显存溢出
    llmtriage kb search "loss nan"
    llmtriage kb search "RuntimeError: CUDA error: device-side assert triggered"
    pbpaste | llmtriage kb search -      (a pasted traceback on standard input)
    """
    text = " ".join(query)
    if text == "-":         # a pasted traceback or log excerpt on standard input
        text = sys.stdin.buffer.read(1 << 20).decode("utf-8", errors="replace")
    if not text.strip():
        raise click.UsageError("empty query")
    # --lang wins; then a zh_* locale; then a Chinese query shows Chinese titles
    lang = detect_lang(lang) if lang or _env_zh() else ("zh" if has_cjk(text) else None)
    rs = load_rules(rules_dirs)
    results = search(rs, text, limit=limit, lang=lang)
    out = click.get_text_stream("stdout")
    if fmt == "json":
        out.write(json.dumps({"results": results}, ensure_ascii=False, indent=2) + "\n")
        return
    st = Style(use_color(no_color, out))
    if not results:
        out.write(load_kb_words().label_set(lang)["no_results"] + "\n")
        return
    # the table and the hint stay in English for now (byte-identical output of the refactor);
    # rules/kb.yaml has their Chinese words
    L = load_kb_words().label_set("en")
    cols = terminal_width(out, default=120) or 120
    w_id = max(len(r["rule_id"]) for r in results)
    w_cat = max(len(r["category"]) for r in results)
    out.write(st(f"{'#':>2}  {L['col_score']:>5}  {L['col_rule']:<{w_id}}  {L['col_category']:<{w_cat}}  "
                 f"{L['col_title']}", "bold") + "\n")
    for i, r in enumerate(results, 1):
        line = f"{i:>2}  {r['score']:>5.2f}  {r['rule_id']:<{w_id}}  {r['category']:<{w_cat}}  "
        title = r["title"]
        room = max(cols - len(line) - 1, 20)
        if len(title) > room and not any(ord(c) > 0x2e80 for c in title):
            title = title[:room - 1] + "…"
        out.write(line + title + "\n")
    hint = L["details"].format(id=results[0]["rule_id"])
    out.write(st(hint, "dim") + "\n")


def _show(ident: str, lang: Optional[str], rules_dirs: tuple[str, ...], no_color: bool,
          verified_file: Optional[str]) -> None:
    lang = detect_lang(lang)
    rs = load_rules(rules_dirs)
    out = click.get_text_stream("stdout")
    color = use_color(no_color, out)
    rule = find_rule(rs, ident)
    if rule is not None:
        verified = fix_table(read_record(verified_file)) if verified_file else None
        page = rule_page(rs, rule, lang=lang, verified=verified)
        width = min(terminal_width(out, default=100) or 100, 110)
        out.write(render_rule_text(page, color=color, width=width - 2))
        return
    if ident in rs.taxonomy or any(r["category"] == ident for r in rs.rules):
        out.write(render_category_text(category_page(rs, ident, lang=lang), color=color))
        return
    near = [r["rule_id"] for r in search(rs, ident.replace("-", " "), limit=3)]
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    raise LlmtriageError(f"no rule or category '{ident}'{hint} (see `llmtriage kb search` / `llmtriage rules list`)")


@kb.command("show")
@click.argument("ident", metavar="ID|CATEGORY")
@_LANG
@_RULES
@click.option("--no-color", is_flag=True, help="Disable colour (also NO_COLOR=1).")
@click.option("--verified", "verified_file", type=click.Path(dir_okay=False), default=None, hidden=True,
              help="Read verified fixes from this file instead of rules/verified.json.")
def kb_show(ident: str, lang: Optional[str], rules_dirs: tuple[str, ...], no_color: bool,
            verified_file: Optional[str]) -> None:
    """Print the full page of a rule (or a category and its rules)."""
    _show(ident, lang, rules_dirs, no_color, verified_file)


@click.command("explain")
@click.argument("ident", metavar="ID|CATEGORY")
@_LANG
@_RULES
@click.option("--no-color", is_flag=True, help="Disable colour (also NO_COLOR=1).")
@click.option("--verified", "verified_file", type=click.Path(dir_okay=False), default=None, hidden=True)
def explain(ident: str, lang: Optional[str], rules_dirs: tuple[str, ...], no_color: bool,
            verified_file: Optional[str]) -> None:
    """Explain a rule id or a category (same as `llmtriage kb show`)."""
    _show(ident, lang, rules_dirs, no_color, verified_file)


@kb.command("build")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output folder.")
@click.option("--check", is_flag=True, help="Parse the written site; exit 1 if a page lacks a section or a link is broken.")
@click.option("--lang", "langs", multiple=True, type=click.Choice(["en", "zh"]),
              help="Language(s) to build (default: both; Chinese under OUT/zh/).")
@_RULES
@click.option("--verified", "verified_file", type=click.Path(dir_okay=False), default=None, hidden=True)
def kb_build(out_dir: str, check: bool, langs: tuple[str, ...], rules_dirs: tuple[str, ...],
             verified_file: Optional[str]) -> None:
    """Write a browsable static HTML site of the knowledge base to OUT."""
    rs = load_rules(rules_dirs)
    verified = fix_table(read_record(verified_file)) if verified_file else None
    L = load_kb_words().label_set("en")      # English for now (byte-identical output of the refactor)
    try:
        written = build_site(rs, out_dir, langs=langs or ("en", "zh"), verified=verified)
    except OSError as exc:
        raise LlmtriageError(f"{out_dir}: cannot write: {exc.strerror}") from None
    click.echo(L["wrote"].format(n=len(written), out=out_dir, index=os.path.join(out_dir, "index.html")))
    if check:
        problems = check_site(out_dir)
        for p in problems:
            click.echo(f"✖ {p}", err=True)
        if problems:
            click.echo(L["problems"].format(n=len(problems)), err=True)
            sys.exit(EXIT_FINDINGS)
        click.echo(L["site_ok"])
