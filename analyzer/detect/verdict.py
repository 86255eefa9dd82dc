"""The verdict on a scanned log (layer 3): how the job ended, which signatures it survived, what next.

Signature matching says *what* a log contains; the verdict says what it *means*:

1. **Status.** `crashed` (death evidence: an uncaught exception, a signal, a launcher exit code, an
   engine/actor/worker death, an HTTP 500 from a server that died), `finished` (Trainer metrics,
   "Training completed", exit code 0) or `running` (the log stops with neither). A death marker
   followed by progress or a finish line was survived. Markers live in rules/verdict.yaml and are
   searched per block behind literal gates (progress: only the last occurrence per block).
2. **Context decides fatality.** Error findings quoted in a Python warning, `trainable params: 0`
   outside training, errors retried and followed by progress, and every signature of a finished
   run become warnings (or info) with a stated reason (`Finding.judgement`). Silent-failure metric
   detectors (`metric-*`) judge themselves and are left alone.
3. **Unknown yields.** A crashed report always has an error finding (`unknown` naming the death
   evidence at least). An unrecognised exception that only reports another process's death is a
   symptom; a warning-level cause of the same rank earlier in the log that can explain a death is
   promoted to error and ranks above the unknown.
4. **Action.** Each finding and the report get `action` (retry | fix | replace-node | none) and
   `action_reason`, from rules/actions.yaml: the rule's own action or its category's default,
   changed by context overrides (an Xid in the log, a Slurm time limit...).
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import ExceptionInfo, Finding, Report
from llmtriage.engine.logparse import is_benign, split_prefix
from llmtriage.engine.redact import clip
from llmtriage.detect.logged_handler import handled_before
from llmtriage.detect.consequence import crash_after_cause, death_after_warning_cause
from llmtriage.detect.held_gpu import oom_on_held_gpu
from llmtriage.detect.escalation import kill_after_term
from llmtriage.detect.inner_error import wrapper_yields_to_inner
from llmtriage.detect.corroborate import corroborate, explain_metric, metric_outranks_warning
from llmtriage.detect.echo import echo_handled
from llmtriage.detect.exit_crash import exit_after_completion, retried_until_through, went_on_past
from llmtriage.detect.spec import action_spec, compiled as _rx, tr, verdict_spec
from llmtriage.detect.accounting import memory_at_limit
from llmtriage.detect.interrupted_save import resumed_interrupted_save
from llmtriage.detect.named_by_death import (death_repeats, recovered_named_by_death, retries_exhausted,
                                             symptom_death_recovered)
from llmtriage.detect.actions import action_for
from llmtriage.detect.beside import category_beside
from llmtriage.detect.ascend_versions import driver_older_than_cann
from llmtriage.detect.bar_timeout import bar_outlasts_timeout
from llmtriage.detect.installed_yet_missing import installed_yet_missing
from llmtriage.detect.garbage_size import garbage_size_alone
from llmtriage.detect.fallback_chain import fallback_failed
from llmtriage.detect.dropped_request import request_never_answered
from llmtriage.detect.hung import hung_until_killed
from llmtriage.detect.init_incomplete import init_incomplete
from llmtriage.detect.nan_passed import nan_passed
from llmtriage.detect.interrupted_wait import interrupted_wait, stopped_while_pinned
from llmtriage.detect.wrapped import wrapped_message
from llmtriage.detect.scanner import Scanner, markers
from llmtriage.detect.unknown import death_unknown, name_families, points_elsewhere, unknown_finding
from llmtriage.detect.inner_exception import opaque_headline
from llmtriage.detect.producer_died import producer_thread_exception
from llmtriage.detect.rerun import earlier_run, last_rerun, typed_after_finish, typed_between
from llmtriage.detect.hccl_roster import name_missing_ranks
from llmtriage.detect.input_growth import input_grew_before_oom
from llmtriage.detect.prelude_finish import run_end_seen
from llmtriage.detect.rank_left import rank_left_early
from llmtriage.detect.hccl_skew import peer_arrived_late
from llmtriage.detect.yield_unknown import promote_covering, yield_unknown
from llmtriage.detect.verdict_passes import (after_death, crash_has_error, demote, settled, stalled,
                                             timeouts_after_death)

ACTIONS = ("retry", "fix", "replace-node", "none")
STATUSES = ("crashed", "finished", "running")



# --------------------------------------------------------------------------- status

def status_of(scanner: Scanner, exceptions: list[ExceptionInfo], bare: Optional[ExceptionInfo] = None,
              lines: int = 0) -> tuple[str, Optional[dict[str, Any]]]:
    """(status, evidence): the first death nothing undid, else the last finish line. `bare`: the
    report's exception when no traceback gave it (a bare `XError: ...` line), a death when the log
    (`lines` long) ends just after it."""
    spec = verdict_spec()
    if (bare is not None and bare not in exceptions and lines - bare.line <= int(spec.get("bare_exception_tail", 0))
            and split_prefix(scanner.line_text(bare.line)).text.startswith(bare.type)):
        exceptions = [*exceptions, bare]      # the line is the exception (not a message quoting one)
    last_finish = scanner.last("finish")
    tails = {m.name: m.tail for m in markers() if m.tail}
    deaths = [d for d in scanner.hits.get("death", ()) if d[1] not in tails or lines - d[0] <= tails[d[1]]]
    prompts = [h[0] for h in scanner.hits.get("prompt", ()) if lines - h[0] <= 1]
    tail = int(spec.get("thread_prompt_tail", 0))
    weak = set(spec.get("weak_finish", ()))
    closed = [h[0] for h in scanner.finishes() if h[1] in weak]
    train_rx = _rx(spec.get("thread_training_frames") or r"(?!)")
    trained = {e.line for e in exceptions if e.thread and scanner.last_progress < e.line
               and any(train_rx.search(f.function) for f in e.frames)}    # the thread ran the training loop
    swallowed = set(spec.get("swallowed_frames", ()))
    excs = [(e.line, "exception", clip(e.headline, 300)) for e in exceptions
            if not is_benign(e) and not any(f.function in swallowed for f in e.frames)
            and (not e.thread or e.line in trained or any(e.line < p <= e.line + tail for p in prompts)
                 or (scanner.last_progress < e.line and any(c > e.line for c in closed)))]
    peer_gone = spec.get("teardown_exception_after_finish")
    if last_finish and peer_gone:    # a collective's peer hung up because the finished job was shutting down
        excs = [x for x in excs if not (x[0] > last_finish and _rx(peer_gone).search(x[2]))]
    if last_finish and not any(line > last_finish for line, _, _ in excs):
        teardown = set(spec.get("teardown_after_finish", ()))
        deaths = [d for d in deaths if not (d[0] > last_finish and d[1] in teardown)]
    deaths, excs = exit_after_completion(deaths, excs, exceptions, scanner, spec)
    deaths += excs
    last_death = max((d[0] for d in deaths), default=0)
    # a clean shutdown the user asked for (Ctrl-C) ends a log, it does not undo a death before it
    undo = max((h[0] for h in scanner.finishes() if h[1] not in weak), default=0)
    first_survived: dict[str, int] = {}          # exception type -> line of its first survived raise
    for e in exceptions:
        if e.type not in first_survived and scanner.last_progress > e.line and _progress_after(e.line, scanner):
            first_survived[e.type] = e.line
    again = {e.line for e in exceptions if first_survived.get(e.type, e.line) < e.line < scanner.last_progress}
    alive = sorted(d for d in deaths if (undo < d[0] or d[0] in trained) and not _progress_after(d[0], scanner)
                   and not _resumed_after(d[0], scanner)
                   and not _handled(d[0], scanner, last_death) and d[0] not in again
                   and not (d[1] == "exception" and (echo_handled(d[0], scanner) or handled_before(d[0], scanner, spec, last_death))))
    rerun = last_rerun(scanner, alive)     # the command typed again after its run died: that run is history
    if rerun:
        alive = [d for d in alive if d[0] > rerun]
    if alive:
        line, name, text = alive[0]
        return "crashed", {"line": line, "name": name, "evidence": text, **({"rerun": rerun} if rerun else {})}
    # a finish followed by a new run that made progress ended an earlier run of the log, not the log; nor did it
    # end the log when a command typed again after it (a shell prompt) was interrupted before any progress
    if last_finish and not last_finish < scanner.last("start") < scanner.last_progress \
            and not _interrupted_rerun(scanner, exceptions, last_finish):
        line, name, text = max(scanner.finishes())
        return "finished", {"line": line, "name": name, "evidence": text}
    return "running", None


def _interrupted_rerun(scanner: Scanner, exceptions: list[ExceptionInfo], last_finish: int) -> bool:
    """A command typed at a shell prompt after the finish at `last_finish`, then a KeyboardInterrupt with no
    progress after that command: the log's last run was stopped by the user while it started, not finished."""
    typed = typed_between(scanner, last_finish, 1 << 62)
    if not typed or scanner.last_progress > typed[-1]:
        return False
    return any(e.line > typed[-1] and e.type.rsplit(".", 1)[-1] == "KeyboardInterrupt" for e in exceptions)


