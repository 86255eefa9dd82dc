"""How far a job went on past an error: an exit crash of a run that had completed its work (rules/verdict.yaml `exit_after_completion`).

A run that printed its finish line after reaching its planned end (the last step counter before the
finish at its total: "74/74", or a save begun after its last progress line: the final save; or whose last
finish is its final outputs written after the loop: "Saving predictions to ...", "Models exported at ...") and
then died at interpreter exit (a SIGABRT / segfault in a destructor, `terminate called`, the
launcher's "exitcode: -6" and its ChildFailedError wrapper) lost nothing: its outputs were written.
Those deaths are teardown, like the peers' deaths `teardown_after_finish` drops, and the log is
finished. A run that stopped short of its end (246/248, the last save long before the end) or an
application exception after the finish (other than the launcher's wrapper of the child's exit) keeps
its death.

A collective timeout after the finish is kept as the job's own error (a final save that outlasted the
timeout), except where the other ranks had closed their communicators after the finish and before it
(`peers_left`: NCCL's "comm ... rank N ... - Abort COMPLETE" / "Destroy COMPLETE") and the finish is one
of `peers_left_finishes` (the loop's own "training finished after N epochs"): the peers completed and
left, and the rank still waiting in a leftover collective timed out during shutdown, outputs written."""

from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import ExceptionInfo
from llmtriage.detect.spec import compiled, verdict_spec
from llmtriage.detect.scanner import Scanner

Death = tuple[int, str, str]


def _completed(scanner: Scanner, finish: int, cfg: dict[str, Any]) -> bool:
    """The run reached its planned end before line `finish`: its last step counter there was at its
    total, or its last save began after its last progress line (the final save)."""
    rx = compiled(cfg["counter"])
    last: Optional[tuple[int, int]] = None
    for n, raw in scanner.rows(max(1, finish - int(cfg.get("lookback", 60)))):
        if n > finish:
            break
        for m in rx.finditer(raw.decode("utf-8", "replace")):
            last = (int(m.group("n") or m.group("n2")), int(m.group("total") or m.group("t2")))
    if last is not None and 0 < last[0] == last[1]:
        return True
    saves = [h[0] for h in scanner.hits.get("save", ()) if h[0] < finish and h[1] in cfg.get("final_save", ())]
    return bool(saves) and max(saves) > scanner.last_progress_before(finish) > 0


def _peers_left(scanner: Scanner, finish: int, cfg: dict[str, Any]) -> bool:
    """Other ranks closed their communicators after line `finish` and before the first error of the job's own
    (`unless_after`) after it."""
    if not cfg.get("peers_left") or not cfg.get("unless_after"):
        return False
    left, keep, seen = compiled(cfg["peers_left"]), compiled(cfg["unless_after"]), False
    for n, raw in scanner.rows(finish):
        if n <= finish:
            continue
        text = raw.decode("utf-8", "replace")
        if keep.search(text):
            return seen
        seen = seen or bool(left.search(text))
    return False


def exit_after_completion(deaths: list[Death], excs: list[Death], exceptions: list[ExceptionInfo],
                          scanner: Scanner, spec: dict[str, Any]) -> tuple[list[Death], list[Death]]:
    """(deaths, exception deaths) less the exit crash of a completed run (see the module's doc)."""
    cfg = spec.get("exit_after_completion")
    finishes = [h for h in scanner.finishes() if h[1] not in spec.get("weak_finish", ())]
    if not cfg or not finishes:
        return deaths, excs
    finish, kind = max(finishes)[:2]
    wrappers = set(cfg.get("wrappers", ()))
    # (an exception raised inside a cleanup call after the finish, `torch.npu.empty_cache()` in a web UI's finalizer,
    # is teardown too: the work was done)
    cleanup = set(cfg.get("cleanup_frames", ()))
    after = [e for e in exceptions if e.line > finish and not any(f.function in cleanup for f in e.frames)]
    # (the final outputs written after the loop, with no progress after them, are the completion itself)
    outputs = kind in cfg.get("output_finishes", ()) and scanner.last_progress <= finish
    left = kind in cfg.get("peers_left_finishes", ()) and _peers_left(scanner, finish, cfg)
    if left:
        wrappers |= set(cfg.get("peers_left_exceptions", ()))
    if any(e.type.rsplit(".", 1)[-1] not in wrappers for e in after) or not (outputs or left or _completed(scanner, finish, cfg)):
        return deaths, excs
    saves = sorted(h[:2] for h in scanner.hits.get("save", ()) if h[0] > finish)
    if saves and saves[-1][1] in cfg.get("final_save", ()):     # a save after the finish that never completed
        return deaths, excs
    keep = compiled(cfg["unless_after"]) if cfg.get("unless_after") else None
    if keep is not None and not left and any(n > finish and keep.search(raw.decode("utf-8", "replace")) for n, raw in scanner.rows(finish)):
        return deaths, excs     # an error of its own after the finish (a collective timeout, a kill): not teardown
    kinds = set(cfg.get("deaths", ()))
    wrapped = {e.line for e in exceptions if e.line > finish}
    return ([d for d in deaths if not (d[0] > finish and d[1] in kinds)],
            [x for x in excs if not (x[0] > finish and x[0] in wrapped)])


def went_on_past(line: int, scanner: Scanner, ctx: dict[str, Any]) -> bool:
    """Progress after `line` that a process dying there could not have printed, by the stricter measure of a
    context that demotes an error of a job still running (`survived-while-running`): more than `progress_gap`
    lines of it, progress of a `progress_strong` kind (a request served), or a step counter advanced by
    `progress_steps` beyond `progress_gap` lines or after a retry or restart the job announced after the error
    (a few steps right after the error may be another rank's bar redrawn while the job dies; a bar still at 0
    is no work done), or a counter a relaunch started from scratch went on by `progress_steps_far` steps."""
    spec = verdict_spec()
    last = scanner.last_progress
    if last > line and scanner.last_progress_name in spec.get("progress_strong", ()):
        return True
    again = any(line < h[0] < last for kind in ctx.get("restarted_by", ()) for h in scanner.hits.get(kind, ()))
    steps = scanner.steps_after(line)
    # (a counter that a relaunch started from scratch after the error and ran on for `progress_steps_far` steps is
    # the job's own work, however few lines it took; an LSF report's header above a counter already under way is not)
    far = bool(spec.get("progress_steps_far")) and \
        scanner.steps_after(line, fresh=True) >= int(spec["progress_steps_far"])
    return (again or far or last > line + int(spec.get("progress_gap", 20))) and steps >= int(spec.get("progress_steps", 2))


def retried_until_through(first: int, last: int, scanner: Scanner) -> bool:
    """A signature's hits are the failed attempts of a launch retried until one got through: no progress
    between its first and last hit (progress there is an ongoing failure served around), and after the last
    one a counter started from scratch ran on by `progress_steps_far` steps (rules/verdict.yaml)."""
    far = verdict_spec().get("progress_steps_far")
    return bool(far) and not (last > first and scanner.last_progress_before(last) > first) and \
        scanner.steps_after(last, fresh=True) >= int(far)
