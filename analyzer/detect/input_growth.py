"""A chat loop whose input grew call after call until the GPU ran out of memory (layer 3, data in
rules/verdict.yaml `input_growth`).

A demo that appends every turn to the history it feeds generate() makes transformers warn on each call
"Input length of input_ids is N, but `max_length` is set to M"; when N climbs by orders of magnitude over
the calls and a CUDA out-of-memory follows, the memory ran out because of the input length (the attention
of a 46k-token prompt), not because of the model or batch: the sequence-length warning is the cause and the
out-of-memory its symptom.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr

_LEN = re.compile(r"Input length of (?:decoder_)?input_ids is (\d+)")


def input_grew_before_oom(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                          lang: Optional[str]) -> None:
    if not spec:
        return
    oom = next((f for f in sorted(findings, key=Finding.sort_key)
                if f.severity == "error" and f.role == "cause" and f.category in spec["oom_categories"]), None)
    cause = next((f for f in findings if f.rule_id in spec["rules"] and f.severity != "error"), None)
    if oom is None or cause is None or not cause.same_process(oom):
        return
    sizes = []
    for line, _, text in sorted(scanner.hits.get("input-length", ())):
        m = _LEN.search(text)
        if m and line < oom.line:
            sizes.append(int(m.group(1)))
    if (len(sizes) < int(spec["min_calls"]) or any(b < a for a, b in zip(sizes, sizes[1:]))
            or sizes[-1] < int(spec["min_tokens"]) or sizes[-1] < float(spec["growth"]) * sizes[0]):
        return
    cause.judgement = {"context": "input-grew-before-oom", "severity_was": cause.severity,
                       "reason": tr(spec["reason"], lang, first=sizes[0], last=sizes[-1], calls=len(sizes), line=oom.line)}
    cause.severity = "error"
    cause.captures.setdefault("first_input", str(sizes[0]))
    cause.captures.setdefault("last_input", str(sizes[-1]))
    cause.message += tr(spec["suffix"], lang, first=sizes[0], last=sizes[-1], calls=len(sizes))
    oom.role, oom.priority = "symptom", 0
    oom.judgement = {"context": "input-grew-before-oom", "severity_was": oom.severity,
                     "reason": tr(spec["oom_reason"], lang, first=sizes[0], last=sizes[-1], line=cause.line)}
