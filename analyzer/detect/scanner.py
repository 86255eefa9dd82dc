"""Status evidence, block by block: the markers of rules/verdict.yaml (death, finish, progress,
recovery, training, context) found in each block the matcher reads, for the verdict (verdict.py).

One pass per block finds every marker literal at once (a compiled alternation: RE2 when
installed); a marker's regex then runs only on the lines holding one of its literals. Progress is
only needed as "the last progress line": its literals are looked up from the block's end. The last
two blocks are kept so the verdict can read the lines around a death (error context, step counters).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Any, Optional

from llmtriage.detect.spec import compiled, verdict_spec
from llmtriage.engine.fastre import UNANCHORED, raw_of
from llmtriage.engine.logparse import split_prefix

try:  # pragma: no cover - exercised when google-re2 is installed
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

MAX_HITS = 256           # per marker kind: the last ones are kept (bounded memory on retry spam)
_PER_BLOCK = 64          # hits taken from one block per marker
_PROGRESS_TRIES = 4      # progress: last occurrences of a literal tried per block
_CANDIDATES = 512        # literal hits looked at per block (bounded cost when every line is a hit)
_PROGRESS_TAIL = 8192    # progress literals are first looked for in the last bytes of a block
# step counters that a process prints as it works: a tqdm bar "n/total [", Megatron's
# "iteration n/total |", "step n" / "global_step=n" (keyed by the bar's total, or by the word; not a
# metric named ".../step" or a number with decimals: "timing_s/step:118.9" is a duration)
_LOADING = re.compile(rb"\b[Ll]oading\b")      # the same words the tqdm-step progress marker leaves out
_COUNTER = re.compile(rb"\b(\d+)/(\d+) \[[0-9:]+<|\biteration\s+(\d+)\s*/\s*(\d+)\s*\||(?<![/.\w])(?i:(global_step|step)\b)\s*[=:\[]?\s*(\d+)\b(?!\.\d)"
                      rb"""|['"]epoch['"]\s*:\s*['"]?(\d+(?:\.\d+)?)"""   # a Trainer record's epoch, in thousandths
                      # mmcv / the PyTorch examples: "Epoch [1][100/368]", "Epoch: [0][ 250/5005]" (iterations run)
                      rb"""|\b[Ee]poch:? \[ *(\d+)\]\[ *(\d+)/(\d+)\]""")


_DISTINCT_KEYS = 4096     # keys a keyed `distinct` marker tracks at most (a long log's sequence numbers)


@dataclass(frozen=True)
class Marker:
    name: str
    kind: str
    literals: tuple[bytes, ...]
    source: bytes
    tail: int = 0          # a death marker that counts only within this many lines of the log's end (0: anywhere)
    # (group, min, key): the marker is seen only once its regex's named `group` took `min` distinct values (a port
    # error reported by two hosts is a fabric-wide flap, by one host that node's link); with a `key` group, counted
    # per value of that group (ranks that timed out at one sequence number in different collectives)
    distinct: Optional[tuple[str, int, Optional[str]]] = None
    from_match: bool = False   # the hit's kept text starts where the regex matched, not at the line's start

    @property
    def regex(self) -> Any:
        """Compiled on first use: a marker whose literals never occur costs nothing at start-up."""
        return _marker_rx(self.source)


@lru_cache(maxsize=256)
def _marker_rx(source: bytes) -> Any:
    return re.compile(source, re.MULTILINE)


@lru_cache(maxsize=1)
def markers() -> tuple[Marker, ...]:
    return tuple(Marker(m["name"], m["kind"], tuple(lit.encode() for lit in m["literals"]), m["regex"].encode(),
                        int(m.get("tail", 0)),
                        (m["distinct"]["group"], int(m["distinct"]["min"]), m["distinct"].get("key"))
                        if m.get("distinct") else None, bool(m.get("from_match")))
                 for m in verdict_spec()["markers"])


def _line_at(view: bytes, pos: int) -> tuple[int, int]:
    start = view.rfind(b"\n", 0, pos) + 1
    end = view.find(b"\n", pos)
    return start, len(view) if end < 0 else end


@lru_cache(maxsize=16)
def _literal_gate(marks: tuple[Marker, ...], skip: frozenset[str]) -> tuple[Any, tuple[Marker, ...], "_Owners"]:
    """One compiled alternation of the literals of `marks`, leaving out training/context facts
    already in `skip`, the markers it covers, and for each literal the markers that may hold a
    literal on a line where the gate matched it (see `_overlapping`)."""
    active = tuple(m for m in marks if not (m.kind in ("training", "context") and m.name in skip))
    lits = sorted({lit for m in active for lit in m.literals}, key=len, reverse=True)
    if not lits:
        return None, active, {}
    pattern = b"|".join(re.escape(lit) for lit in lits)
    return (_re2.compile(pattern) if _re2 is not None else re.compile(pattern)), active, _Owners(active, lits)


class _Owners(dict):
    """literal -> the markers (indices in `active`) to check on a line where the gate matched it; filled on first use, so
    start-up pays only for the literals a log holds."""

    def __init__(self, active: tuple[Marker, ...], lits: list[bytes]) -> None:
        super().__init__()
        self.active, self.lits = active, lits

    def __missing__(self, lit: bytes) -> tuple[int, ...]:
        near = _overlapping(lit, self.lits)
        self[lit] = found = tuple(i for i, m in enumerate(self.active) if not near.isdisjoint(m.literals))
        return found


def _overlapping(lit: bytes, lits: list[bytes]) -> frozenset[bytes]:
    """The literals whose occurrence the gate may have reported as a match of `lit` instead: the gate
    reports non-overlapping leftmost(-longest) matches, so another literal can hide only inside a
    match of `lit` (a substring of it) or start inside it and run past its end (a suffix of `lit` is
    a prefix of it). Every other literal on the line is a match of its own."""
    return frozenset(x for x in lits if x in lit or any(x.startswith(lit[k:]) for k in range(1, len(lit))))


# (and a glog / abseil FATAL record, behind any rank prefix, "F0223 07:56:56.271731 ... file.cc:104] msg" or TensorFlow's
# "2022-02-23 07:56:56.271731: F path/file.inc:104] msg", whose message need not say "error")
_ERRORISH = re.compile(rb"(?i)\b(?:error|errors|fail|failed|failure|exception|fatal|abort(?:ed)?|cannot|unable)\b|\bwhat\(\)"
                       rb"|(?-i:(?:^|\s)F\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w./-]+:\d+\]|\d\d\.\d+: F [\w./-]+:\d+\] )")
# warnings are the usual trap; frames are code; Hydra's "Error executing job with overrides: [...]"
# is the command line (data paths, config keys), not an error message
_FRAME = re.compile(rb'File "[^"\n]+", line \d+')      # a traceback frame (behind any rank/actor prefix)
_NOT_CONTEXT = re.compile(rb"(?i)warn|^\s*File \"|^\s*Traceback|Error executing job with overrides")
# a command line echoed by the shell or a launcher (`+ python3 -m ...` under set -x, `$ bash run.sh`,
# three Hydra overrides `data.train_files=x.parquet`, four `--flag value` options) is the job's
# configuration: its words (`truncation=error`, `.parquet`) describe no failure
_COMMAND_LINE = re.compile(rb"^\s*(?:\d+:\s*)?(?:\+{1,3}|\$) \S|(?:\s[\w-]+(?:\.[\w-]+)+=\S+){3}"
                           rb"|(?:\s--[a-zA-Z][\w-]*(?:[= ][^\s-]\S*)?){4}")


# a line that starts a new log record rather than continuing the message above it
_NEW_RECORD = re.compile(r"\s*(?:\[|\(|\d{2,4}[-/:]\d|[IWEFD]\d{4} |(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b"
                         r"|Traceback|[\w.-]+@[\w.-]+:)")

# torch_npu follows its RuntimeError with the CANN error block that says what failed: "[ERROR] ... ERR00100
# PTA call acl api failed", then "EI9999: Inner Error!" and its detail, whose lines end in CANN's source
# location ("[AIC_INFO] args(0 to 9) after execute:... [FUNC:GetError][FILE:stream.cc][LINE:1082]")
_NPU_DETAIL = re.compile(r"\bERR\d{5}\b|^\s*E[A-Z0-9]\d{4}[:\s]|\[FUNC:\w+\]\[FILE:[\w.]+\]")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").strip()[:300]


def _shown(raw: bytes) -> bytes:
    """What a terminal shows of one line: a `\r` progress bar's last non-empty state."""
    if b"\r" not in raw:
        return raw
    parts = [p for p in raw.split(b"\r") if p.strip()]
    return parts[-1] if parts else b""


