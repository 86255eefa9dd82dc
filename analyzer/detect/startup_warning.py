"""Whether an unexplained start-up exception follows a warning that the GPU lacks a capability.

A server or trainer that finds the GPU too old for a fast path often only warns and takes another path
("Unable to use Flash Attention V2: GPU with CUDA capability 7 5 is not supported", "... requires compute
capability >= 8.0, falling back to ..."); the fallback path then lacks something the configuration needs and
raises an error that names neither the GPU nor its capability ("NotImplementedError: awq quantization is not
supported for AutoModel"). In the reports we read, the cause is the GPU's architecture: the warning is the
root cause and the exception its symptom. Warnings are left out of an unknown's context everywhere else
(detect/scanner.py), because most are noise; this reads one kind only, and only when:
  * the exception's own words say something is unsupported / not implemented / unavailable (`link`),
  * a warning row (`warning`) naming a GPU capability or architecture limit (`cue`) stands among the `window`
    lines before the exception,
  * and no progress line (a step, a request served) stands between them: the same start-up.
It counts as one more `shapes` entry of the family vote (detect/family.py), with the weight, family and
patterns of rules/verdict.yaml `unknown.family.startup_warning`.
"""
from __future__ import annotations

import re
from typing import Any

from llmtriage.detect.spec import verdict_spec


def startup_warning_shape(scanner: Any, line: int, message: str) -> list[tuple[str, int, str]]:
    """[(family, weight, name)] when line `line` (1-based) raised an exception whose words (`message`) say
    something is unsupported and a GPU-capability warning of the same start-up stands before it; else []."""
    spec = verdict_spec()["unknown"]["family"].get("startup_warning")
    if not spec or scanner is None or line <= 0 or not re.search(spec["link"], message or "", re.IGNORECASE):
        return []
    # our own data (rules/verdict.yaml): stdlib re, whose cache keeps the compiled patterns between calls
    warn, cue = re.compile(spec["warning"].encode(), re.IGNORECASE), re.compile(spec["cue"].encode(), re.IGNORECASE)
    found = False
    for n, raw in scanner.rows(max(0, line - int(spec["window"]))):
        if n >= line:
            break
        if found and scanner.is_progress(raw):
            found = False           # the job went on past the warning: not this start-up's cause
        elif warn.search(raw) and cue.search(raw):
            found = True
    return [(spec["family"], int(spec["weight"]), spec["name"])] if found else []