def _handled(line: int, scanner: Scanner, last_death: int = 0) -> bool:
    """A recovery line (retrying, a request rejected, a worker group restarted) within the recovery
    window after `line`, with progress or another death after it: the process caught the error and
    went on, however few lines the log has left (a server that answered one request with HTTP 400
    keeps serving; a restarted worker group that later died of something else)."""
    after = int(verdict_spec()["recovery_window"]["after"])
    return any(line < h[0] <= line + after and max(scanner.last_progress, last_death) > h[0]
               for h in scanner.hits.get("recovery", ()))


def _resumed_after(line: int, scanner: Scanner) -> bool:
    """A later attempt began after `line` (a resume marker: a requeue's restart counter, a resume from the
    checkpoint) and made progress: the death at `line` ended an earlier attempt, not the log."""
    return any(line < h[0] < scanner.last_progress for h in scanner.hits.get("resume", ()))


def _progress_after(line: int, scanner: Scanner) -> bool:
    """Progress after `line` that a death there could not have printed: beyond `progress_gap`
    lines, any later progress of a `progress_strong` kind (a request served), or a step counter
    that went on by `progress_steps` or more."""
    spec = verdict_spec()
    last = scanner.last_progress
    return last > line + int(spec.get("progress_gap", 20)) or (last > line and (
        _served_after(line, scanner) or scanner.steps_after(line) >= int(spec.get("progress_steps", 2))))


