"""Log files the user printed after the job: a `pasted` marker of rules/verdict.yaml (`+ grep ... plog`,
`$ tail train.log`) starts output that was written before the command ran, so its lines are not the
consequences of a death printed above them (the after-death demotion in verdict.py skips them)."""
from __future__ import annotations

from typing import Any, Optional


def pasted_after(scanner: Optional[Any], line: int) -> Optional[int]:
    """The line of the first command after `line` that prints an earlier log file, if any."""
    if scanner is None:
        return None
    later = [h[0] for h in scanner.hits.get("pasted", ()) if h[0] > line]
    return min(later) if later else None
