"""Which phase a job died in, and the last training step it reached.

`report.extra["phase"]` is one of PHASES; `report.extra["step"]` the last step seen (int or None).

Cost on big logs: the phase only matters at the end of a log, so markers are searched with one
compiled regex over every block of the first `HEAD_BYTES` of a log, over every `MIDDLE_STRIDE`-th
block after that, and over the last `TAIL_BLOCKS` blocks (kept by reference, scanned at finish).
With RE2 the search is a bare `Match` call per marker (a span, no Match object); the kind of a
matched text is looked up in a cache, and line numbers come from one running count per block.
Training evidence (tqdm step counters, metric records) comes from the last lines of every
`PROGRESS_STRIDE`-th block (and of the last block) via `bytes.rfind` on its last 4 KiB. The latest
marker wins; when nothing is marked, the category of the root-cause finding decides (e.g. a
ModuleNotFoundError means `environment`). Patterns are compiled on first use, not at import.
"""
from __future__ import annotations

import re
from collections import deque
from typing import Any, Optional

from llmtriage.engine.fastre import UNANCHORED, Lazy, compile_bytes, raw_of
from llmtriage.detect.metric_parse import regexes
from llmtriage.detect.notebook_bar import notebook_bar


PHASES = ("environment", "launch", "model-loading", "data-loading", "training", "evaluation",
          "checkpoint-save", "generation", "unknown")
HEAD_BYTES = 2 << 20
MIDDLE_STRIDE = 16
PROGRESS_STRIDE = 4
TAIL_BLOCKS = 6

_MARKERS: list[tuple[str, bytes]] = [
    ("environment", rb"Requirement already satisfied|Successfully installed|Collecting [A-Za-z]|pip install|"
                    rb"Checking (?:the )?environment|env(?:ironment)? info"),
    ("launch", rb"Initializing (?:torch\.)?distributed|init_process_group|Setting ds_accelerator|NCCL INFO Bootstrap|"
               rb"store_based_barrier|Starting elastic_operator|torch\.distributed\.run|Rendezvous|rendezvous|"
               rb"\[Gloo\] Rank|Distributed environment|NCCL version|Using network |distributed/run\.py|\[c10d\]|"
               rb"MASTER_ADDR|rdzv_|DistNetworkError"),
    ("model-loading", rb"Loading checkpoint shards|loading weights file|loading configuration file|Some weights of|"
                      rb"All model checkpoint weights were used|Instantiating [A-Za-z]+ model|Loading model|"
                      rb"load(?:ing)? (?:the )?model|Loading weights|Model loaded|loading file tokenizer|"
                      rb"Initializing an LLM engine|Loading safetensors|Loading pretrained|from_pretrained|"
                      rb"GPU blocks:|KV cache (?:size|memory|blocks?|config|dtype|spec)|Memory profiling"),   # not "GPU KV cache usage" (stats)
    ("data-loading", rb"Running tokenizer on dataset|Generating (?:train|validation|test) split|Map(?: \(num_proc=[0-9]+\))?:|"
                     rb"Loading dataset|load_dataset|Tokenizing|Converting format of dataset|Downloading data|Filter(?: \(num_proc=[0-9]+\))?:|"
                     rb"Resolving data files|Preprocessing|packing|building (?:train|valid|test) datasets|Loading data"),
    ("training", rb"\*\*\*\*\* Running training \*\*\*\*\*|Total optimization steps|Start(?:ing)? training|Training started|"
                 rb"training \.\.\.|Epoch [0-9]+/[0-9]+|'eval_loss'|\"eval_loss\"|Begin training|Beginning training"),
    ("evaluation", rb"\*\*\*\*\* Running Evaluation \*\*\*\*\*|\*\*\*\*\* Running Prediction|Running evaluation|Evaluating|"
                   rb"Validation DataLoader|validation loop|Validating:|Testing DataLoader|evaluate\(\)|"
                   rb"evaluating (?:the )?(?:saved )?(?:checkpoint|ckpt|model) "),
    ("checkpoint-save", rb"Saving model checkpoint|Saving checkpoint|[Ss]aving (?:the )?model(?: to| in| \.\.\.)|Model weights saved|"
                        rb"Configuration saved in|save_pretrained|Saving [A-Za-z ]*state|checkpoint saved|saving checkpoint|"
                        rb"Saving optimizer|torch\.save|Saving to |[Ss]napshot\(step=[0-9]|writing (?:checkpoint|partials|shards) to |"
                        rb"gathering (?:the )?full[ _]state[ _]dict"),
    ("generation", rb"Processed prompts|Avg prompt throughput|Uvicorn running|Received request|Generating text|"
                   rb"generate\(|SamplingParams|Adding requests|inference \.\.\.|Generation config|Application startup complete|"
                   rb"Starting vLLM API server|POST /v1/|\[GIN\][^\n]{0,60}\| 200 \||log_server_r[^\n]{0,60}(?:POST|GET) /(?:v1|completion|chat|infill|embedding)"),
]
_KIND_OF_GROUP = [k for k, _ in _MARKERS]
_LABEL_KIND_SRC = [
    ("model-loading", r"(?i)checkpoint shards|loading (?:model|weights|safetensors)|download"),
    ("data-loading", r"(?i)\bmap\b|token|generating \w+ split|filter|dataset|convert|pack|preprocess|resolv"),
    ("evaluation", r"(?i)eval|valid|test|predict"),
    ("generation", r"(?i)processed prompts|generat|sampl|infer"),
    ("checkpoint-save", r"(?i)sav|writ"),
    # (YOLOv5/v8: the epoch counter then the GPU memory, "  12/60   6.21G   1.4288 ...  640:", also after a line prefix)
    # (an RL trainer's outer loop: OpenRLHF's "Episode [1/2]")
    ("training", r"(?i)train|epoch|episode|step|iter|^\W*$|(?:^|\s)\d+/\d+\s+[0-9.]+G\s"),
]


