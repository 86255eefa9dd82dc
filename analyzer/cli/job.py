"""`llmtriage job PATH...` (several ranks of one job) and `llmtriage diff GOOD BAD` (two runs)."""
from __future__ import annotations

import json
import sys
from typing import Any, Optional, TextIO

import click

from llmtriage.cli.app import detect_lang, use_color
from llmtriage.errors import EXIT_FINDINGS, EXIT_OK
from llmtriage.job.texts import say
from llmtriage.report.redact import SafeWriter, safe_data
from llmtriage.report.redact import redact
from llmtriage.report.style import SEV, Style

_L = {
    "en": {"job": "job", "logs": "logs", "first": "first failing rank", "root": "Root cause", "cascade": "Cascade",
           "ranks": "Ranks", "fixes": "Fixes", "silent": "ranks that never reported the timeout (likely stuck)",
           "none": "no error in any rank", "more": "more ranks", "new": "New in the bad run",
           "versions": "Changed versions", "args": "Changed arguments", "diverge": "Metrics diverge",
           "nodiv": "loss curves agree on {n} common steps", "nosteps": "no common logged steps to compare",
           "badroot": "Bad run triage",
           "truncated": "tables bounded, not every entry kept ({what}): new templates and changed flags may be incomplete"},
    "zh": {"job": "作业", "logs": "个日志", "first": "最先失败的 rank", "root": "根因", "cascade": "连锁反应",
           "ranks": "各 rank", "fixes": "修复方法", "silent": "从未报告超时的 rank（可能卡住）",
           "none": "所有 rank 都没有错误", "more": "个 rank 未列出", "new": "坏运行中新出现的日志模板",
           "versions": "版本变化", "args": "参数变化", "diverge": "指标分叉",
           "nodiv": "{n} 个共同步上 loss 曲线一致", "nosteps": "没有可比较的共同步", "badroot": "坏运行的诊断",
           "truncated": "表格有上限，未保留全部条目（{what}）：新模板和参数变化可能不完整"},
}


def _labels(lang: Optional[str]) -> dict[str, str]:
    return _L["zh" if lang == "zh" else "en"]


def render_job_human(res: Any, out: TextIO, *, color: bool, lang: Optional[str], max_ranks: int = 24) -> None:
    st = Style(color)
    L = _labels(lang)
    n = len(res.reports) if res.mode == "per-file" else 1
    head = f"{L['job']}: {n} {L['logs']} ({res.mode})"
    if res.world_size:
        head += f", world size {res.world_size}"
    out.write(st(head, "bold") + "\n")
    root = res.root
    if root is None or root.severity != "error":
        out.write("  " + st("✔ " + L["none"], "green") + "\n")
    if res.fr_sentence and (root is None or root.severity != "error"):
        out.write(f"  {st(say('flight_recorder', 'label', lang, {}), 'bold')}: {res.fr_sentence}\n")
    if res.stall and res.stall.get("text"):
        out.write(f"  {st(say('stall', 'label', lang, {}), 'bold')}: {res.stall['text']}\n")
    if root is not None:
        icon, colr = SEV.get(root.severity, ("•", "blue"))
        first = res.first
        who = f"rank {first.rank}" if first is not None and first.rank is not None else (first.source if first else "?")
        out.write(f"  {st(L['root'], 'bold')}: {st(icon + ' ' + root.title, colr, 'bold')}  "
                  f"{st('[' + root.category + ' / ' + root.rule_id + ']', 'dim')}\n")
        meta = [f"{L['first']}: {who}"]
        if res.phase:
            meta.append(res.phase)
        if res.step is not None:
            meta.append(f"step {res.step}")
        if first is not None and first.time_text:
            meta.append(first.time_text)
        out.write("    " + st(", ".join(meta), "cyan") + "\n")
        out.write(f"    {redact(root.message)}\n")
        src = first.source if first is not None else ""
        out.write(f"    {st(f'{src}:{root.line}', 'dim')}: {st(redact(root.evidence[:300]), 'dim')}\n")
        out.write(f"  {st(L['cascade'], 'bold')}: {res.cascade}\n")
        if res.silent_ranks:
            sr = ", ".join(map(str, res.silent_ranks[:16])) + (" …" if len(res.silent_ranks) > 16 else "")
            out.write(f"  {st(L['silent'], 'yellow')}: {sr}\n")
        if root.fixes and root.severity == "error":
            out.write(f"  {st(L['fixes'], 'bold')}:\n")
            for i, fx in enumerate(root.fixes[:3], 1):
                out.write(f"    {i}. {st(fx['title'], 'bold')} — {' '.join(str(fx['detail']).split())[:200]}\n")
    out.write(f"  {st(L['ranks'], 'bold')}:\n")
    rows = res.ranks
    if len(rows) > max_ranks:
        _grouped(rows, res.first, out, st)
        return
    for r in rows:
        mark = "→" if r is res.first else " "
        t = r.top
        desc = f"{t.category:<22} {t.rule_id} (line {t.line})" if t is not None else "-"
        colr = {"cause": "red", "cascade": "yellow", "warning": "blue", "ok": "green"}[r.status]
        rk = f"rank {r.rank}" if r.rank is not None else "rank ?"
        extra = f"  {r.time_text}" if r.time_text else ""
        src = f"  {r.source}" if res.mode == "per-file" else ""
        out.write(f"  {mark} {rk:<9} {st(f'{r.status:<8}', colr)} {desc}{st(extra + src, 'dim')}\n")


