"""A multi-node launch that came up with fewer processes than it asked for: each node trains on its own.

The launch line asks for several nodes or a world size (`srun --nodes=2`, `#SBATCH -N 2`, accelerate's
`--num_machines 2 --num_processes 16`, torchrun's `--nnodes=2`, DeepSpeed's `--num_nodes 2`), and the launcher then
reports a smaller world: DeepSpeed's runner, finding no hostfile, starts "with local resources only" and prints
`nnodes=1` / `dist_world_size=8`, its config print says `world_size .... 8`. Nothing crashes: every node runs
an independent copy of the job (each progress and loss line appears once per node, with the same values), and
the multi-node job is no faster than one node. Only when no error finding explains the run; the requested and
reported values are read from the log's head by detect/head_cues.py (rules/verdict.yaml `world_shortfall`, texts in
rules/detectors.yaml).
"""
from __future__ import annotations

from typing import Optional

from llmtriage.detect.head_cues import HeadCues
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.findings import Finding


def world_shortfall(cues: HeadCues, findings: list[Finding], lang: Optional[str]) -> Optional[Finding]:
    if any(f.severity == "error" for f in findings):
        return None
    asked_nodes, got_nodes = cues.number("asked_nodes"), cues.number("got_nodes")
    asked_world, got_world = cues.number("asked_world"), cues.number("got_world")
    nodes = asked_nodes >= 2 and got_nodes == 1
    world = asked_world > got_world > 0 and asked_world % got_world == 0
    if not (nodes or world):
        return None
    asked = f"{asked_world} processes" if world else f"{asked_nodes} nodes"
    got = f"{got_world} processes" if world else "1 node"
    line = cues.line("got_world" if world else "got_nodes") or 1
    entry = detector_texts()["world_shortfall"]
    values = {"asked": asked, "got": got, "asked_line": cues.line("asked_world" if world else "asked_nodes") or 1,
              "line": line}
    return detector_finding(entry, detector_text(entry, lang), values, line=line, default_priority=45)
