"""Start-up cues read once from the log's head, for the detectors that judge a run by how it was launched.

A fine-tune's pretrained load and vocabulary size (detect/untrained.py), the library release that scales its
loss (detect/loss_above_uniform.py), the world a multi-node launch asked for and the one its launcher reported
(detect/world_shortfall.py): all are start-up lines, printed before training, so one reader looks at the
first HEAD_BYTES of the log for all of them and each detector judges the cues it needs at the end.

Each cue is a regex of rules/verdict.yaml (CUES names the section and key). `first` keeps the first match:
its line and its first non-empty group (the match's text when it has none); `max` keeps the largest number
any match carries and that match's line (asked: the largest request; got: the largest world any launcher
reported: one bigger report means some process did see the whole world).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Union

from llmtriage.detect.spec import verdict_spec

HEAD_BYTES = 4 << 20    # launch, load, version and vocabulary lines come before training

# cue: (rules/verdict.yaml section, key, how)
CUES = {
    "loads": ("untrained_start", "loads", "first"),
    "vocab": ("untrained_start", "vocab", "first"),
    "version": ("loss_above_uniform", "versions", "first"),
    "asked_nodes": ("world_shortfall", "asked_nodes", "max"),
    "asked_world": ("world_shortfall", "asked_world", "max"),
    "got_nodes": ("world_shortfall", "got_nodes", "max"),
    "got_world": ("world_shortfall", "got_world", "max"),
}


@dataclass
class Cue:
    value: Union[int, str]
    line: int


def _value(m: Any) -> Union[int, str]:
    g = next((g for g in m.groups() if g), None)
    return int(g) if g is not None else m.group(0).decode("utf-8", "replace").strip()


class HeadCues:
    """Collects the cues from the blocks of the log's head (a block observer's `feed`)."""

    def __init__(self) -> None:
        self._rx: Optional[dict[str, tuple[Any, str]]] = None    # compiled on the first block: the scan's data is in place then
        self.cues: dict[str, Cue] = {}
        self._seen = 0

    def _compile(self) -> dict[str, tuple[Any, str]]:
        spec = verdict_spec()
        return {name: (re.compile(spec[sec][key].encode()), how) for name, (sec, key, how) in CUES.items()
                if (spec.get(sec) or {}).get(key)}

    def feed(self, view: bytes, line_base: int) -> None:
        if self._rx is None:
            self._rx = self._compile()
        if self._seen > HEAD_BYTES:
            return
        self._seen += len(view)
        for name, (rx, how) in self._rx.items():
            if how == "first":
                if name not in self.cues and (m := rx.search(view)):
                    self.cues[name] = Cue(_value(m), line_base + view.count(b"\n", 0, m.start()))
                continue
            for m in rx.finditer(view):
                v = _value(m)
                v = v if isinstance(v, int) else 0
                if v > self.number(name):
                    self.cues[name] = Cue(v, line_base + view.count(b"\n", 0, m.start()))

    def line(self, name: str) -> Optional[int]:
        c = self.cues.get(name)
        return c.line if c else None

    def number(self, name: str) -> int:
        c = self.cues.get(name)
        return c.value if c and isinstance(c.value, int) else 0

    def text(self, name: str) -> Optional[str]:
        c = self.cues.get(name)
        return str(c.value) if c else None