def _served_after(line: int, scanner: Scanner) -> bool:
    """The log ends on a served request that is not the failed request's own access record: an ASGI
    server streaming its answer logs '"POST ... HTTP/1.1" 200 OK' when the response starts, so that line
    right after the traceback is the same request, not a later one (after another access record it is)."""
    last = scanner.last_progress
    return last > line and scanner.last_progress_name in verdict_spec().get("progress_strong", ()) and not (
        last == line + 1 and '" 200 OK' in scanner.line_text(last) and " HTTP/" not in scanner.line_text(line))


def _served_or_stepped(line: int, scanner: Scanner, steps: int) -> bool:
    """Work after `line` that only a live job prints: the log ends on a served request, or its step
    counter went on by `steps` or more (however few lines that took)."""
    return scanner.last_progress > line and (_served_after(line, scanner) or scanner.steps_after(line) >= steps)


def _raised_again(exc: ExceptionInfo, exceptions: list[ExceptionInfo], scanner: Scanner) -> bool:
    """An exception the process already survived once (progress after it), raised again with
    progress after it too: the same handled error (a tool call failing now and then)."""
    return scanner.last_progress > exc.line and any(
        e.type == exc.type and e.line < exc.line and _progress_after(e.line, scanner) for e in exceptions)


def _survived(line: int, scanner: Scanner) -> bool:
    return (scanner.last("finish") > line or _progress_after(line, scanner) or _handled(line, scanner)
            or echo_handled(line, scanner) or handled_before(line, scanner, verdict_spec()))


# --------------------------------------------------------------------------- fatality

