"""A multi-node launch that came up with fewer processes than it asked for: each node trains on its own.

The launch line asks for several nodes or a world size (`srun --nodes=2`, `#SBATCH -N 2`, accelerate's
`--num_machines 2 --num_processes 16`, torchrun's `--nnodes=2`, DeepSpeed's `--num_nodes 2`), and the launcher then
reports a smaller world: DeepSpeed's runner, finding no hostfile, starts "with local resources only" and prints
`nnodes=1` / `dist_world_size=8`, its config print says `world_size .... 8`. Nothing crashes: every node runs
an independent copy of the job (each progress and loss line appears once per node, with the same values), and
the multi-node job is no faster than one node. Only when no error finding explains the run; the requested and
reported values are read from the log's head (rules/verdict.yaml `world_shortfall`, texts in rules/detectors.yaml).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

HEAD_BYTES = 4 << 20    # the launch and the launcher's world report come before training


class WorldShortfall:
    """Collects requested and reported node counts and world sizes from the blocks of the log's head."""

    def __init__(self) -> None:
        self.spec: Optional[dict[str, Any]] = None
        self._rx: dict[str, Any] = {}
        self.values: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        self._seen = 0

    def feed(self, view: bytes, line_base: int) -> None:
        if self.spec is None:
            self.spec = verdict_spec().get("world_shortfall") or {}
            self._rx = {k: re.compile(self.spec[k].encode()) for k in
                        ("asked_nodes", "asked_world", "got_nodes", "got_world") if self.spec.get(k)}
        if not self._rx or self._seen > HEAD_BYTES:
            return
        self._seen += len(view)
        for key, rx in self._rx.items():
            # asked: the largest request; got: the largest world any launcher reported (one bigger report means
            # some process did see the whole world); the line is that value's
            for m in rx.finditer(view):
                value = next((int(g) for g in m.groups() if g), 0)
                if value > self.values.get(key, 0):
                    self.values[key] = value
                    self.lines[key] = line_base + view.count(b"\n", 0, m.start())

    def finding(self, findings: list[Finding], lang: Optional[str]) -> Optional[Finding]:
        v = self.values
        if not self.spec or any(f.severity == "error" for f in findings):
            return None
        nodes = v.get("asked_nodes", 0) >= 2 and v.get("got_nodes") == 1
        world = v.get("asked_world", 0) > v.get("got_world", 0) > 0 and v["asked_world"] % v["got_world"] == 0
        if not (nodes or world):
            return None
        asked = f"{v['asked_world']} processes" if world else f"{v['asked_nodes']} nodes"
        got = f"{v['got_world']} processes" if world and "got_world" in v else "1 node"
        line = self.lines.get("got_world" if world else "got_nodes", 1)
        entry = detector_texts()["world_shortfall"]
        values = {"asked": asked, "got": got, "asked_line": self.lines.get("asked_world" if world else "asked_nodes", 1),
                  "line": line}
        return detector_finding(entry, detector_text(entry, lang), values, line=line, default_priority=45)
