"""The rank that never connected to the HCCL root (layer 3, data in rules/verdict.yaml `hccl_roster`).

When the root's topology exchange server gives up waiting ("topo exchange server get socket timeout!"), HCCL
prints how many ranks connected and then their ids, eight to a line ("connected rankinfo[LINE 1]:
[0000000000000008],[0000000000000010],..."), and newer releases the number it needed ("need connect rankNum is
[16]"); while it waits it also names the first ranks still missing ("wait sockets rankid: [0000000000000009]").
The missing ids are what the user has to look at: they are added to the finding's message and captures.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr

_ID = re.compile(r"\[(\d{1,16})\]")
_NEED = re.compile(r"need connect rankNum is \[(\d+)\]")
_ROSTER = re.compile(r"connected rankinfo\[LINE \d+\]:(.*)")
_WAITING = re.compile(r"wait sockets rankid:(.*)")


def missing_ranks(scanner: Scanner, connected: Optional[int], most: int) -> list[int]:
    """The rank ids missing from the root's roster: the ones below the rank count it needed (or below the
    highest id it lists) that it does not list; failing a roster, the ids its last wait line named."""
    got: set[int] = set()
    need = 0
    waiting: list[int] = []
    for _, _, text in scanner.hits.get("hccl-roster", ()):
        m = _NEED.search(text)
        if m:
            need = int(m.group(1))
            continue
        m = _ROSTER.search(text)
        if m:
            got.update(int(x) for x in _ID.findall(m.group(1)))
            continue
        m = _WAITING.search(text)
        if m:
            waiting = [int(x) for x in _ID.findall(m.group(1))]
    if got and (connected is None or len(got) == connected):
        top = need or (max(got) + 1)
        return [r for r in range(top) if r not in got][:most]
    return waiting[:most]


def name_missing_ranks(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                       lang: Optional[str]) -> None:
    if not spec:
        return
    for f in findings:
        if f.rule_id not in spec["rules"] or f.severity != "error" or "missing" in f.captures:
            continue
        connected = f.captures.get("connected")
        missing = missing_ranks(scanner, int(connected) if connected and connected.isdigit() else None,
                                int(spec.get("most", 8)))
        if missing:
            ranks = ", ".join(str(r) for r in missing)
            f.captures["missing"] = ranks
            f.message += tr(spec["suffix"], lang, ranks=ranks)
