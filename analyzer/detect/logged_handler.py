"""An exception the program caught and logged with `logger.exception(...)`: the handler's own message
("model init on npu failed, fallback to cpu") is printed on the line just above "Traceback (most recent
call last):", so the recovery it announces comes before the exception line, not after it. When such a
message (a `handler` marker of rules/verdict.yaml) heads the traceback and the job made progress after
the exception, the exception is handled, not the job's death."""
from __future__ import annotations

from typing import Any

_HEADER = "Traceback (most recent call last):"


def handled_before(line: int, scanner: Any, spec: dict[str, Any], later: int = 0, names: Any = None) -> bool:
    """A recovery message on the line before the traceback that ends at `line`, and progress after it
    (or `later`, the line of a later death: the program went on past this exception and died of another);
    `names`: only these handler markers count."""
    window = int(spec.get("handler_before_traceback", 0))
    if not window or max(scanner.last_progress, later) <= line:
        return False
    for h in scanner.hits.get("handler", ()):
        if (names is None or h[1] in names) and line - window <= h[0] < line and scanner.line_text(h[0] + 1).strip().endswith(_HEADER) and not any(
                scanner.line_text(n).strip().endswith(_HEADER) for n in range(h[0] + 2, line)):
            return True     # (and that traceback is the one ending at `line`: no other one began in between)
    return False