class _Regexes(Lazy):
    """The phase patterns, compiled on first use (importing the module compiles nothing)."""

    def _make__BAR(self) -> Any:
        return regexes().BAR

    def _make__STEP(self) -> Any:
        return regexes().STEP

    def _make_MARKERS(self) -> Any:
        return compile_bytes(b"|".join(b"(" + p + b")" for _, p in _MARKERS))

    def _make_markers_raw(self) -> Any:
        # the same alternation without groups: a bare RE2 call per match gives its span; the kind of a
        # matched text never depends on its context (it is the first branch that matches that text)
        raw = raw_of(compile_bytes(b"|".join(b"(?:" + p + b")" for _, p in _MARKERS)))
        return raw if raw is not None and raw_of(self.MARKERS) is not None else None

    def _make__MARKERS_PY(self) -> Any:
        return re.compile(b"|".join(b"(" + p + b")" for _, p in _MARKERS))

    def _make__TOTAL_STEPS(self) -> Any:
        return compile_bytes(rb"Total optimization steps = ([0-9,]+)")

    def _make__LABEL_PREFIX(self) -> Any:
        return re.compile(r"^(?:\S+: )?(?:\[[^\]]*\]:?\s*)*")

    def _make__BAR_LABEL(self) -> Any:
        return re.compile(rb"([^\n|]{0,80}?)\s*[0-9]{1,3}%\|")

    def _make_LR_POSTFIX(self) -> Any:
        return re.compile(rb"[\s,|\]](?:lr|learning_rate)\s*[:=]\s*[0-9.]")

    def _make__LABEL_KIND(self) -> Any:
        return [(k, re.compile(p)) for k, p in _LABEL_KIND_SRC]


_RX: Optional[_Regexes] = None


def _prx() -> _Regexes:
    global _RX
    if _RX is None:
        _RX = _Regexes()
    return _RX