def _ranges(ranks: list[int]) -> str:
    out, i = [], 0
    rs = sorted(ranks)
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def _grouped(rows: list[Any], first: Any, out: TextIO, st: Any) -> None:
    """Many ranks: the first failing one on its own line, the others grouped by what they reported."""
    groups: dict[tuple, list[Any]] = {}
    for r in rows:
        key = ("first",) if r is first else (r.status, r.top.category if r.top else "-", r.top.rule_id if r.top else "-")
        groups.setdefault(key, []).append(r)
    order = sorted(groups, key=lambda k: (k != ("first",), {"cause": 0, "cascade": 1, "warning": 2, "ok": 3}.get(k[0], 0)))
    for key in order:
        rs = groups[key]
        if key == ("first",):
            r = rs[0]
            t = r.top
            desc = f"{t.category:<22} {t.rule_id} (line {t.line})" if t is not None else "-"
            out.write(f"  → rank {r.rank!s:<5} {st(f'{r.status:<8}', 'red')} {desc}{st(('  ' + r.time_text) if r.time_text else '', 'dim')}\n")
            continue
        status, cat, rid = key
        colr = {"cause": "red", "cascade": "yellow", "warning": "blue", "ok": "green"}[status]
        ranks = _ranges([r.rank for r in rs if r.rank is not None])
        out.write(f"    {len(rs):>3} ranks {st(f'{status:<8}', colr)} {cat:<22} {rid}  {st('ranks ' + ranks, 'dim')}\n")


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--jobs", "-j", "jobs", type=click.IntRange(1, 256), default=1, show_default=True,
              help="Processes used to read many large per-rank logs.")
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True)
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False), help="Extra rule folder.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None)
@click.option("--no-color", is_flag=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when an error is found.")
@click.option("--flight-recorder", "flight_recorder", type=click.Path(), default=None,
              help="Folder of NCCL Flight Recorder dumps (nccl_trace_rank_<N>); dumps among PATHS are found too.")
def job(paths: tuple[str, ...], jobs: int, fmt: str, rules_dirs: tuple[str, ...], lang: Optional[str],
        no_color: bool, exit_zero: bool, flight_recorder: Optional[str]) -> None:
    """Analyse one job's logs: one per rank/node (files, globs, a directory) or one interleaved log.

    Names the first failing rank and its root cause, summarises the cascade (ranks that then timed
    out, the launcher's report) and lists every rank."""
    from llmtriage.job.analysis import analyze_job

    lang = detect_lang(lang)
    res = analyze_job(paths, jobs=jobs, lang=lang, rules_dirs=rules_dirs, flight_recorder=flight_recorder)
    _emit(res, fmt, render_job_human, no_color, lang)
    sys.exit(EXIT_OK if exit_zero or not res.failed else EXIT_FINDINGS)


def render_diff_human(res: Any, out: TextIO, *, color: bool, lang: Optional[str], limit: int = 20) -> None:
    st = Style(color)
    L = _labels(lang)
    out.write(st(f"diff {res.good} → {res.bad}", "bold") + "\n")
    bad = res.reports[1]
    if bad.findings:
        f = bad.findings[0]
        icon, colr = SEV.get(f.severity, ("•", "blue"))
        ps = ", ".join(str(x) for x in (bad.extra.get("phase"), f"step {bad.extra['step']}" if bad.extra.get("step") is not None else None) if x)
        out.write(f"  {st(L['badroot'], 'bold')}: {st(icon + ' ' + f.title, colr)} [{f.category} / {f.rule_id}] line {f.line}"
                  + (f" ({ps})" if ps else "") + "\n")
    out.write(f"  {st(L['diverge'], 'bold')}: ")
    if res.divergence:
        d = res.divergence
        out.write(f"step {d['step']}: loss {d['good_loss']} → {d['bad_loss']}\n")
    else:
        out.write((L["nodiv"].format(n=res.common_steps) if res.common_steps else L["nosteps"]) + "\n")
    if res.versions:
        out.write(f"  {st(L['versions'], 'bold')}:\n")
        for v in res.versions:
            out.write(f"    {v['name']}: {v['good'] or '-'} → {v['bad'] or '-'}\n")
    if res.args:
        out.write(f"  {st(L['args'], 'bold')}:\n")
        for a in res.args[:limit]:
            out.write(f"    {a['name']}: {a['good'] or '-'} → {a['bad'] or '-'}\n")
    if res.new_templates:
        out.write(f"  {st(L['new'], 'bold')} ({len(res.new_templates)}):\n")
        for t in res.new_templates[:limit]:
            out.write(f"    line {t['line']:>6}  {t['count']:>5}x  {redact(t['example'] or t['template'])[:160]}\n")
    if getattr(res, "truncated", None):
        what = "; ".join(f"{run}: " + ", ".join(f"{n} {table}" for table, n in tables.items())
                         for run, tables in res.truncated.items())
        out.write(f"  {st(L['truncated'].format(what=what), 'yellow')}\n")


@click.command()
@click.argument("good", type=click.Path(dir_okay=False))
@click.argument("bad", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["human", "json"]), default="human", show_default=True)
@click.option("--rules", "rules_dirs", multiple=True, type=click.Path(file_okay=False), help="Extra rule folder.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default=None)
@click.option("--max-templates", type=int, default=50, show_default=True, help="New templates listed at most.")
@click.option("--no-color", is_flag=True)
def diff(good: str, bad: str, fmt: str, rules_dirs: tuple[str, ...], lang: Optional[str], max_templates: int,
         no_color: bool) -> None:
    """What the failed run BAD has that the good run GOOD did not: new message templates (numbers, hex,
    paths masked), changed versions and arguments, and the first step where the loss diverges."""
    from llmtriage.job.analysis import diff_runs

    lang = detect_lang(lang)
    res = diff_runs(good, bad, lang=lang, rules_dirs=rules_dirs, max_templates=max_templates)
    _emit(res, fmt, render_diff_human, no_color, lang)
    sys.exit(EXIT_OK)


def _emit(res: Any, fmt: str, render_human: Any, no_color: bool, lang: Any) -> None:
    """Print a job/diff result as redacted JSON or through its human renderer."""
    out = click.get_text_stream("stdout")
    if fmt == "json":
        json.dump(safe_data(res.to_dict()), out, ensure_ascii=False, indent=2)
        out.write("\n")
    else:
        render_human(res, SafeWriter(out), color=use_color(no_color, out), lang=lang)
    out.flush()