def _context_applies(ctx: dict[str, Any], f: Finding, scanner: Scanner, status: str,
                     death_line: Optional[int] = None, raised: tuple[int, ...] = (),
                     rules_by_id: Optional[dict[str, Any]] = None) -> bool:
    if ctx.get("categories") and f.category not in ctx["categories"]:
        return False
    if ctx.get("rules") and f.rule_id not in ctx["rules"]:
        return False
    if f.category in ctx.get("except_categories", ()) or f.rule_id in ctx.get("except_rules", ()):
        return False
    # a rule whose library states the failure only as a Python warning: the warning is the signature
    if ctx.get("except_warns") and ((rules_by_id or {}).get(f.rule_id) or {}).get("warns"):
        return False
    if ctx.get("evidence") and not _rx(ctx["evidence"]).search(f.evidence):
        return False
    if any(s in scanner.seen for s in ctx.get("unless_seen", ())):
        return False
    if any(s not in scanner.seen for s in ctx.get("seen", ())):
        return False
    if ctx.get("single") and f.count > 1 and status != "finished" and (    # a later hit may be the fatal one
            ctx["single"] != "interleaved" or not retried_until_through(f.line, f.last_line or f.line, scanner)):
        return False
    if ctx.get("handled_before") and not handled_before(f.line, scanner, verdict_spec(), death_line or 0,
                                                         ctx["handled_before"]):
        return False
    if ctx.get("steps_after") and scanner.steps_after(f.last_line or f.line) < int(ctx["steps_after"]):
        return False
    if ctx.get("served_or_steps") and not _served_or_stepped(f.last_line or f.line, scanner, int(ctx["served_or_steps"])):
        return False
    if ctx.get("status") and (status not in ctx["status"] or not went_on_past(f.last_line or f.line, scanner, ctx)):
        return False    # (a job still alive whose work went on past the error: detect/exit_crash.py)
    if ctx.get("after") == "progress":      # progress is kept as its last line only
        if scanner.last_progress <= (f.last_line or f.line):
            return False
    elif ctx.get("after"):
        marks = [h[0] for h in scanner.hits.get(ctx["after"], ()) if h[0] > (f.last_line or f.line)]
        # then_died: the job died again after it (a death marker or an exception, `raised`: their lines)
        if not marks or (ctx.get("then_died") and not any(
                x > min(marks) for x in (*raised, *(h[0] for h in scanner.hits.get("death", ()))))):
            return False
    if ctx.get("near"):
        win = verdict_spec()["recovery_window"]
        last = f.last_line or f.line
        lo, hi = f.line - int(win["before"]), last + int(win["after"])
        near = [h[0] for h in scanner.hits.get(ctx["near"], ()) if lo <= h[0] <= hi]
        if not near:
            return False
        # the job went on after the recovery: progress, a finish, or a later death or error of its own
        # (a death within the after-death margin of the error is that error's own death, not a later one)
        # (not when the signature came back after its last recovery: that retry failed too)
        went_on = (not ctx.get("progress_only") and death_line is not None and max(near) >= last
                   and death_line > max(last, min(near)) + int(verdict_spec()["after_death"]["margin"]))
        # (a client's handled quote of the rejected request is not where the signature's work ended)
        served = f.line if echo_handled(last, scanner) else last
        if not (scanner.last_progress > served or scanner.last("finish") > last or went_on):
            return False
    return True


def _judge_fatality(findings: list[Finding], scanner: Scanner, status: str, finish: Optional[dict[str, Any]],
                    lang: Optional[str], death_line: Optional[int] = None, raised: tuple[int, ...] = (),
                    rules_by_id: Optional[dict[str, Any]] = None) -> None:
    spec = verdict_spec()
    for f in findings:
        if f.severity != "error" or f.rule_id.startswith("metric-") or f.rule_id == "unknown":
            continue
        last = f.last_line or f.line
        later_death = death_line if death_line is not None and death_line > last else None
        if later_death is None:      # or the job went on to fail in another way (a log cut before it died)
            later_death = next((g.line for g in findings if g is not f and g.severity == "error" and g.line > last
                                and g.rule_id != f.rule_id), None)
        for ctx in spec["contexts"]:
            if _context_applies(ctx, f, scanner, status, later_death, raised, rules_by_id):
                demote(f, ctx["severity"], tr(ctx["reason"], lang), ctx["id"])
                break
        if (f.severity == "error" and status == "finished" and finish is not None
                and not {f.category, f.rule_id} & {*spec["finished"].get("keep_categories", ()), *spec["finished"].get("keep_rules", ())}
                and not typed_after_finish(scanner, finish["line"], f.line)):
            key = "reason_before" if f.line > finish["line"] and spec["finished"].get("reason_before") else "reason"
            demote(f, spec["finished"]["severity"], tr(spec["finished"][key], lang, line=finish["line"]), "finished")


