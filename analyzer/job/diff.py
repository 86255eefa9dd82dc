"""`llmtriage diff GOOD BAD`: what the failed run has that the good run did not.

Message templates new in the bad run (numbers, hex, paths and times masked, as a log-template miner
does; progress bars and metric lines ignored), changed library versions and arguments (`--flag
value` command lines, `key=value` dumps), the first step where the loss curves diverge, and the bad
run's triage. Every table is bounded (`MAX_TEMPLATES`, `MAX_ARGS`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llmtriage import get_engine, scan_source
from llmtriage.detect.metrics import parse_line
from llmtriage.engine.logparse import decode_line, iter_blocks, match_view, normalise_text, split_prefix
from llmtriage.errors import InputError
from llmtriage.findings import JSON_VERSION, Report

_MASKS = [
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<time>"),
    (re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<num>"),
    (re.compile(r"\s+"), " "),
]
_BAR_STEP = re.compile(r"\|\s*(\d+)/\d+ \[")
_PROGRESS = re.compile(r"\d+%\||it/s\]|s/it\]|/s\]")
_VERSION = re.compile(
    r"(?i)\b(torch|pytorch|transformers|deepspeed|accelerate|peft|trl|vllm|flash[-_]attn|bitsandbytes|datasets|"
    r"triton|xformers|nccl|cuda|cudnn|python|megatron[-_]core|lightning|tokenizers|safetensors|llamafactory|swift|unsloth)"
    r"(?:[ _-]?version)?\s*(?:==|=|:|\s|v)\s*v?(\d+\.\d+(?:\.\d+)?(?:[.+-]?(?:dev|rc|post|a|b|cu)\w*)*)")
_CLI_ARG = re.compile(r"--([A-Za-z][\w.-]*)(?:=|\s+)(?!--)([^\s,'\"\]]+)")
_KV_ARG = re.compile(r"^\s{0,8}([a-z][a-z0-9_]*)=([^,\s]+),?\s*$")
MAX_TEMPLATES = 20_000      # distinct message templates kept per run (a template and an example: ~1 KB)
MAX_ARGS = 2_000            # distinct command-line flags kept per run
MAX_ARG_LEN = 200


def template_of(text: str) -> str:
    t = split_prefix(text).text
    for pat, rep in _MASKS:
        t = pat.sub(rep, t)
    return t.strip()[:300]


@dataclass
class RunProfile:
    templates: dict[str, list[int]] = field(default_factory=dict)   # template -> [count, first line]
    example: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    losses: dict[int, float] = field(default_factory=dict)
    lines: int = 0
    dropped: dict[str, int] = field(default_factory=dict)   # table -> distinct entries not kept (bounds)

    def add_arg(self, name: str, value: str) -> None:
        if name in self.args:
            return
        if len(self.args) >= MAX_ARGS:
            self.dropped["args"] = self.dropped.get("args", 0) + 1
            return
        self.args[name[:MAX_ARG_LEN]] = value[:MAX_ARG_LEN]


def profile_run(path: Path, *, keep_examples: Optional[set[str]] = None, max_steps: int = 200_000) -> RunProfile:
    prof = RunProfile()
    ln = 0
    last_bar = (-10, 0)                     # (line, step) of the last tqdm bar
    pending: Optional[tuple[int, float, Optional[int]]] = None   # a loss without a step, waiting for the next bar

    def put(step: int, loss: float) -> None:
        if len(prof.losses) < max_steps:
            prof.losses.setdefault(step, loss)
    with open(path, "rb") as fh:
        for chunk, _ in iter_blocks(fh):
            lines, view = match_view(chunk)
            for raw in lines.split(b"\n")[:-1] if lines.endswith(b"\n") else lines.split(b"\n"):
                ln += 1
                text = normalise_text(decode_line(raw[:4096])[0])
                if not text.strip():
                    continue
                if "loss" in text:
                    parsed = parse_line(text.encode("utf-8", "replace"))
                    if parsed is not None and parsed[1] is not None:
                        if pending is not None and pending[2] is not None:
                            put(pending[2], pending[1])
                        pending = None
                        if parsed[0] is not None:
                            put(parsed[0], parsed[1])
                        else:   # the bar right after it names its step, else the one right before
                            pending = (ln, parsed[1], last_bar[1] if ln - last_bar[0] <= 2 else None)
                        continue
                if _PROGRESS.search(text):
                    b = _BAR_STEP.search(text)
                    if b:
                        last_bar = (ln, int(b.group(1)))
                        if pending is not None and ln - pending[0] <= 1:
                            put(last_bar[1], pending[1])
                        elif pending is not None and pending[2] is not None:
                            put(pending[2], pending[1])
                        pending = None
                    continue
                for m in _VERSION.finditer(text):
                    prof.versions.setdefault(m.group(1).lower().replace("_", "-").replace("pytorch", "torch"), m.group(2))
                if "--" in text:
                    for m in _CLI_ARG.finditer(text):
                        prof.add_arg(m.group(1), m.group(2))
                else:
                    m = _KV_ARG.match(text)
                    if m:
                        prof.add_arg(m.group(1), m.group(2))
                tpl = template_of(text)
                cur = prof.templates.get(tpl)
                if cur is None:
                    if len(prof.templates) < MAX_TEMPLATES:
                        prof.templates[tpl] = [1, ln]
                        if keep_examples is None or tpl not in keep_examples:
                            prof.example[tpl] = text[:300]
                    else:
                        prof.dropped["templates"] = prof.dropped.get("templates", 0) + 1
                else:
                    cur[0] += 1
    prof.lines = ln
    return prof


def _diverge(good: dict[int, float], bad: dict[int, float], rel: float = 0.25, abs_: float = 0.1) -> Optional[dict[str, Any]]:
    common = sorted(set(good) & set(bad))
    for s in common:
        g, b = good[s], bad[s]
        if not math.isfinite(b) and math.isfinite(g):
            return {"step": s, "good_loss": g, "bad_loss": str(b)}
        if math.isfinite(g) and math.isfinite(b) and abs(b - g) > max(abs_, rel * abs(g)):
            return {"step": s, "good_loss": g, "bad_loss": b}
    return None


@dataclass
class DiffResult:
    good: str
    bad: str
    new_templates: list[dict[str, Any]]
    versions: list[dict[str, Any]]
    args: list[dict[str, Any]]
    divergence: Optional[dict[str, Any]]
    common_steps: int
    reports: list[Report]
    truncated: dict[str, dict[str, int]] = field(default_factory=dict)   # run -> table -> entries not kept

    @property
    def failed(self) -> bool:
        """The bad run has an error finding."""
        return any(f.severity == "error" for f in self.reports[1].findings)

    def to_dict(self) -> dict[str, Any]:
        return {"version": JSON_VERSION, "diff": {
            "good": self.good, "bad": self.bad, "new_templates": self.new_templates,
            "changed_versions": self.versions, "changed_args": self.args,
            "metric_divergence": self.divergence, "common_steps": self.common_steps,
            "bad_root_cause": self.reports[1].findings[0].to_dict() if self.reports[1].findings else None,
            "truncated": self.truncated,
        }, "reports": [r.to_dict() for r in self.reports]}


def diff_runs(good: str, bad: str, *, lang: Optional[str] = None, rules_dirs: tuple[str, ...] = (),
              max_templates: int = 50) -> DiffResult:
    gp, bp = Path(good), Path(bad)
    for p in (gp, bp):
        if not p.is_file():
            raise InputError(f"{p}: no such file")
    eng = get_engine(list(rules_dirs), lang=lang)
    reports = [scan_source(eng, gp, name=good), scan_source(eng, bp, name=bad)]
    g = profile_run(gp)
    b = profile_run(bp, keep_examples=set())
    new = [(tpl, c[0], c[1]) for tpl, c in b.templates.items() if tpl not in g.templates]
    new.sort(key=lambda x: x[2])
    new_templates = [{"template": t, "count": n, "line": ln, "example": b.example.get(t, "")} for t, n, ln in new[:max_templates]]
    versions = [{"name": k, "good": g.versions.get(k), "bad": v} for k, v in sorted(b.versions.items())
                if g.versions.get(k) != v] + [{"name": k, "good": v, "bad": None} for k, v in sorted(g.versions.items())
                                               if k not in b.versions and b.versions]
    args = [{"name": k, "good": g.args.get(k), "bad": v} for k, v in sorted(b.args.items()) if g.args.get(k) != v]
    args += [{"name": k, "good": v, "bad": None} for k, v in sorted(g.args.items()) if k not in b.args and b.args]
    div = _diverge(g.losses, b.losses)
    return DiffResult(good=good, bad=bad, new_templates=new_templates, versions=versions, args=args,
                      divergence=div, common_steps=len(set(g.losses) & set(b.losses)), reports=reports,
                      truncated={k: p.dropped for k, p in (("good", g), ("bad", b)) if p.dropped})


__all__ = ["diff_runs", "DiffResult", "RunProfile", "profile_run", "template_of"]
