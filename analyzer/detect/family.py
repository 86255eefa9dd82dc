"""Which failure family an error no rule knows belongs to (rules/families.yaml).

When no rule explains the exception or death line that ended a job, most of the time it is a new
wording of a known failure: "hipErrorOutOfMemory", "DistStoreError: Timed out ... waiting for
clients", "OSError: [Errno 122] Disk quota exceeded". Rules match messages; families match the
words any library uses for a failure class. Each family's cues carry weights; the family with the
largest total is named when it reaches `min_weight` and leads the runner-up by `margin`, otherwise
the error stays plainly `unknown`. The verdict keeps such a finding's rule id `unknown` and its low
confidence and only sets its category: a family is a lead, not a recognised signature.

Words are not all the evidence: an exception's type and where it was raised say something its
message may not ("AttributeError: 'AdamW' object has no attribute 'train'" names no failure class,
but an attribute a library object lacks is, in bug reports, nearly always two library releases that
do not match). `shape_cues` reads those (families.yaml `shapes`) and its weights add to the words'.

Only the verdict calls this, once per scan and only for an unexplained death, so the cues compile
on first use and a log that a rule explains never pays for them.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional

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
        _COMPILED["deep"] = int(spec.get("frames_deep", 3))
        _COMPILED["shapes"] = [
            (s["family"], int(s["weight"]), s["name"],
             *(re.compile(s[k], re.IGNORECASE if k != "type" else 0) if s.get(k) else None
               for k in ("type", "message", "unless", "frames", "innermost", "code", "code_unless", "within")),
             bool(s.get("own_class")), bool(s.get("below_entry")), bool(s.get("between_packages")))
            for s in spec.get("shapes") or ()]
    return _COMPILED


def shape_cues(exc_type: str, message: str, frame_files: list[str], code: str = "",
               calls: Iterable[str] = ()) -> list[tuple[str, int, str]]:
    """(family, weight, name) for every `shapes` entry of families.yaml the exception fits: its
    type's last name fully matches `type`, its message contains `message` and not `unless`, one
    of its innermost `frames_deep` frames' files contains `frames`, and the innermost frame's file
    (where it was raised) contains `innermost`, the innermost frame's source line (`code`) contains
    `code` and not `code_unless`, with `own_class` it was raised in the file named after the object's class
    (raised_in_own_class), and with `below_entry` it was raised in another file than the outermost
    frame's (not in the script that was run), with `between_packages` every frame is in installed packages,
    at least two of them (between_packages), and `within` matches one of `calls` ("<file> <function>" of every
    frame, at any depth: raised somewhere below a Dataset's __getitem__) (each when given)."""
    fam = _families()
    short = exc_type.rsplit(".", 1)[-1]
    deep = frame_files[-fam["deep"]:] if frame_files else []
    out = []
    calls = list(calls)
    for family, weight, name, type_rx, msg_rx, unless_rx, frames_rx, inner_rx, code_rx, code_not, within_rx, own, below, \
            between in fam["shapes"]:
        if type_rx is not None and not type_rx.fullmatch(short):
            continue
        if msg_rx is not None and not msg_rx.search(message):
            continue
        if unless_rx is not None and unless_rx.search(message):
            continue
        if frames_rx is not None and not any(frames_rx.search(f) for f in deep):
            continue
        if inner_rx is not None and not (deep and inner_rx.search(deep[-1])):
            continue
        if own and not (deep and (raised_in_own_class(message, deep[-1]) or read_before_init(message, code, deep[-1], calls))):
            continue
        if (code_rx is not None and not code_rx.search(code)) or (code_not is not None and code_not.search(code)):
            continue
        if within_rx is not None and not any(within_rx.search(c) for c in calls):
            continue
        if below and not (len(frame_files) > 1 and frame_files[0] != frame_files[-1]):
            continue
        if between and not between_packages(frame_files):
            continue
        out.append((family, weight, name))
    return out


_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z_][\w.-]*)")


def between_packages(frame_files: list[str]) -> bool:
    """Every frame of the traceback is in installed packages (no file of the user's own is on the stack: a
    framework CLI ran), and they are at least two packages: one library's code called another's."""
    files = [f for f in frame_files if not f.startswith("<") and "runpy" not in f]
    pkgs = [_INSTALLED.search(f) for f in files]
    return bool(files) and all(pkgs) and len({m.group(1).split(".")[0] for m in pkgs if m}) >= 2


_OBJECT = re.compile(r"'(\w+)' object has no attribute")


def raised_in_own_class(message: str, innermost_file: str) -> bool:
    """Whether "'<Class>' object has no attribute ..." was raised in the file named after that class
    (MegatronPolicyWorker in megatron_policy_worker.py): the class's own method read an attribute of
    its own that a configuration path never set, not a caller written for another release of it."""
    m = _OBJECT.search(message)
    if m is None or not innermost_file:
        return False
    stem = re.split(r"[/\\]", innermost_file)[-1].rsplit(".", 1)[0].lower().replace("_", "")
    return stem == m.group(1).lower()     # (DTensorPolicyWorker: dtensor_policy_worker.py)


_MISSING = re.compile(r"object has no attribute '(\w+)'")


def read_before_init(message: str, code: str, innermost_file: str, calls: list[str]) -> bool:
    """Whether "'<Class>' object has no attribute '<a>'" was raised on a line reading `self.<a>`, in a method that a
    constructor of the same file called (ROLL's DynamicSamplingScheduler.__init__ calling a method that reads
    self.dataset_iter before assigning it): the object read its own state before its constructor set it."""
    m = _MISSING.search(message)
    if m is None or not innermost_file or not re.search(r"\bself\." + m.group(1) + r"\b", code):
        return False
    # (read in the constructor itself, the attribute is one a base class or a build step was to set: Florence-2's
    # config reading self.forced_bos_token_id that another transformers release sets, DeepSpeedCPUAdam's op handle)
    return bool(calls) and not calls[-1].endswith(" __init__") and f"{innermost_file} __init__" in calls[:-1]


def scores(text: str, shapes: Iterable[tuple[str, int, str]] = ()) -> list[tuple[int, str, list[str]]]:
    """(total weight, family, the words that matched) for every family with a cue in `text` or a
    `shapes` entry (shape_cues), best first."""
    fam = _families()
    totals: dict[str, int] = {}
    words: dict[str, list[str]] = {}
    for cat, weight, name in shapes:
        totals[cat] = totals.get(cat, 0) + weight
        words.setdefault(cat, []).append(name)
    for cat, rx, weight, _ in fam["cues"]:
        m = rx.search(text)
        if m:
            totals[cat] = totals.get(cat, 0) + weight
            words.setdefault(cat, []).append(m.group(0).strip())
    return sorted(((w, c, words[c]) for c, w in totals.items()), key=lambda t: (-t[0], t[1]))


def family_of(text: str, extra: int = 0, shapes: Iterable[tuple[str, int, str]] = ()) -> Optional[tuple[str, list[str]]]:
    """(family, the words that placed it) when one family clearly leads, else None; `extra` raises
    the minimum weight (displacing a recognised signature needs more than naming an unknown)."""
    ranked = scores(text, shapes)
    fam = _families()
    if not ranked or ranked[0][0] < fam["min"] + extra:
        return None
    if len(ranked) > 1 and ranked[0][0] - ranked[1][0] < fam["margin"]:
        return None
    return ranked[0][1], ranked[0][2]