def judge(report: Report, findings: list[Finding], exceptions: list[ExceptionInfo], exc: Optional[ExceptionInfo],
          scanner: Scanner, lang: Optional[str], rules_by_id: dict[str, Any],
          taxonomy: Optional[dict[str, str]] = None, engine: Any = None, metrics: Any = None) -> list[Finding]:
    """Status, fatality, the unknown finding, ranking and actions; returns the sorted findings.
    `engine`: its active rules are the nearest-failure index (detect/nearest.py); `metrics`: the scan's
    metric tracker (detect/metrics.py), where a TrainingObserver ran."""
    status, evidence = status_of(scanner, exceptions, exc, report.lines)
    rerun = evidence.pop("rerun", 0) if evidence else 0
    report.extra["status"] = status
    report.extra["death"] = evidence if status == "crashed" else None
    wrapped_message(findings, [*exceptions, *([exc] if exc is not None else [])], scanner, engine, rules_by_id,
                    verdict_spec().get("wrapped_message"), report.unless_rules)
    weak = status == "finished" and evidence is not None and evidence["name"] in verdict_spec().get("weak_finish", ())
    _judge_fatality(findings, scanner, status, evidence if status == "finished" and not weak else None, lang,
                    evidence["line"] if status == "crashed" and evidence else None, tuple(e.line for e in exceptions),
                    rules_by_id)
    corroborate(findings, lang)
    explain_metric(findings, lang, report.extra.get("metrics"))
    metric_outranks_warning(findings, status, lang)
    settled(findings, scanner, lang)
    nan_passed(findings, metrics, scanner, status, lang)
    stalled(findings, scanner, status, lang)
    request_never_answered(findings, scanner, verdict_spec().get("dropped_request"), lang)
    init_incomplete(findings, scanner, verdict_spec().get("init_incomplete"), lang)
    hung_until_killed(findings, scanner, report, verdict_spec().get("hung_until_killed"), lang)
    memory_at_limit(findings, scanner, report, verdict_spec().get("memory_at_limit"), lang)
    errors = [f for f in findings if f.severity == "error"]
    judged_here = exc is not None and any(f.line == exc.line and f.judgement for f in findings)
    if exc is not None and not errors and not judged_here:     # a rule judged that very line: no second opinion
        # a headline that only points at the stack trace above: the unrecognised exception it points at
        lookback = int(verdict_spec()["unknown"]["symptom_lookback"])
        head = (_cause_before(exc, exceptions, findings, lookback) if opaque_headline(exc) else None) or (
            producer_thread_exception(exc, exceptions, lookback)) or exc
        u = unknown_finding(head, lang)
        if u.severity == "error" and status != "crashed" and (status == "finished" or   # (after it: teardown)
                _survived(exc.line, scanner) or _raised_again(exc, exceptions, scanner) or exc.thread):
            reason = (verdict_spec()["unknown"]["thread_reason"] if exc.thread else verdict_spec()["finished"]["reason_before"]
                      if status == "finished" and evidence and exc.line > evidence["line"] else
                      next(c for c in verdict_spec()["contexts"] if c["id"] == "recovered")["reason"])
            demote(u, "warning", tr(reason, lang, line=evidence["line"] if evidence else 0),
                    "background-thread" if exc.thread else "survived")
        findings.append(u)
    elif errors and all(f.role == "symptom" for f in errors):
        # Only cascade symptoms fired (peer timeouts, a launcher summary): an exception that no
        # rule explains and that is not the launcher's own wrapper is the better root-cause guess.
        root = root_exception(exceptions)
        if root is None and exc is not None and _candidate(exc) and (
                exc.type.rsplit(".", 1)[-1] not in verdict_spec()["death_reports"]):
            root = exc      # no traceback parsed (pytest's "E   TypeError: ..."), a bare exception line at the end
        covered = [f for f in findings if root is not None and f.line <= root.line <= (f.last_line or f.line)]
        if root is not None and covered and all(f.role == "symptom" for f in covered):
            # the last exception is itself only a symptom's ("Engine core initialization failed. See
            # root cause above"): the cause is the unrecognised exception printed just before it
            root = _cause_before(root, exceptions, findings, int(verdict_spec()["unknown"]["symptom_lookback"]))
            covered = []
        if root is not None and not covered:
            findings.append(unknown_finding(root, lang))
        elif root is not None:
            promote_covering(covered, root.line, lang)
    if report.extra.get("thread_dump") and not any(f.severity == "error" for f in findings):
        from llmtriage.detect.threaddump import hang_finding   # deferred: loaded only by scans that met a thread dump
        hang = hang_finding(report.extra.get("thread_dump"), scanner.last_progress, lang, scanner, status, evidence)
        if hang is not None:
            findings.append(hang)
    if status == "crashed" and evidence is not None and (
            not any(f.severity == "error" for f in findings)
            or (evidence["name"] in verdict_spec()["unknown"].get("death_over_symptoms", ())
                and all(f.role == "symptom" for f in findings if f.severity == "error"))):
        findings.append(death_unknown(evidence, lang))
    after_death(findings, evidence if status == "crashed" else None, lang, scanner)
    if rerun and evidence is not None:
        earlier_run(findings, rerun, evidence["line"], lang, evidence.get("evidence") or "")
    timeouts_after_death(findings, lang)
    crash_after_cause(findings, verdict_spec().get("crash_after_cause"), lang)
    oom_on_held_gpu(findings, verdict_spec().get("oom_on_held_gpu"), lang)
    kill_after_term(findings, verdict_spec().get("kill_after_term"), lang)
    wrapper_yields_to_inner(findings, verdict_spec().get("wrapper_inner"), lang)
    death_after_warning_cause(findings, verdict_spec().get("death_after_warning"), set(verdict_spec()["explains_death"]),
                              verdict_spec()["explains_reason"], lang)
    yield_unknown(findings, lang, scanner)
    recovered_named_by_death(findings, verdict_spec().get("named_by_death"), lang)
    retries_exhausted(findings, scanner, verdict_spec().get("named_by_death"), lang)
    death_repeats(findings, exc, status, verdict_spec().get("named_by_death"), lang)
    symptom_death_recovered(findings, verdict_spec().get("named_by_death"), lang)
    resumed_interrupted_save(findings, scanner, verdict_spec().get("interrupted_save"), lang)
    crash_has_error(findings, status, evidence, exceptions, lang)
    if taxonomy:
        name_families(findings, exceptions, scanner, lang, taxonomy, engine)
    # a kill known only now (a death no rule named, placed in the scheduler-kill family): once more
    hung_until_killed(findings, scanner, report, verdict_spec().get("hung_until_killed"), lang)
    fallback_failed(findings, exceptions, (verdict_spec().get("fallback_chain") or {}).get("reason"), lang)
    interrupted_wait(findings, exceptions, scanner, status, verdict_spec().get("interrupted_wait"), lang)
    stopped_while_pinned(findings, scanner, verdict_spec().get("interrupted_wait"), lang)
    category_beside(findings, verdict_spec().get("category_beside"), lang)
    driver_older_than_cann(findings, scanner, verdict_spec().get("ascend_versions"), lang)
    peer_arrived_late(findings, scanner, verdict_spec().get("hccl_skew"), lang)
    installed_yet_missing(findings, exceptions, scanner, verdict_spec().get("installed_yet_missing"), lang)
    garbage_size_alone(findings, exceptions, verdict_spec().get("garbage_size_alone"), lang)
    name_missing_ranks(findings, scanner, verdict_spec().get("hccl_roster"), lang)
    input_grew_before_oom(findings, scanner, verdict_spec().get("input_growth"), lang)
    findings.sort(key=Finding.sort_key)
    bar_outlasts_timeout(findings, scanner, verdict_spec().get("bar_outlasts_timeout"))
    seen = run_end_seen(scanner, status)
    if rank_left_early(findings, scanner, verdict_spec().get("rank_left_early")):
        seen = seen | {verdict_spec()["rank_left_early"]["fact"]}
    for f in findings:
        f.action, f.action_reason = action_for(f, seen, lang, rules_by_id, report.extra.get("phase"),
                                               report.extra.get("throughput"))
    root_f = next((f for f in findings if f.severity == "error"), None)
    if root_f is not None:
        report.extra["action"], report.extra["action_reason"] = root_f.action, root_f.action_reason
    else:
        report.extra["action"], report.extra["action_reason"] = "none", tr(action_spec()["generic"]["none"], lang)
    return findings


