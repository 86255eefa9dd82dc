"""Finish markers that end only a download before the run (`prelude_finish` in rules/verdict.yaml): `ollama run`
pulls the model first and prints "writing manifest" / "success" for the pull, then loads and runs it. When the
job then died, that pull's end is no run's end, so the action overrides that read `seen: [finish]` ("the run had
finished before the native crash") must not see it."""
from __future__ import annotations

from typing import Any

from llmtriage.detect.spec import verdict_spec


def run_end_seen(scanner: Any, status: str) -> set[str]:
    """`scanner.seen` for the action overrides: without `finish` when the job died and every finish line it
    printed is a prelude's (a model download's end), else unchanged."""
    prelude = set(verdict_spec().get("prelude_finish", ()))
    hits = scanner.finishes()
    if status != "crashed" or not prelude or not hits or any(h[1] not in prelude for h in hits):
        return scanner.seen
    return scanner.seen - {"finish"}
