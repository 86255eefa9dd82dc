"""A CUDA OOM on a GPU that another process holds (rules/verdict.yaml `oom_on_held_gpu`).

PyTorch's OOM message names other processes on the device ("Process 3310278 has 61.22 GiB memory in
use"). When such a process holds at least `min_share` of the GPU's capacity, the job did not run out of
its own memory: it shares the GPU with another job (a stale run, another user's job on a shared node), so
the rule's fix that frees or avoids that GPU (`fix`, by its title in either language) goes first, ahead of
the batch-size advice. When, earlier in the log, the job's GPU selection itself failed (a `selection`
rule: the deepspeed launcher rejecting `--include localhost:4,5,6,7` under Slurm's CUDA_VISIBLE_DEVICES),
the OOM is where that mistake landed: the rerun picked GPUs 0..N-1, another job's, so the OOM ranks as
the symptom of the selection failure.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import Finding

_SIZE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>bytes|[KMGTP]iB)\s*$")
_UNIT = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}


def size_bytes(text: Optional[str]) -> Optional[float]:
    """'61.22 GiB' -> bytes; None when `text` is not such a size."""
    m = _SIZE.match(text or "")
    return float(m.group("n")) * _UNIT[m.group("unit")] if m else None


def held_share(f: Finding) -> Optional[float]:
    """The share of the GPU's capacity that the other process named in the OOM holds, or None."""
    other, total = size_bytes(f.captures.get("other_mem")), size_bytes(f.captures.get("total"))
    return other / total if other is not None and total else None


def oom_on_held_gpu(findings: list[Finding], spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    """Put the free-the-GPU fix first on each OOM whose GPU another process mostly holds, and rank it as
    the symptom of an earlier GPU-selection failure when the log has one (module docstring)."""
    if not spec:
        return
    titles = {str(t) for t in (spec["fix"].values() if isinstance(spec["fix"], dict) else [spec["fix"]])}
    selection = set(spec.get("selection") or ())
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "error" or f.role != "cause" or f.judgement is not None:
            continue
        share = held_share(f)
        if share is None or share < float(spec["min_share"]):
            continue
        first = [x for x in f.fixes if x.get("title") in titles]
        f.fixes = first + [x for x in f.fixes if x.get("title") not in titles]
        before = [g for g in findings if g is not f and g.rule_id in selection and g.severity == "error"
                  and g.role == "cause" and g.line < f.line]
        if before:
            cause = max(before, key=lambda g: g.line)
            f.role, f.priority = "symptom", 0
            f.judgement = {"context": "oom-on-held-gpu", "severity_was": "error",
                           "reason": tr(spec["reason"], lang, line=cause.line, pid=f.captures.get("other_pid", "?"),
                                        held=f.captures.get("other_mem", "?"), total=f.captures.get("total", "?"))}
