"""Where the main thread was stuck: the last thread dump in a log (a block observer).

Thread dumps (`ThreadDumpObserver`, a block observer):
- faulthandler (`Fatal Python error`, `faulthandler.dump_traceback[_later]`, SIGUSR1 handlers):
  `Thread 0x00007f... (most recent call first):` / `Current thread 0x... (most recent call first):`
  then `  File "path", line N in func`;
- py-spy dump: `Thread 12345 (idle): "MainThread"` (or `Thread 0x7F.. (active+gil): "MainThread"`)
  then `    func (path:line)`.
Both list the innermost frame first. The main thread is the one py-spy names MainThread, else the
one whose outermost frame is `<module>`, else faulthandler's current thread, else the first. Its stuck
frame is its innermost frame outside the Python standard library (threading's `wait` says nothing);
`user_frame` is its innermost frame outside site-/dist-packages. Put in `report.extra["thread_dump"]`
and on the top error finding's captures (`stuck_frame`).

The collective is the innermost torch.distributed / DeepSpeed comm frame named after a collective; when
there is none, a stuck frame inside a distributed runtime whose collective runs below Python (ZeRO's
gradient-norm all_reduce, the pipeline engine's and Megatron's p2p code, FSDP) stands for it, and its
caller is the first frame outside that runtime.
"""
from __future__ import annotations

import re
import sys
from typing import Any, Optional

from llmtriage.engine.logparse import split_prefix
from llmtriage.findings import Finding
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import compiled, verdict_spec

MAX_THREADS = 256
MAX_FRAMES = 200

_FH_HEAD = re.compile(r"(Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):")
_FH_FRAME = re.compile(r"^\s*File \"([^\"]+)\", line (\d+) in (\S+)")
_SPY_HEAD = re.compile(r"Thread (0x[0-9a-fA-F]+|\d+) \(([a-z+]+)\)(?:: \"([^\"]*)\")?")
_SPY_FRAME = re.compile(r"^\s*(\S+) \(([^()]+):(\d+)\)\s*$")     # indented; the indent may go with a prefix
_STDLIB = re.compile(r"(?:^|[/\\])(?:lib[/\\]python3?\.?\d*|Lib)[/\\](?!site-packages|dist-packages)|^<frozen")
_PKG = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
# a torch.distributed / DeepSpeed collective a thread can wait in forever
_COLLECTIVES = frozenset({
    "broadcast", "all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "reduce_scatter",
    "reduce_scatter_tensor", "_reduce_scatter_base", "barrier", "monitored_barrier", "all_to_all",
    "all_to_all_single", "reduce", "gather", "scatter", "send", "recv", "broadcast_object_list",
    "all_gather_object", "gather_object", "scatter_object_list", "wait", "_wait", "inference_all_reduce",
    "batch_isend_irecv"})
_BARE = re.compile(r"\s|Thread |Current thread |Process \d|Python v|File ")
_HOST_INDENT = re.compile(r"^(?:[A-Za-z][\w.-]*\d|\d{1,6}): (?=\s)")   # "node-7:     frame (...)": split_prefix keeps it
_HOST_TAG = re.compile(r"^\[[A-Za-z][\w.-]{0,40}\d\] ")   # "[node0]     frame (...)": a host tag a wrapper script added
_COMM_PATH = re.compile(r"torch[/\\]distributed[/\\]|distributed_c10d\.py|deepspeed[/\\]comm[/\\]")
# a runtime's hang: its caller is the first frame outside torch and the runtime's own libraries
_RUNTIME_CALLER = re.compile(r"(?:^|[/\\])(?:torch|deepspeed|megatron[/\\]core|accelerate)[/\\]")
# where a thread waits for the GPU on behalf of its caller (stream / event synchronize): look past it
_SYNC_PATH = re.compile(r"torch[/\\]cuda[/\\](?:streams|__init__)\.py")
# code of a distributed runtime whose Python frame sits on a collective py-spy cannot show (it is in C++):
# ZeRO's gradient-norm all_reduce, the pipeline engine's send/recv, Megatron's p2p and grad-sync code, DeepEP's
# expert-parallel all-to-all (deep_ep Buffer.dispatch / combine)
_DIST_PATH = re.compile(r"deep_ep[/\\]|deepspeed[/\\]runtime[/\\](?:zero|pipe)[/\\]|deepspeed[/\\]runtime[/\\]comm[/\\]"
                        r"|megatron[/\\](?:core[/\\])?(?:pipeline_parallel|distributed)[/\\]"
                        r"|megatron[/\\]p2p_communication\.py|torch[/\\]distributed[/\\]fsdp[/\\]")


def _stdlib(path: str) -> bool:
    if _STDLIB.search(path) or path.startswith("<"):
        return True
    if not path.startswith(("/", "\\")) and ":" not in path[:3]:   # py-spy's short paths: threading.py, multiprocessing/x.py
        top = re.split(r"[/\\]", path, 1)[0]
        return top.removesuffix(".py") in sys.stdlib_module_names
    return False


def pick_frame(frames: list[tuple[str, str, int]]) -> tuple[Optional[str], Optional[str]]:
    """(stuck frame, user frame) of a thread, innermost first: 'func (path:line)'."""
    stuck = next((f for f in frames if not _stdlib(f[1])), frames[0] if frames else None)
    user = next((f for f in frames if not _stdlib(f[1]) and not _PKG.search(f[1])), None)
    fmt = lambda f: f"{f[0]} ({f[1]}:{f[2]})" if f else None   # noqa: E731
    return fmt(stuck), fmt(user)


