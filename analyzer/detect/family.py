"""Which failure family an error no rule knows belongs to (rules/families.yaml).

When no rule explains the exception or death line that ended a job, most of the time it is a new
wording of a known failure: "hipErrorOutOfMemory", "DistStoreError: Timed out ... waiting for
clients", "OSError: [Errno 122] Disk quota exceeded". Rules match messages; families match the
words any library uses for a failure class. Each family's cues carry weights; the family with the
largest total is named when it reaches `min_weight` and leads the runner-up by `margin`, otherwise
the error stays plainly `unknown`. The verdict keeps such a finding's rule id `unknown` and its low
confidence and only sets its category: a family is a lead, not a recognised signature.

Only the verdict calls this, once per scan and only for an unexplained death, so the cues compile
on first use and a log that a rule explains never pays for them.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.ruleset.datafiles import data_file

_COMPILED: dict[str, Any] = {}


def _families() -> dict[str, Any]:
    if not _COMPILED:
        spec = data_file("families.yaml")
        _COMPILED["min"] = int(spec["min_weight"])
        _COMPILED["margin"] = int(spec["margin"])
        # cues are our own data (not user input): stdlib re, case-insensitive; tests check they are RE2-safe
        _COMPILED["cues"] = [(cat, re.compile(c["cue"], re.IGNORECASE), int(c["weight"]), c["cue"])
                             for cat, cues in spec["families"].items() for c in cues]
    return _COMPILED


def scores(text: str) -> list[tuple[int, str, list[str]]]:
    """(total weight, family, the words that matched) for every family with a cue in `text`, best first."""
    fam = _families()
    totals: dict[str, int] = {}
    words: dict[str, list[str]] = {}
    for cat, rx, weight, _ in fam["cues"]:
        m = rx.search(text)
        if m:
            totals[cat] = totals.get(cat, 0) + weight
            words.setdefault(cat, []).append(m.group(0).strip())
    return sorted(((w, c, words[c]) for c, w in totals.items()), key=lambda t: (-t[0], t[1]))


def family_of(text: str, extra: int = 0) -> Optional[tuple[str, list[str]]]:
    """(family, the words that placed it) when one family clearly leads, else None; `extra` raises
    the minimum weight (displacing a recognised signature needs more than naming an unknown)."""
    ranked = scores(text)
    fam = _families()
    if not ranked or ranked[0][0] < fam["min"] + extra:
        return None
    if len(ranked) > 1 and ranked[0][0] - ranked[1][0] < fam["margin"]:
        return None
    return ranked[0][1], ranked[0][2]