def __getattr__(name: str) -> Any:
    # the compiled patterns under their historical module-level names (compiled on first access)
    if name in ("MARKERS", "_MARKERS_PY", "_TOTAL_STEPS", "_LABEL_PREFIX", "_BAR_LABEL", "_LABEL_KIND"):
        return getattr(_prx(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_KIND_CACHE: dict[bytes, int] = {}      # matched marker text -> group number (1-based)
_LABEL_CACHE: dict[str, Optional[str]] = {}


def _marker_kind(view: bytes, s: int, e: int) -> int:
    """Group number (1-based) of the marker matched at view[s:e]: the grouped pattern at the same place
    says which branch matched; cached by the matched text (a text always matches the same branch)."""
    k = (_RX or _prx()).MARKERS.match(view, s).lastindex
    if len(_KIND_CACHE) >= 4096:
        _KIND_CACHE.clear()
    _KIND_CACHE[view[s:e]] = k
    return k


def _marker_changes(view: bytes) -> list[tuple[int, int]]:
    """(position, group number) of every change of marker kind in the block, as `MARKERS.finditer` sees them."""
    R = _RX or _prx()
    changes: list[tuple[int, int]] = []
    prev = None
    raw = R.markers_raw
    if raw is None:
        for m in R.MARKERS.finditer(view):
            k = m.lastindex
            if k != prev:
                changes.append((m.start(), k))
                prev = k
        return changes
    match = raw.Match
    anchor = UNANCHORED
    get = _KIND_CACHE.get
    pos, end = 0, len(view)
    while True:
        s, e = match(anchor, view, pos, end)[0]
        if s < 0:
            break
        k = get(view[s:e]) or _marker_kind(view, s, e)
        if k != prev:
            changes.append((s, k))
            prev = k
        if e != pos:            # (the stepping of re2's finditer)
            pos = e
        elif pos == end:
            break
        else:
            pos += 1
    return changes


# Fallback when no marker: the category of the root cause tells the phase.
_CATEGORY_PHASE = {
    "missing-dependency": "environment", "dependency-mismatch": "environment", "cuda-unavailable": "environment",
    "cuda-version-mismatch": "environment", "port-in-use": "launch", "nccl-error": "launch",
    "weights-not-found": "model-loading", "checkpoint-corrupt": "model-loading", "weights-shape-mismatch": "model-loading",
    "state-dict-keys": "model-loading", "hub-unreachable": "model-loading", "hub-auth": "model-loading",
    "remote-code": "model-loading", "data-corrupt": "data-loading", "pad-token-missing": "data-loading",
    "nan-loss": "training", "no-grad": "training", "loss-suspicious": "training", "fp16-overflow": "training",
    "autograd-misuse": "training", "disk-full": "checkpoint-save", "deepspeed-config": "launch",
    "cuda-oom": "training",
}


def lr_postfix() -> Any:
    """A bar's postfix naming the learning rate (`lr: 2.0e-04 loss: ...`, `lr=1e-5`): the training loop's bar
    (compiled on first use)."""
    return (_RX or _prx()).LR_POSTFIX

_METRIC_CATEGORIES = {"nan-loss", "no-grad", "loss-suspicious", "fp16-overflow"}


# a function of the innermost frames of the death's traceback that writes a checkpoint or the model
# (save_checkpoint, save_model, save_pretrained, _save, save_logs_and_checkpoints), not one that loads,
# nor autograd's save_for_backward
_SAVE_FUNC = re.compile(r"(?i)(?:^|_)save(?:_|$)")
SAVE_FRAMES = 6


def _saving_frame(exc: Any, top: Any) -> bool:
    """Whether the exception that ended the job (the root cause's, or the headline when no error finding
    is known yet) was raised inside a save: one of its innermost SAVE_FRAMES frames' functions saves.
    Markers tell the last thing the log announced; the traceback tells what the code was doing."""
    if exc is None or getattr(exc, "thread", False) or not exc.frames:
        return False
    if top is not None and top.line != exc.line:
        return False
    return any(_SAVE_FUNC.search(fr.function or "") and "for_backward" not in fr.function
               for fr in exc.frames[-SAVE_FRAMES:])


def classify_bar(label: str) -> Optional[str]:
    kind = _LABEL_CACHE.get(label, "")
    if kind != "":
        return kind
    kind = None
    for k, pat in (_RX or _prx())._LABEL_KIND:
        if pat.search(label):
            kind = k
            break
    if len(_LABEL_CACHE) >= 1024:
        _LABEL_CACHE.clear()
    _LABEL_CACHE[label] = kind
    return kind


class PhaseTracker:
    def __init__(self) -> None:
        self.seen_bytes = 0
        self.block_no = 0
        self.last: Optional[list[Any]] = None                 # [line, phase] of the latest event
        self.events: list[list[Any]] = []                     # [line, phase], bounded
        self.pending: list[tuple[list[int], int]] = []
        self.last_step: Optional[int] = None
        self.step_line = 0
        self.train_total: Optional[int] = None
        self._bar_seq = True
        self.tail: deque[tuple[bytes, bytes, int]] = deque(maxlen=TAIL_BLOCKS)
        self._unprogressed: Optional[tuple[bytes, bytes]] = None

    def _note(self, line: Any, phase: str) -> None:
        """`line` is an int, or a one-element list filled in when the next block gives the base."""
        if self.last is not None and self.last[1] == phase:
            return
        ev = [line, phase]
        self.last = ev
        self.events.append(ev)
        if len(self.events) > 4096:
            del self.events[:2048]

    def _deferred(self, lines: bytes, pos: int) -> list[Any]:
        cell = [0]
        self.pending.append((cell, lines.count(b"\n", pos)))
        return cell

    def resolve(self, next_base: int) -> None:
        for cell, tail_nl in self.pending:
            cell[0] = next_base - tail_nl
        self.pending.clear()

    def _markers(self, lines: bytes, view: bytes, line_base: Optional[int]) -> None:
        """Note every change of marker kind in the block (one pass over the block to count lines)."""
        R = _RX or _prx()
        raw = R.markers_raw
        if raw is None or line_base is None:
            changes = _marker_changes(view)
            if not changes:
                return
            if not isinstance(changes[0][1], int):  # pragma: no cover - a regex module without lastindex
                return
            self._total_steps(view)
            counted = nl = 0
            for pos, k in changes:
                ls = view.rfind(b"\n", 0, pos) + 1
                if line_base is None:
                    line: Any = self._deferred(lines, ls)
                else:
                    nl += lines.count(b"\n", counted, ls)
                    counted = ls
                    line = line_base + nl
                self._note(line, _KIND_OF_GROUP[k - 1])
            return
        # The common path, `_marker_changes` + `_note` inlined (a bare RE2 call per marker, a few
        # hundred per block in the worst logs). Newlines before a marker's line start == newlines
        # before the marker (`lines` has a "\n" only where `view` has one): a running count gives lines.
        match = raw.Match
        anchor = UNANCHORED
        get = _KIND_CACHE.get
        kinds = _KIND_OF_GROUP
        count = lines.count
        events = self.events
        last = self.last
        found = False
        pos, end = 0, len(view)
        counted = nl = 0
        while True:
            s, e = match(anchor, view, pos, end)[0]
            if s < 0:
                break
            found = True
            phase = kinds[(get(view[s:e]) or _marker_kind(view, s, e)) - 1]
            if last is None or last[1] != phase:
                nl += count(b"\n", counted, s)
                counted = s
                last = [line_base + nl, phase]
                events.append(last)
                if len(events) > 4096:
                    del events[:2048]
            if e != pos:
                pos = e
            elif pos == end:
                break
            else:
                pos += 1
        self.last = last
        if found:
            self._total_steps(view)

    def _total_steps(self, view: bytes) -> None:
        t = (_RX or _prx())._TOTAL_STEPS.search(view)     # a match implies b"optimization steps" in view
        if t:
            self.train_total = int(t.group(1).replace(b",", b""))

    def _bar(self, lines: bytes, view: bytes, pos: int) -> Optional[str]:
        """Classify the tqdm bar around `pos`; updates the training step. Returns its phase."""
        ls = view.rfind(b"\n", 0, pos) + 1
        le = view.find(b"\n", pos)
        seg = view[ls:le if le >= 0 else len(view)]
        R = _RX or _prx()
        lab = R._BAR_LABEL.search(seg)
        if lab is None:
            nb = notebook_bar(seg)      # the Trainer's notebook bar: the training loop's, no label
            if nb is not None:
                self.train_total = self.train_total or nb[1]
                self.last_step = nb[0]
            return "training" if nb is not None else None
        b = R._BAR.search(seg)
        label = R._LABEL_PREFIX.sub("", lab.group(1).decode("utf-8", "replace")).strip()   # drop rank / host prefixes
        kind = classify_bar(label)
        if kind != "training" and lr_postfix().search(seg, lab.end()):
            kind = "training"       # a learning rate in the postfix: an optimiser is stepping, whatever the label says
        if kind == "training" and not label and not self._training_seen():
            return None     # an unlabelled bar before any training evidence (tokenising, shards ...)
        if kind == "training" and b is not None:
            n, total = int(b.group(1)), int(b.group(2))
            if not label and self.train_total and total != self.train_total:
                kind = "evaluation" if self.last is not None and self.last[1] == "evaluation" else None
            else:
                if self.train_total is None:
                    self.train_total = total
                if total == self.train_total or label:
                    self.last_step = n if self.last_step is None or self._bar_seq else max(n, self.last_step)
        return kind

    def _progress(self, lines: bytes, view: bytes) -> None:
        """The last tqdm bars / step line of the block: the label says the phase, the counter the step."""
        off = max(0, len(view) - 4096)
        hi = len(view)
        first_kind = None
        first_pos = -1
        for _ in range(3):      # the last few bars: the last training one gives the step
            pos = max(view.rfind(b"/s]", off, hi), view.rfind(b"/it]", off, hi), view.rfind(b"it/s,", off, hi),
                      view.rfind(b"s/it,", off, hi))
            if pos < 0:
                break
            kind = self._bar(lines, view, pos)
            if first_pos < 0:
                first_pos, first_kind = pos, kind
            if kind == "training" and self.last_step is not None:
                break
            hi = view.rfind(b"\n", off, pos)
            if hi < 0:
                break
        st_pos = max(view.rfind(b"'loss'", off), view.rfind(b"iteration ", off), view.rfind(b"step=", off),
                     view.rfind(b"Step ", off), view.rfind(b"step ", off), view.rfind(b"global_step", off))
        if first_kind is not None and (st_pos < first_pos):
            if self.last is None or self.last[1] != first_kind:
                self._note(self._deferred(lines, view.rfind(b"\n", 0, first_pos) + 1), first_kind)
        if st_pos >= 0 and st_pos > first_pos:
            ls = view.rfind(b"\n", 0, st_pos) + 1
            le = view.find(b"\n", st_pos)
            seg = view[ls:le if le >= 0 else len(view)]
            m = (_RX or _prx())._STEP.search(seg)
            if m:
                self.last_step = int(m.group(1))
            if b"loss" in seg and b"eval" not in seg and b"val" not in seg:
                if self.last is None or self.last[1] != "training":
                    self._note(self._deferred(lines, ls), "training")

    def _training_seen(self) -> bool:
        return self.train_total is not None or any(ph == "training" for _, ph in self.events[-64:])

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if self.pending:
            self.resolve(line_base)
        self.block_no += 1
        in_head = self.seen_bytes < HEAD_BYTES
        self.seen_bytes += len(view)
        if in_head or self.block_no % MIDDLE_STRIDE == 0:
            self._markers(lines, view, line_base)      # (the same lines the deferred count gave)
        else:
            self.tail.append((lines, view, line_base))
        if in_head or self.block_no % PROGRESS_STRIDE == 0:
            self._progress(lines, view)
            self._unprogressed = None
        else:
            self._unprogressed = (lines, view)

    def phase_at(self, line: Optional[int]) -> Optional[str]:
        """The phase in force at `line` (the latest marker at or before it); the last one when None."""
        if not self.events:
            return None
        ev = sorted((ln, ph) for ln, ph in self.events)
        if line is None:
            return ev[-1][1]
        best = None
        for ln, ph in ev:
            if ln > line:
                break
            best = ph
        return best

    def flush(self, end_base: int) -> None:
        """At the end of the log: read the progress of the last block if it was skipped; resolve lines."""
        if self._unprogressed is not None:
            self._progress(*self._unprogressed)
            self._unprogressed = None
        self.resolve(end_base)

    def finish(self, report: Any, findings: list[Any], metric_step: Optional[int] = None,
               records: Optional[list[Any]] = None) -> None:
        for lines, view, base in self.tail:
            self._markers(lines, view, base)
        self.tail.clear()
        for ev in self.events:
            if isinstance(ev[0], list):
                ev[0] = ev[0][0]
        steps = [x for x in (self.last_step, metric_step) if x is not None]
        step = max(steps) if steps else None
        errs = sorted((f for f in findings if f.severity == "error"), key=lambda f: f.sort_key())
        top = errs[0] if errs else None
        phase = self.phase_at(top.line if top is not None else None)
        if records and phase not in ("evaluation", "generation"):
            # metric records between the last marker and the failing line (the end of the log when no
            # error is known yet): it died in a training step; after a save marker, two or more (training
            # went on after the save: one record may be the save's own step)
            end = top.line if top is not None else float("inf")
            since = max((ln for ln, _ in self.events if isinstance(ln, int) and ln <= end), default=0)
            after = sum(1 for r in records if since < r.line <= end)
            if after >= (2 if phase == "checkpoint-save" else 1) and (top is not None or phase == "checkpoint-save"):
                phase = "training"
        saving = _saving_frame(report.exception, top)
        if saving and phase != "checkpoint-save":
            phase = "checkpoint-save"   # the traceback of the death says the job was saving
        fallback = _CATEGORY_PHASE.get(top.category) if top is not None else None
        if top is not None and top.category in _METRIC_CATEGORIES and phase != "evaluation":
            phase = fallback   # a metric/NaN/overflow finding is a training step whatever the last marker
        if phase is None:
            phase = fallback or ("training" if step is not None else None)
        elif fallback == "environment" and phase == "launch":
            phase = fallback   # an import error right after the launcher started
        report.extra["phase"] = phase or "unknown"
        report.extra["step"] = step
