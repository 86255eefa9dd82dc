"""The root cause does not depend on how a launcher or logger prefixes lines.

Every fixture is re-scanned with each line behind a rank, Ray actor, pdsh host, `srun -l`,
Kubernetes time-stamp prefix, and with CRLF endings: the top error category (or none) must not change.
Slow tier (about 18,000 scans, under a minute: a sample of every 4th fixture shifted whenever a
fixture was added, so a rule that was not prefix-tolerant surfaced only on an unrelated merge)."""
from __future__ import annotations

from pathlib import Path

import pytest

from llmtriage import scan_source

ROOT = Path(__file__).resolve().parents[1]
LOGS = [p for p in sorted((ROOT / "fixtures").rglob("*.log"))
        if p.relative_to(ROOT / "fixtures").parts[0] not in ("jobs", "reproduced")]
PREFIXES = {
    "rank": lambda line: b"[rank3]: " + line,
    "ray": lambda line: b"(RayTrainWorker pid=4123) " + line,
    "host": lambda line: b"gpu-node-07: " + line,
    "srun": lambda line: b"3: " + line,
    "k8s-time": lambda line: b"2025-11-18T09:02:11.402812345Z " + line,
    "crlf": lambda line: line + b"\r",
}


def _top(engine, data: bytes) -> str:
    errors = [f for f in scan_source(engine, data).findings if f.severity == "error"]
    return errors[0].category if errors else "none"


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(PREFIXES))
def test_top_category_survives_line_prefixes(engine, kind):
    wrap = PREFIXES[kind]
    changed = []
    for path in LOGS:
        raw = path.read_bytes()
        if b"\x00" in raw[:200]:          # UTF-16 fixtures: a byte prefix would not be text
            continue
        base = _top(engine, raw)
        got = _top(engine, b"\n".join(wrap(line) if line else line for line in raw.split(b"\n")))
        if got != base:
            changed.append((path.name, base, got))
    assert not changed, changed
