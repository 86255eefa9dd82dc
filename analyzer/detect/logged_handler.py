"""An exception the program caught and logged with `logger.exception(...)`: the handler's own message
("model init on npu failed, fallback to cpu") is printed on the line just above "Traceback (most recent
call last):", so the recovery it announces comes before the exception line, not after it. When such a
message (a `handler` marker of rules/verdict.yaml) heads the traceback and the job made progress after
the exception, the exception is handled, not the job's death."""
from __future__ import annotations

from typing import Any

_HEADER = "Traceback (most recent call last):"


def handled_before(line: int, scanner: Any, spec: dict[str, Any]) -> bool:
    """A recovery message on the line before the traceback that ends at `line`, and progress after it."""
    window = int(spec.get("handler_before_traceback", 0))
    if not window or scanner.last_progress <= line:
        return False
    for h in scanner.hits.get("handler", ()):
        if line - window <= h[0] < line and scanner.line_text(h[0] + 1).strip().endswith(_HEADER):
            return True
    return False