_WRAPPERS = {"ChildFailedError", "CalledProcessError", "SystemExit", "ProcessRaisedException", "ProcessExitedException"}


def _cause_before(last: ExceptionInfo, exceptions: list[ExceptionInfo], findings: list[Finding],
                  lookback: int) -> Optional[ExceptionInfo]:
    """The latest exception within `lookback` lines before `last` that no finding covers (not benign,
    not a launcher's wrapper, not a background thread's), or None."""
    for exc in reversed(exceptions):
        if exc.line >= last.line or exc.thread:
            continue
        if last.line - exc.line > lookback:
            return None
        if _candidate(exc) and not any(f.line <= exc.line <= (f.last_line or f.line) for f in findings):
            return exc
    return None


def _candidate(exc: ExceptionInfo) -> bool:
    """Neither benign (Ctrl-C) nor a wrapper of a failure told elsewhere (a launcher's, a message
    that only points at the logs)."""
    short = exc.type.rsplit(".", 1)[-1]
    return not is_benign(exc) and short not in _WRAPPERS and not points_elsewhere(exc)


def root_exception(exceptions: list[ExceptionInfo]) -> Optional[ExceptionInfo]:
    """The last exception that is neither benign (Ctrl-C) nor a launcher's wrapper of a child failure."""
    return next((exc for exc in reversed(exceptions) if _candidate(exc)), None)
