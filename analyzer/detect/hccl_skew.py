"""An HCCL link that timed out because its peer arrived late, read from the ranks' own timestamps (layer 3, data in
rules/verdict.yaml `hccl_skew` and the `cann-log-line` marker).

HCCL builds a rank's socket links when that rank first runs a collective, and waits HCCL_CONNECT_TIMEOUT (120 s by
default) for the peer to do the same. "wait socket establish timeout" is a broken link (a firewall, a wrong device
IP) only when the peer was there to connect. CANN and MindSpore write every log line as
`[LEVEL] MODULE(pid,tid,process):YYYY-MM-DD-HH:MM:SS.mmm.uuu [source.cc:line]`: when several processes' lines from
the same source location (the same step of graph compile or launch) are in the log, and one process reached that
step more than the connect timeout after another, the ranks arrived apart by more than the timeout: the link
timed out waiting for a slow rank (a longer graph compile, a data load), which is a timeout of the ranks
meeting (nccl-timeout), fixed by making the late rank faster or raising HCCL_CONNECT_TIMEOUT.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import Finding

_LINE = re.compile(r"\((\d+),[0-9a-f]+,[\w.-]+\):(\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d)\.\d+\.\d+ \[([^\]\n]+)\]")


def _skew(hits: list[tuple[int, str, str]]) -> float:
    """The largest spread, over source locations logged by two or more processes, of the time each process first
    reached that location (seconds)."""
    first: dict[str, dict[str, datetime]] = {}
    for _, _, text in hits:
        m = _LINE.search(text)
        if not m:
            continue
        try:
            ts = datetime.strptime(m.group(2), "%Y-%m-%d-%H:%M:%S")
        except ValueError:
            continue
        first.setdefault(m.group(3), {}).setdefault(m.group(1), ts)
    spread = 0.0
    for per_pid in first.values():
        if len(per_pid) >= 2:
            times = sorted(per_pid.values())
            spread = max(spread, (times[-1] - times[0]).total_seconds())
    return spread


def peer_arrived_late(findings: list[Finding], scanner: Any, spec: Optional[dict[str, Any]],
                      lang: Optional[str]) -> None:
    """A link-establish timeout whose ranks reached the same step further apart than its timeout takes
    `spec["category"]` (judgement context `peer-arrived-late`)."""
    if not spec:
        return
    targets = [f for f in findings if f.rule_id in spec["rules"] and f.category != spec["category"]]
    if not targets:
        return
    spread = _skew(scanner.hits.get(spec.get("kind", "cann-line"), []))
    if not spread:
        return
    for f in targets:
        limit = float(f.captures.get("seconds") or spec.get("default_timeout_s", 120))
        if spread > limit:
            f.judgement = {"context": "peer-arrived-late", "severity_was": f.severity, "category_was": f.category,
                           "reason": tr(spec["reason"], lang, spread=int(spread), timeout=int(limit))}
            f.category = spec["category"]
