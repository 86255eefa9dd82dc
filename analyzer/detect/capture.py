"""Whether an unexplained exception was raised while the server was capturing CUDA graphs.

Inference servers (vLLM, SGLang, TensorRT-LLM) capture CUDA graphs at start-up and announce it:
"Capturing CUDA graphs (decode, FULL): 8/19", "Capture piecewise CUDA graph begin", then "Graph
capturing finished" / "Capture cuda graph end". An exception no rule knows that is raised after a
capture-start line with no capture-end line in between ("AssertionError: PCG capture stream is not
set", "aiter splitk workspace not initialized for the current CUDA stream") is, in the reports we
read, an operation the captured code cannot do under capture: the compile-error family, whatever its
words. It counts as one more `shapes` entry of the family vote (detect/family.py), with its weight,
family and the markers in rules/verdict.yaml `unknown.family.capture`; a message that names another
failure (`unless`: out of memory, an NCCL error) is left to its own words.
"""
from __future__ import annotations

import re
from typing import Any

from llmtriage.detect.spec import verdict_spec

def capture_shape(scanner: Any, line: int, message: str) -> list[tuple[str, int, str]]:
    """[(family, weight, name)] when line `line` (1-based) follows a capture-start line within
    `window` lines with no capture-end line after it, and `message` names no other failure; else []."""
    spec = verdict_spec()["unknown"]["family"].get("capture")
    if not spec or scanner is None or line <= 0:
        return []
    if spec.get("unless") and re.search(spec["unless"], message or "", re.IGNORECASE):
        return []
    # our own data (rules/verdict.yaml): stdlib re, whose cache keeps the compiled patterns between calls
    start, end = re.compile(spec["start"].encode(), re.IGNORECASE), re.compile(spec["end"].encode(), re.IGNORECASE)
    capturing = False
    for n, raw in scanner.rows(max(0, line - int(spec["window"]))):
        if n >= line:
            break
        s = [m.start() for m in start.finditer(raw)]
        e = [m.start() for m in end.finditer(raw)]
        if s and (not e or s[-1] > e[-1]):      # a row may hold several `\r` states of one bar
            capturing = True
        elif e:
            capturing = False
    return [(spec["family"], int(spec["weight"]), spec["name"])] if capturing else []