class Scanner:
    """Collects status evidence block by block (fed by the matcher beside its observers).

    One pass per block finds every marker literal at once (a compiled alternation: RE2 when
    installed); a marker's regex then runs only on the lines holding one of its literals. Progress
    is only needed as "the last progress line": its literals are looked up from the block's end."""

    def __init__(self) -> None:
        self.markers = markers()
        self.hits: dict[str, list[tuple[int, str, str]]] = {}
        self.seen: set[str] = set()
        self._last_prog: Optional[tuple[int, bytes, int]] = None
        self.last_progress_name = ""                  # the marker of the last progress line
        self._progress_markers = [m for m in self.markers if m.kind == "progress"]
        self._others = tuple(m for m in self.markers if m.kind != "progress")
        self._gate, self._active, self._owners = _literal_gate(self._others, frozenset())
        self._gate_raw = raw_of(self._gate)
        self._plans: dict[tuple[frozenset[bytes], bool], tuple[tuple[Marker, Optional[tuple[bytes, ...]]], ...]] = {}
        self._progress_gate = _literal_gate(tuple(self._progress_markers), frozenset())[0]
        self._tail: list[tuple[int, bytes]] = []      # the last two blocks: what a death line followed
        self._tail_lines: list[tuple[int, bytes]] = []   # the same blocks with `\r` kept (one row per line)
        self._distinct: dict[tuple[str, bytes], set[bytes]] = {}   # a `distinct` marker's values so far (per key)

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        self._tail = [*self._tail[-1:], (line_base, view)]
        self._tail_lines = [*self._tail_lines[-1:], (line_base, lines)]
        self._progress(lines, view, line_base)
        if self._gate is None:
            return
        cands: dict[tuple[int, int], set[bytes]] = {}
        cut = None         # the line of the last hit taken when the block has more: its other literals may be unseen
        for n, (s, e) in enumerate(self._hits(view)):
            if n >= _CANDIDATES:
                cut = line
                break
            line = _line_at(view, s)
            cands.setdefault(line, set()).add(view[s:e])
        spans: dict[Marker, list[tuple[int, int]]] = {}
        plans = self._plans
        for (a, b), found_lits in sorted(cands.items()):   # every marker with a literal on the line
            key = (frozenset(found_lits), cut == (a, b))
            plan = plans.get(key)
            if plan is None:
                plans[key] = plan = self._plan(found_lits, key[1])
            text = view[a:b]
            for m, check in plan:
                if check is None or any(lit in text for lit in check):
                    spans.setdefault(m, []).append((a, b))
        changed = False
        for m, todo in spans.items():
            found = 0
            for a, b in todo:
                hit = m.regex.search(view, a, b)
                if not hit:
                    continue
                if m.distinct is not None:
                    key = (hit.group(m.distinct[2]) or b"") if m.distinct[2] else b""
                    if (m.name, key) not in self._distinct and len(self._distinct) >= _DISTINCT_KEYS:
                        continue
                    values = self._distinct.setdefault((m.name, key), set())
                    values.add(hit.group(m.distinct[0]) or b"")
                    if len(values) < m.distinct[1]:
                        continue
                self.seen.update((m.name, m.kind))
                if m.kind in ("training", "context"):
                    changed = True
                    break
                kept = self.hits.setdefault(m.kind, [])
                kept.append((line_base + lines.count(b"\n", 0, a), m.name, _text(view[hit.start() if m.from_match else a:b])))
                if len(kept) > 2 * MAX_HITS:
                    del kept[:-MAX_HITS]
                found += 1
                if found >= _PER_BLOCK:
                    break
        if changed:     # a training/context fact is known once: stop looking for its literals
            self._gate, self._active, self._owners = _literal_gate(self._others, frozenset(self.seen))
            self._gate_raw = raw_of(self._gate)
            self._plans = {}

    def _hits(self, view: bytes) -> Iterator[tuple[int, int]]:
        """(start, end) of the gate's matches in `view`, as `finditer` gives them (a bare RE2 call per match)."""
        raw = self._gate_raw
        if raw is None:
            for hit in self._gate.finditer(view):
                yield hit.span()
            return
        pos, end, match = 0, len(view), raw.Match
        while True:
            sp = match(UNANCHORED, view, pos, end)[0]
            if sp[0] < 0:
                return
            yield sp
            if pos == end:
                return
            pos = pos + 1 if pos == sp[1] else sp[1]

    def _plan(self, found_lits: set[bytes], cut: bool) -> tuple[tuple[Marker, Optional[tuple[bytes, ...]]], ...]:
        """The markers to look at on a line where the gate found `found_lits`, in the order of `_active`, each with
        the literals to look for on the line (None: one of its literals is part of a found one, so it is there).
        A literal of the line the gate did not report lies in a reported match (see `_overlapping`): only those
        are looked for, unless the line is where the block's candidates were `cut` off."""
        owners = self._owners[next(iter(found_lits))] if len(found_lits) == 1 else \
            sorted({i for lit in found_lits for i in self._owners[lit]})
        near = frozenset().union(*(_overlapping(found, self._owners.lits) for found in found_lits))
        out = []
        for m in map(self._active.__getitem__, owners):
            if any(lit in found for lit in m.literals for found in found_lits):
                out.append((m, None))
            else:
                out.append((m, m.literals if cut else tuple(lit for lit in m.literals if lit in near)))
        return tuple(out)

    def _progress(self, lines: bytes, view: bytes, line_base: int) -> None:
        tail = max(0, len(view) - _PROGRESS_TAIL)
        best, name = -1, ""
        for m in self._progress_markers:
            for lit in m.literals:
                end = len(view)
                for _ in range(_PROGRESS_TRIES):
                    pos = view.rfind(lit, tail, end)
                    if pos < 0 or pos <= best:
                        break
                    a, b = _line_at(view, pos)
                    if m.regex.search(view, a, b):
                        best, name = a, m.name
                        self.seen.update((m.name, m.kind))
                        break
                    end = a
        if best < 0 and self._progress_gate is not None:    # none near the end: the whole block, one pass
            for hit in self._progress_gate.finditer(view, 0, tail):
                a, b = _line_at(view, hit.start())
                m = next((m for m in self._progress_markers if m.regex.search(view, a, b)), None) if a > best else None
                if m is not None:
                    best, name = a, m.name
        if best >= 0:
            self.seen.add("progress")
            self._last_prog = (line_base, lines, best)     # its line number is counted when asked
            self.last_progress_name = name

    def continuation_after(self, line: int, limit: int) -> int:
        """How many of the `limit` lines after `line` (1-based) continue its message: non-blank lines
        that open no new record (no time stamp, log level, rank prefix or traceback), as NCCL's
        "ncclInvalidUsage ... / Last error: / Duplicate GPU detected ..." goes on below its exception."""
        rows: dict[int, bytes] = {}
        for base, blk in self._tail_lines:
            for n, raw in enumerate(blk.split(b"\n"), start=base):
                if line < n <= line + limit:
                    rows[n] = raw.rstrip(b"\r").rsplit(b"\r", 1)[-1]     # a redrawn line: its last state
        k = 0
        while line + k + 1 in rows:
            text = split_prefix(_text(rows[line + k + 1])).text     # "node02: [rank5]: Last error:" continues
            if not text.strip() or (_NEW_RECORD.match(text) and not _NPU_DETAIL.search(text)):
                break
            k += 1
        return k

    def error_lines_around(self, line: int, after: int = 0) -> str:
        """The error lines among the `family.context_lines` lines before `line` (1-based) and the
        `after` lines after it, when they are still in the last two blocks: what a framework printed
        around an opaque death ("Engine process failed to start. See stack trace", "The Inner error
        is reported as above", a C++ terminate whose what() follows)."""
        spec = verdict_spec()["unknown"]["family"]
        want, keep = int(spec["context_lines"]), int(spec["context_keep"])
        # (not before the job's last restart from its checkpoint: that is an earlier run's output)
        start = max([line - want, *(h[0] for h in self.hits.get("resume", ()) if h[0] < line)])
        rows: list[bytes] = []
        prev = b""
        for n, raw in self._rows():
            if start <= n <= line + after and n != line and not _FRAME.search(prev):
                rows.append(_shown(raw))     # (not the source line under a frame: that is code, not a message)
            prev = raw
        picked = [r for r in rows if _ERRORISH.search(r) and not _NOT_CONTEXT.search(r) and not _COMMAND_LINE.search(r)]
        return "\n".join(_text(r) for r in picked[-keep:])

    def steps_after(self, line: int, before_lines: int = 200, epochs: bool = True, fresh: bool = False) -> int:
        """How many steps a step counter went on after line `line` (1-based), compared with its last
        value in the `before_lines` lines before it (or, when no counter shows before the line at all,
        with its first value after it), when both are in the last two blocks. A process that died
        there cannot advance its own counter; the other ranks of a collective job stop within one
        step of it. `epochs=False`: only step counters (a Trainer record's epoch counts thousandths).
        `fresh`: only a counter absent before the line that starts after it at 0 or 1 (a relaunch from scratch)."""
        before: dict[bytes, int] = {}
        after: dict[bytes, int] = {}
        first: dict[bytes, int] = {}
        done: set[bytes] = set()     # bars that reached their total before the line
        after_rows: set[tuple[int, bool]] = set()
        for n, raw in self._rows(line - before_lines):
            if n == line or (b"oading" in raw and _LOADING.search(raw)):   # a loading bar (checkpoint shards) is no step of the work
                continue
            for m in _COUNTER.finditer(raw):
                if m.group(1):
                    key, value = b"bar/" + m.group(2), int(m.group(1))
                elif m.group(3):
                    key, value = b"iteration/" + m.group(4), int(m.group(3))
                elif m.group(5):
                    key, value = m.group(5).lower(), int(m.group(6))
                elif m.group(8):
                    key, value = b"epoch-iter", int(m.group(8)) * int(m.group(10)) + int(m.group(9))
                elif epochs:
                    key, value = b"epoch", int(float(m.group(7)) * 1000)
                else:
                    continue
                if n < line:
                    if m.group(1) and m.group(1) == m.group(2):
                        done.add(key)
                        continue    # a bar already at its total (tokenizing done) is no running counter
                    before[key] = value
                elif m.group(1) and m.group(1) == m.group(2) and key in done:
                    continue        # that bar redrawn at its total (tqdm closing it at exit) is no progress
                else:
                    after[key] = max(after.get(key, value), value)
                    first.setdefault(key, value)
                    after_rows.add((n, bool(m.group(1))))
        if len(after_rows) == 1 and next(iter(after_rows)) in {(line + 1, True), (line + 2, True)}:
            return 0    # one bar drawn right under the error and nothing after: tqdm closing it at exit
        if fresh:
            return max((v - first[k] for k, v in after.items() if k not in before and first[k] <= 1), default=0)
        if before:    # a bar that only starts after the error (an evaluation bar) is not the same counter
            return max((v - before[k] for k, v in after.items() if k in before), default=0)
        # no counter before the line at all: one that shows only after it counts from its first value there
        return max((v - first[k] for k, v in after.items()), default=0)

    def line_text(self, line: int) -> str:
        """Line `line` (1-based) of the input when it is still in the last two blocks, else ''."""
        for n, raw in self._rows(line):
            if n == line:
                return _text(_shown(raw))
            if n > line:
                break
        return ""

    def rows(self, first: int = 0) -> Iterator[tuple[int, bytes]]:
        """(line number, raw row) of the last two blocks from line `first` on."""
        return self._rows(first)

    def _rows(self, first: int = 0) -> Iterator[tuple[int, bytes]]:
        """(line number, row) of the last two blocks from line `first` on, numbered as the report
        numbers lines (a `\r` bar is one line; its states stay in the row)."""
        for base, blk in self._tail_lines:
            if base + blk.count(b"\n") < first:
                continue
            for n, raw in enumerate(blk.split(b"\n"), start=base):
                if n >= first:
                    yield n, raw

    def last_progress_before(self, line: int, window: int = 400) -> int:
        """The last progress line before line `line` (1-based) among the `window` lines before it, when
        they are still in the last two blocks, else 0: the job's own last progress when a second
        file's tail (a server log pasted under the job's) comes after its end."""
        if self.last_progress and self.last_progress < line:
            return self.last_progress
        best = 0
        for n, raw in self._rows(max(1, line - window)):
            if n >= line:
                break
            if self.is_progress(raw):
                best = n
        return best

    def is_progress(self, raw: bytes) -> bool:
        """Whether one row is a progress line (a progress marker of rules/verdict.yaml)."""
        shown = _shown(raw)
        return any(lit in shown for m in self._progress_markers for lit in m.literals) and \
            any(m.regex.search(shown) for m in self._progress_markers)

    @property
    def last_progress(self) -> int:
        if self._last_prog is None:
            return 0
        base, lines, pos = self._last_prog
        return base + lines.count(b"\n", 0, pos)

    def finishes(self) -> list[tuple[int, str, str]]:
        """The finish lines, less those of markers that end only an inference job (`inference_finish`:
        "Processed prompts: 100%" is one rollout step of an RL run) when the log is a training run,
        and less an orderly exit that only closed a server whose engine had died (`death_closes_finish`)."""
        hits = self.hits.get("finish", [])
        closes = verdict_spec().get("death_closes_finish")
        if closes and hits:
            groups = closes if isinstance(closes, list) else [closes]
            hits = [h for h in hits if not any(self._closes_death(h, g) for g in groups)]
        if "training" not in self.seen:
            return hits
        only = set(verdict_spec().get("inference_finish", ()))
        return [h for h in hits if h[1] not in only]

    def _closes_death(self, finish: tuple[int, str, str], spec: dict[str, Any]) -> bool:
        """A finish of a `finishes` kind after a death of a `deaths` kind whose line reads `evidence`
        (a serving engine's death), with no progress between them: the front end shut down because
        its engine was gone (uvicorn's orderly shutdown, then the container's "exited with code 0")."""
        if finish[1] not in spec.get("finishes", ()):
            return False
        rx = compiled(spec["evidence"]) if spec.get("evidence") else None
        died = max((d[0] for d in self.hits.get("death", ()) if d[0] < finish[0]
                    and d[1] in spec.get("deaths", ()) and (rx is None or rx.search(d[2]))), default=0)
        return died > 0 and self.last_progress_before(finish[0]) < died

    def last(self, kind: str) -> int:
        hits = self.finishes() if kind == "finish" else self.hits.get(kind, ())
        return max((h[0] for h in hits), default=0)
