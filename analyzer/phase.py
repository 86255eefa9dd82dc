"""Which phase a job died in, and the last training step it reached.

`report.extra["phase"]` is one of PHASES; `report.extra["step"]` the last step seen (int or None).

Cost on big logs: the phase only matters at the end of a log, so markers are searched with one
compiled regex over every block of the first `HEAD_BYTES` of a log, over every `MIDDLE_STRIDE`-th
block after that, and over the last `TAIL_BLOCKS` blocks (kept by reference, scanned at finish).
Training evidence (tqdm step counters, metric records) comes from the last lines of each block via
`bytes.rfind`, which is cheap. The latest marker wins; when nothing is marked, the category of
the root-cause finding decides (e.g. a ModuleNotFoundError means `environment`).
"""
from __future__ import annotations

import re
from collections import deque
from typing import Any, Optional

from .metrics import _BAR, _STEP, _compile


PHASES = ("environment", "launch", "model-loading", "data-loading", "training", "evaluation",
          "checkpoint-save", "generation", "unknown")
HEAD_BYTES = 8 << 20
MIDDLE_STRIDE = 8
TAIL_BLOCKS = 6

_MARKERS: list[tuple[str, bytes]] = [
    ("environment", rb"Requirement already satisfied|Successfully installed|Collecting [A-Za-z]|pip install|"
                    rb"Checking (?:the )?environment|env(?:ironment)? info"),
    ("launch", rb"Initializing (?:torch\.)?distributed|init_process_group|Setting ds_accelerator|NCCL INFO Bootstrap|"
               rb"store_based_barrier|Starting elastic_operator|torch\.distributed\.run|Rendezvous|rendezvous|"
               rb"\[Gloo\] Rank|Distributed environment|NCCL version|Using network "),
    ("model-loading", rb"Loading checkpoint shards|loading weights file|loading configuration file|Some weights of|"
                      rb"All model checkpoint weights were used|Instantiating [A-Za-z]+ model|Loading model|"
                      rb"load(?:ing)? (?:the )?model|Loading weights|Model loaded|loading file tokenizer|"
                      rb"Initializing an LLM engine|Loading safetensors|Loading pretrained|from_pretrained|"
                      rb"GPU blocks:|KV cache|Memory profiling"),
    ("data-loading", rb"Running tokenizer on dataset|Generating (?:train|validation|test) split|Map(?: \(num_proc=[0-9]+\))?:|"
                     rb"Loading dataset|load_dataset|Tokenizing|Converting format of dataset|Downloading data|Filter(?: \(num_proc=[0-9]+\))?:|"
                     rb"Resolving data files|Preprocessing|packing|building (?:train|valid|test) datasets|Loading data"),
    ("training", rb"\*\*\*\*\* Running training \*\*\*\*\*|Total optimization steps|Start(?:ing)? training|Training started|"
                 rb"training \.\.\.|Epoch [0-9]+/[0-9]+|'eval_loss'|\"eval_loss\"|Begin training|Beginning training"),
    ("evaluation", rb"\*\*\*\*\* Running Evaluation \*\*\*\*\*|\*\*\*\*\* Running Prediction|Running evaluation|Evaluating|"
                   rb"Validation DataLoader|validation loop|Validating:|Testing DataLoader|evaluate\(\)"),
    ("checkpoint-save", rb"Saving model checkpoint|Saving checkpoint|[Ss]aving (?:the )?model (?:to|in)|Model weights saved|"
                        rb"Configuration saved in|save_pretrained|Saving [A-Za-z ]*state|checkpoint saved|saving checkpoint|"
                        rb"Saving optimizer|torch\.save|Saving to "),
    ("generation", rb"Processed prompts|Avg prompt throughput|Uvicorn running|Received request|Generating text|"
                   rb"generate\(|SamplingParams|Adding requests|inference \.\.\.|Generation config"),
]
_KIND_OF_GROUP = [k for k, _ in _MARKERS]
MARKERS = _compile(b"|".join(b"(" + p + b")" for _, p in _MARKERS))
_MARKERS_PY = re.compile(b"|".join(b"(" + p + b")" for _, p in _MARKERS))
_LABEL_PREFIX = re.compile(r"^(?:\S+: )?(?:\[[^\]]*\]:?\s*)*")
_BAR_LABEL = re.compile(rb"([^\n|]{0,80}?)\s*[0-9]{1,3}%\|")