class ThreadDumpObserver:
    """Collects the threads of the last thread dump in a log (faulthandler or py-spy)."""

    def __init__(self, engine: Any = None):
        self.threads: list[dict[str, Any]] = []
        self.cur: Optional[dict[str, Any]] = None
        self.dumps = 0
        self.line = 0

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if self.cur is None and b"most recent call first" not in view and b"MainThread" not in view \
                and not (b"Thread " in view and b"(idle)" in view):
            return
        for i, raw in enumerate(lines.split(b"\n")):
            text = raw[:2048].decode("utf-8", "replace").rstrip("\r")
            if not _BARE.match(text):       # a Ray actor, rank, host or time-stamp prefix before the dump
                text = split_prefix(text).text or text
                text = _HOST_INDENT.sub("", text, 1)
                text = _HOST_TAG.sub("", text, 1)
            self._line(text, line_base + i)

    def _line(self, text: str, ln: int) -> None:
        m = _FH_HEAD.search(text)
        s = None if m else _SPY_HEAD.search(text)
        if s and not (s.group(3) is not None or text.rstrip().endswith(")")):
            s = None
        if m or s:
            if self.cur is None or (self.threads and ln - self.threads[-1]["end"] > 50):
                if not self.threads or ln - self.threads[-1]["end"] > 50:
                    self.threads = []          # a new dump: keep only the last one
                    self.dumps += 1
                    self.line = ln
            self._close()
            if m:
                self.cur = {"id": m.group(2), "name": "current" if m.group(1) == "Current thread" else None,
                            "kind": "faulthandler", "frames": [], "end": ln}
            else:
                self.cur = {"id": s.group(1), "name": s.group(3), "state": s.group(2), "kind": "py-spy",
                            "frames": [], "end": ln}
            return
        if self.cur is None:
            return
        f = _FH_FRAME.match(text) if self.cur["kind"] == "faulthandler" else _SPY_FRAME.match(text)
        if f:
            if len(self.cur["frames"]) < MAX_FRAMES:
                fr = (f.group(3), f.group(1), int(f.group(2))) if self.cur["kind"] == "faulthandler" else \
                    (f.group(1), f.group(2), int(f.group(3)))
                self.cur["frames"].append(fr)
            self.cur["end"] = ln
        elif self.cur["kind"] == "py-spy" and text.startswith("        "):
            self.cur["end"] = ln          # --locals lines under a frame
        elif text.strip() or ln - self.cur["end"] > 1:
            self._close()

    def _close(self) -> None:
        if self.cur is not None and self.cur["frames"] and len(self.threads) < MAX_THREADS:
            self.threads.append(self.cur)
        self.cur = None

    def finish(self, report: Any, findings: list[Any]) -> None:
        self._close()
        if not self.threads:
            return
        main = (next((t for t in self.threads if t.get("name") == "MainThread"), None)
                or next((t for t in self.threads if t["frames"][-1][0] == "<module>"), None)
                or next((t for t in self.threads if t.get("name") == "current"), None)
                or self.threads[0])
        stuck, user = pick_frame(main["frames"])
        frames = main["frames"]
        at = next((i for i, f in enumerate(frames) if f[0] in _COLLECTIVES and _COMM_PATH.search(f[1])), None)
        runtime = None
        if at is None:
            # the innermost non-stdlib frame is a distributed runtime's: its collective is below Python
            at = next((i for i, f in enumerate(frames) if not _stdlib(f[1]) and not _SYNC_PATH.search(f[1])), None)
            at = at if at is not None and _DIST_PATH.search(frames[at][1]) else None
            runtime = _RUNTIME_CALLER if at is not None else None
        comm = frames[at] if at is not None else None
        caller = None if at is None else next(
            (f for f in frames[at + 1:] if not _COMM_PATH.search(f[1]) and not _stdlib(f[1])
             and not (runtime and runtime.search(f[1]))), None)
        info = {"tool": main["kind"], "line": self.line, "threads": len(self.threads), "main_thread": main["id"],
                "frame": stuck, "user_frame": user, "collective": f"{comm[0]} ({comm[1]}:{comm[2]})" if comm else None,
                "caller": f"{caller[0]} ({caller[1]}:{caller[2]})" if caller else None,
                "end": max(t["end"] for t in self.threads),
                "stacks": {t["id"]: pick_frame(t["frames"])[0] for t in self.threads[:32]}}
        report.extra["thread_dump"] = info
        errs = sorted((f for f in findings if f.severity == "error"), key=lambda f: f.sort_key())
        if errs and stuck:
            errs[0].captures.setdefault("stuck_frame", stuck)


def hang_finding(info: Optional[dict[str, Any]], last_progress: int, lang: Optional[str],
                 scanner: Any = None, status: str = "running", death: Optional[dict[str, Any]] = None) -> Optional[Finding]:
    """An error for a job whose last thread dump shows the main thread waiting in a collective with no
    progress after the dump (the verdict asks only when nothing else is an error). A job that died counts
    only when its death is a stop from outside after the dump (rules/verdict.yaml `hang_stopped`: a SIGTERM,
    a Ctrl-C, a scancel): the stop ended the hang the dump shows. A progress line after the dump whose step
    counter stands where it stood before it (`tail` of the log showing the same "0/100" bar again) is no progress."""
    if not info or not info.get("collective"):
        return None
    if status != "running":
        stop = verdict_spec().get("hang_stopped")
        if status != "crashed" or not death or not stop or death["line"] <= info["end"] \
                or not compiled(stop).search(death.get("evidence", "")):
            return None
    if last_progress > info["end"] and (scanner is None or scanner.steps_after(info["line"], epochs=False) > 0):
        return None
    entry = detector_texts()["collective_hang"]
    values = {"collective": info["collective"], "frame": info.get("caller") or "",
              "line": str(info["line"]), "tool": info["tool"]}
    return detector_finding(entry, detector_text(entry, lang), values, line=info["line"], last_line=info["end"],
                            default_priority=30)
