"""A rank that left the training loop while the others waited in a collective (layer 3, data in rules/verdict.yaml
`rank_left_early` and the `rank-data-exhausted` marker).

Data-parallel ranks must run the same number of steps: when one rank's shard or iterator runs out first ("[rank3]
epoch 0 finished after 18 batches", "StopIteration"), it leaves the loop (validation, saving, exit) and the other
ranks wait in their next gradient all-reduce until the watchdog's timeout. The timeout names the waiting ranks;
a rank missing from them that reported the end of its data just before is the one that left. The timeout is then
no transient fault: every rerun ends the epoch the same way until the ranks get the same number of batches
(a DistributedSampler, drop_last, equal shards, or a join context).

The fact (`rank_left_early.fact`) is added to the markers `seen` by the action overrides (rules/actions.yaml
`rank-ran-out-of-data`).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.findings import Finding

_RANK = re.compile(r"^\[rank(\d+)\]|\brank[ :=]+(\d+)\b", re.IGNORECASE)


def rank_left_early(findings: list[Finding], scanner: Any, spec: Optional[dict[str, Any]]) -> bool:
    """True when a rank that is not among a collective timeout's waiting ranks reported the end of its data
    within `window` lines before the timeout."""
    if not spec:
        return False
    window = int(spec.get("window", 60))
    hits = [h for h in scanner.hits.get("rank-left", ()) if h[1] == spec.get("marker", "rank-data-exhausted")]
    if not hits:
        return False
    for f in findings:
        if f.severity != "error" or f.category not in spec.get("categories", ("nccl-timeout",)) or not f.ranks:
            continue
        waiting = set(f.ranks)
        for line, _, text in hits:
            if not (f.line - window <= line < f.line):
                continue
            m = _RANK.search(text)
            rank = m.group(1) or m.group(2) if m else None
            if rank is not None and int(rank) not in waiting:
                return True
    return False