_LABEL_KIND = [
    ("model-loading", re.compile(r"(?i)checkpoint shards|loading (?:model|weights|safetensors)|download")),
    ("data-loading", re.compile(r"(?i)\bmap\b|token|generating \w+ split|filter|dataset|convert|pack|preprocess|resolv")),
    ("evaluation", re.compile(r"(?i)eval|valid|test|predict")),
    ("generation", re.compile(r"(?i)processed prompts|generat|sampl|infer")),
    ("checkpoint-save", re.compile(r"(?i)sav|writ")),
    ("training", re.compile(r"(?i)train|epoch|step|iter|^\W*$")),
]

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


def classify_bar(label: str) -> Optional[str]:
    for kind, pat in _LABEL_KIND:
        if pat.search(label):
            return kind
    return None


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
        self.tail: deque[tuple[bytes, bytes, int]] = deque(maxlen=TAIL_BLOCKS)
        self._tail_scanned = False

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
        last_kind = None
        last_pos = -1
        for m in MARKERS.finditer(view):
            last_pos, last_kind = m.start(), m.lastindex
        if last_kind is None:
            return
        if not isinstance(last_kind, int):  # pragma: no cover - a regex module without lastindex
            mm = _MARKERS_PY.search(view, last_pos)
            last_kind = mm.lastindex if mm else None
            if last_kind is None:
                return
        ls = view.rfind(b"\n", 0, last_pos) + 1
        line: Any = line_base + lines.count(b"\n", 0, ls) if line_base is not None else self._deferred(lines, ls)
        self._note(line, _KIND_OF_GROUP[last_kind - 1])

    def _progress(self, lines: bytes, view: bytes) -> None:
        """The last tqdm bar / step line of the block: its label says the phase, its counter the step."""
        off = max(0, len(view) - 4096)
        pos = max(view.rfind(b"/s]", off), view.rfind(b"it/s,", off), view.rfind(b"s/it,", off))
        st_pos = max(view.rfind(b"'loss'", off), view.rfind(b"iteration ", off), view.rfind(b"step=", off),
                     view.rfind(b"Step ", off), view.rfind(b"step ", off), view.rfind(b"global_step", off))
        if pos >= 0:
            ls = view.rfind(b"\n", 0, pos) + 1
            le = view.find(b"\n", pos)
            seg = view[ls:le if le >= 0 else len(view)]
            lab = _BAR_LABEL.search(seg)
            b = _BAR.search(seg)
            label = lab.group(1).decode("utf-8", "replace") if lab else ""
            label = _LABEL_PREFIX.sub("", label).strip()       # drop rank / host prefixes
            kind = classify_bar(label) if lab else None
            if kind == "training" and not label and not self._training_seen():
                kind = None     # an unlabelled bar before any training evidence (tokenising, shards ...)
            if kind is not None:
                if kind == "training" and b is not None:
                    n, total = int(b.group(1)), int(b.group(2))
                    if self.last is not None and self.last[1] == "evaluation" and self.train_total \
                            and total != self.train_total and not label:
                        kind = "evaluation"
                    else:
                        if self.train_total is None:
                            self.train_total = total
                        if total == self.train_total or label:
                            self.last_step = n
                if self.last is None or self.last[1] != kind:
                    self._note(self._deferred(lines, ls), kind)
        if st_pos >= 0 and st_pos > pos:
            ls = view.rfind(b"\n", 0, st_pos) + 1
            le = view.find(b"\n", st_pos)
            seg = view[ls:le if le >= 0 else len(view)]
            m = _STEP.search(seg)
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
            self._markers(lines, view, None)
        else:
            self.tail.append((lines, view, line_base))
        self._progress(lines, view)

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

    def finish(self, report: Any, findings: list[Any], metric_step: Optional[int] = None) -> None:
        for lines, view, base in self.tail:
            self._markers(lines, view, base)
        self.tail.clear()
        for ev in self.events:
            if isinstance(ev[0], list):
                ev[0] = ev[0][0]
        step = self.last_step if self.last_step is not None else metric_step
        errs = sorted((f for f in findings if f.severity == "error"), key=lambda f: f.sort_key())
        top = errs[0] if errs else None
        phase = self.phase_at(top.line if top is not None else None)
        fallback = _CATEGORY_PHASE.get(top.category) if top is not None else None
        if phase is None:
            phase = fallback or ("training" if step is not None else None)
        elif fallback == "environment" and phase == "launch":
            phase = fallback   # an import error right after the launcher started
        report.extra["phase"] = phase or "unknown"
        report.extra["step"] = step
