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

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from llmtriage.findings import ExceptionInfo, Finding, Report
from llmtriage.engine.logparse import BENIGN_EXC, split_prefix
from llmtriage.engine.redact import clip
from llmtriage.detect.corroborate import corroborate
from llmtriage.detect.spec import action_spec, tr, verdict_spec
from llmtriage.detect.unknown import death_unknown, name_families, unknown_finding

try:  # pragma: no cover - exercised when google-re2 is installed
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

ACTIONS = ("retry", "fix", "replace-node", "none")
STATUSES = ("crashed", "finished", "running")
MAX_HITS = 256           # per marker kind: the last ones are kept (bounded memory on retry spam)
_PER_BLOCK = 64          # hits taken from one block per marker
_PROGRESS_TRIES = 4      # progress: last occurrences of a literal tried per block
_CANDIDATES = 512        # literal hits looked at per block (bounded cost when every line is a hit)
_PROGRESS_TAIL = 8192    # progress literals are first looked for in the last bytes of a block




@dataclass(frozen=True)
class Marker:
    name: str
    kind: str
    literals: tuple[bytes, ...]
    source: bytes
    tail: int = 0          # a death marker that counts only within this many lines of the log's end (0: anywhere)

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
                        int(m.get("tail", 0))) for m in verdict_spec()["markers"])


@lru_cache(maxsize=64)
def _rx(pattern: str) -> Any:
    return re.compile(pattern)


def _line_at(view: bytes, pos: int) -> tuple[int, int]:
    start = view.rfind(b"\n", 0, pos) + 1
    end = view.find(b"\n", pos)
    return start, len(view) if end < 0 else end


@lru_cache(maxsize=16)
def _literal_gate(marks: tuple[Marker, ...], skip: frozenset[str]) -> tuple[Any, tuple[Marker, ...]]:
    """One compiled alternation of the literals of `marks`, leaving out training/context facts
    already in `skip`, and the markers it covers."""
    active = tuple(m for m in marks if not (m.kind in ("training", "context") and m.name in skip))
    lits = sorted({lit for m in active for lit in m.literals}, key=len, reverse=True)
    if not lits:
        return None, active
    pattern = b"|".join(re.escape(lit) for lit in lits)
    return (_re2.compile(pattern) if _re2 is not None else re.compile(pattern)), active


_ERRORISH = re.compile(rb"(?i)\b(?:error|errors|fail|failed|failure|exception|fatal|abort(?:ed)?|cannot|unable)\b|\bwhat\(\)")
# warnings are the usual trap; frames are code; Hydra's "Error executing job with overrides: [...]"
# is the command line (data paths, config keys), not an error message
_NOT_CONTEXT = re.compile(rb"(?i)warn|^\s*File \"|^\s*Traceback|Error executing job with overrides")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").strip()[:300]


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
        self._gate, self._active = _literal_gate(self._others, frozenset())
        self._progress_gate = _literal_gate(tuple(self._progress_markers), frozenset())[0]
        self._tail: list[tuple[int, bytes]] = []      # the last two blocks: what a death line followed

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        self._tail = [*self._tail[-1:], (line_base, view)]
        self._progress(lines, view, line_base)
        if self._gate is None:
            return
        cands: set[tuple[int, int]] = set()
        for n, hit in enumerate(self._gate.finditer(view)):
            if n >= _CANDIDATES:
                break
            cands.add(_line_at(view, hit.start()))
        spans: dict[Marker, list[tuple[int, int]]] = {}
        for a, b in sorted(cands):       # every marker with a literal on the line (literals may overlap)
            text = view[a:b]
            for m in self._active:
                if any(lit in text for lit in m.literals):
                    spans.setdefault(m, []).append((a, b))
        changed = False
        for m, todo in spans.items():
            found = 0
            for a, b in todo:
                if not m.regex.search(view, a, b):
                    continue
                self.seen.update((m.name, m.kind))
                if m.kind in ("training", "context"):
                    changed = True
                    break
                kept = self.hits.setdefault(m.kind, [])
                kept.append((line_base + lines.count(b"\n", 0, a), m.name, _text(view[a:b])))
                if len(kept) > 2 * MAX_HITS:
                    del kept[:-MAX_HITS]
                found += 1
                if found >= _PER_BLOCK:
                    break
        if changed:     # a training/context fact is known once: stop looking for its literals
            self._gate, self._active = _literal_gate(self._others, frozenset(self.seen))

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

    def error_lines_around(self, line: int, after: int = 0) -> str:
        """The error lines among the `family.context_lines` lines before `line` (1-based) and the
        `after` lines after it, when they are still in the last two blocks: what a framework printed
        around an opaque death ("Engine process failed to start. See stack trace", "The Inner error
        is reported as above", a C++ terminate whose what() follows)."""
        spec = verdict_spec()["unknown"]["family"]
        want, keep = int(spec["context_lines"]), int(spec["context_keep"])
        rows: list[bytes] = []
        for base, view in self._tail:
            for n, raw in enumerate(view.split(b"\n"), start=base):     # line_base is the block's first line
                if line - want <= n <= line + after and n != line:
                    rows.append(raw)
        picked = [r for r in rows if _ERRORISH.search(r) and not _NOT_CONTEXT.search(r)]
        return "\n".join(_text(r) for r in picked[-keep:])

    def line_text(self, line: int) -> str:
        """Line `line` (1-based) of the input when it is still in the last two blocks, else ''."""
        for base, view in self._tail:
            if line >= base:
                rows = view.split(b"\n", line - base + 1)
                if len(rows) > line - base:
                    return _text(rows[line - base])
        return ""

    @property
    def last_progress(self) -> int:
        if self._last_prog is None:
            return 0
        base, lines, pos = self._last_prog
        return base + lines.count(b"\n", 0, pos)

    def last(self, kind: str) -> int:
        return max((h[0] for h in self.hits.get(kind, ())), default=0)


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
    excs = [(e.line, "exception", clip(e.headline, 300)) for e in exceptions
            if e.type.rsplit(".", 1)[-1] not in BENIGN_EXC]
    if last_finish and not any(line > last_finish for line, _, _ in excs):
        teardown = set(spec.get("teardown_after_finish", ()))
        deaths = [d for d in deaths if not (d[0] > last_finish and d[1] in teardown)]
    deaths += excs
    last_death = max((d[0] for d in deaths), default=0)
    alive = sorted(d for d in deaths if last_finish < d[0] and not _progress_after(d[0], scanner)
                   and not _handled(d[0], scanner, last_death))
    if alive:
        line, name, text = alive[0]
        return "crashed", {"line": line, "name": name, "evidence": text}
    if last_finish:
        line, name, text = max(scanner.hits["finish"])
        return "finished", {"line": line, "name": name, "evidence": text}
    return "running", None


def _handled(line: int, scanner: Scanner, last_death: int = 0) -> bool:
    """A recovery line (retrying, a request rejected, a worker group restarted) within the recovery
    window after `line`, with progress or another death after it: the process caught the error and
    went on, however few lines the log has left (a server that answered one request with HTTP 400
    keeps serving; a restarted worker group that later died of something else)."""
    after = int(verdict_spec()["recovery_window"]["after"])
    return any(line < h[0] <= line + after and max(scanner.last_progress, last_death) > h[0]
               for h in scanner.hits.get("recovery", ()))


def _progress_after(line: int, scanner: Scanner) -> bool:
    """Progress after `line` that a death there could not have printed: beyond `progress_gap`
    lines, or any later progress of a `progress_strong` kind (a request served)."""
    spec = verdict_spec()
    last = scanner.last_progress
    return last > line + int(spec.get("progress_gap", 20)) or (
        last > line and scanner.last_progress_name in spec.get("progress_strong", ()))


def _survived(line: int, scanner: Scanner) -> bool:
    return scanner.last("finish") > line or _progress_after(line, scanner) or _handled(line, scanner)


# --------------------------------------------------------------------------- fatality

def _demote(f: Finding, severity: str, reason: str, ctx: str) -> None:
    f.judgement = {"context": ctx, "severity_was": f.severity, "reason": reason}
    f.severity = severity


def _context_applies(ctx: dict[str, Any], f: Finding, scanner: Scanner, status: str,
                     death_line: Optional[int] = None) -> bool:
    if ctx.get("categories") and f.category not in ctx["categories"]:
        return False
    if ctx.get("evidence") and not _rx(ctx["evidence"]).search(f.evidence):
        return False
    if any(s in scanner.seen for s in ctx.get("unless_seen", ())):
        return False
    if any(s not in scanner.seen for s in ctx.get("seen", ())):
        return False
    if ctx.get("single") and f.count > 1 and status != "finished":   # a later hit may be the fatal one
        return False
    if ctx.get("near"):
        win = verdict_spec()["recovery_window"]
        last = f.last_line or f.line
        lo, hi = f.line - int(win["before"]), last + int(win["after"])
        near = [h[0] for h in scanner.hits.get(ctx["near"], ()) if lo <= h[0] <= hi]
        if not near:
            return False
        # the job went on after the recovery: progress, a finish, or a later death or error of its own
        went_on = death_line is not None and death_line > max(last, min(near))
        if not (scanner.last_progress > last or scanner.last("finish") > last or went_on):
            return False
    return True


def _judge_fatality(findings: list[Finding], scanner: Scanner, status: str, finish: Optional[dict[str, Any]],
                    lang: Optional[str], death_line: Optional[int] = None) -> None:
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
            if _context_applies(ctx, f, scanner, status, later_death):
                _demote(f, ctx["severity"], tr(ctx["reason"], lang), ctx["id"])
                break
        if (f.severity == "error" and status == "finished" and finish is not None
                and f.category not in spec["finished"].get("keep_categories", ())):
            _demote(f, spec["finished"]["severity"], tr(spec["finished"]["reason"], lang, line=finish["line"]), "finished")


def _after_death(findings: list[Finding], death: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if death is None:
        return
    spec = verdict_spec()["after_death"]
    cut = death["line"] + int(spec["margin"])
    # only a recognised cause makes later causes consequences: a peer's timeout or a launcher
    # summary printed first (other ranks' output comes earlier in the file) does not
    recognised = [f for f in findings if f.severity == "error" and f.rule_id != "unknown" and f.role == "cause"
                  and f.line <= cut]
    if not recognised:
        return
    for f in findings:
        if (f.severity == "error" and f.rule_id != "unknown" and f.line > cut and f.role == "cause"
                and f.category not in spec.get("exempt_categories", ())):
            f.role, f.priority = "symptom", 0
            f.judgement = {"context": "after-death", "severity_was": "error",
                           "reason": tr(spec["reason"], lang, line=death["line"])}


def _same_process(f: Finding, u: Finding) -> bool:
    return f.rank is None or u.rank is None or f.rank == u.rank or u.rank in f.ranks


def _yield_unknown(findings: list[Finding], lang: Optional[str]) -> None:
    spec = verdict_spec()
    reports = set(spec["death_reports"])
    explains = set(spec["explains_death"])
    for u in [f for f in findings if f.rule_id == "unknown" and f.severity == "error"]:
        earlier = [f for f in findings if f is not u and f.rule_id != "unknown" and f.judgement is None
                   and f.line <= u.line and _same_process(f, u)]
        if u.captures.get("type", "").rsplit(".", 1)[-1] in reports and any(f.severity == "error" for f in earlier):
            u.role = "symptom"          # it only reports a death that a recognised signature explains
            continue
        if any(f.severity == "error" and f.role == "cause" for f in earlier):
            continue
        causes = [f for f in earlier if f.severity == "warning" and f.role == "cause" and f.category in explains]
        if causes:
            best = max(causes, key=lambda f: (f.priority, f.line))
            best.judgement = {"context": "explains-death", "severity_was": "warning",
                              "reason": tr(spec["explains_reason"], lang, line=u.line)}
            best.severity = "error"
            u.role = "symptom"          # the promoted cause explains this exception: one root cause, not two





def judge(report: Report, findings: list[Finding], exceptions: list[ExceptionInfo], exc: Optional[ExceptionInfo],
          scanner: Scanner, lang: Optional[str], rules_by_id: dict[str, Any],
          taxonomy: Optional[dict[str, str]] = None) -> list[Finding]:
    """Status, fatality, the unknown finding, ranking and actions; returns the sorted findings."""
    status, evidence = status_of(scanner, exceptions, exc, report.lines)
    report.extra["status"] = status
    report.extra["death"] = evidence if status == "crashed" else None
    _judge_fatality(findings, scanner, status, evidence if status == "finished" else None, lang,
                    evidence["line"] if status == "crashed" and evidence else None)
    corroborate(findings, lang)
    errors = [f for f in findings if f.severity == "error"]
    judged_here = exc is not None and any(f.line == exc.line and f.judgement for f in findings)
    if exc is not None and not errors and not judged_here:     # a rule judged that very line: no second opinion
        u = unknown_finding(exc, lang)
        if u.severity == "error" and status != "crashed" and _survived(exc.line, scanner):
            ctx = next(c for c in verdict_spec()["contexts"] if c["id"] == "recovered")
            _demote(u, "warning", tr(ctx["reason"], lang), "survived")
        findings.append(u)
    elif errors and all(f.role == "symptom" for f in errors):
        # Only cascade symptoms fired (peer timeouts, a launcher summary): an exception that no
        # rule explains and that is not the launcher's own wrapper is the better root-cause guess.
        root = root_exception(exceptions)
        if root is not None and not any(f.line <= root.line <= (f.last_line or f.line) for f in findings):
            findings.append(unknown_finding(root, lang))
    if status == "running" and report.extra.get("thread_dump") and not any(f.severity == "error" for f in findings):
        from llmtriage.detect.threaddump import hang_finding   # deferred: loaded only by scans that met a thread dump
        hang = hang_finding(report.extra.get("thread_dump"), scanner.last_progress, lang)
        if hang is not None:
            findings.append(hang)
    if status == "crashed" and evidence is not None and not any(f.severity == "error" for f in findings):
        findings.append(death_unknown(evidence, lang))
    _after_death(findings, evidence if status == "crashed" else None, lang)
    _yield_unknown(findings, lang)
    if taxonomy:
        name_families(findings, exceptions, scanner, lang, taxonomy)
    findings.sort(key=Finding.sort_key)
    for f in findings:
        f.action, f.action_reason = action_for(f, scanner.seen, lang, rules_by_id)
    root_f = next((f for f in findings if f.severity == "error"), None)
    if root_f is not None:
        report.extra["action"], report.extra["action_reason"] = root_f.action, root_f.action_reason
    else:
        report.extra["action"], report.extra["action_reason"] = "none", tr(action_spec()["generic"]["none"], lang)
    return findings


_WRAPPERS = {"ChildFailedError", "CalledProcessError", "SystemExit", "ProcessRaisedException", "ProcessExitedException"}


def root_exception(exceptions: list[ExceptionInfo]) -> Optional[ExceptionInfo]:
    """The last exception that is neither benign (Ctrl-C) nor a launcher's wrapper of a child failure."""
    for exc in reversed(exceptions):
        short = exc.type.rsplit(".", 1)[-1]
        if short not in BENIGN_EXC and short not in _WRAPPERS:
            return exc
    return None


# --------------------------------------------------------------------------- actions

def _override_applies(o: dict[str, Any], f: Finding, seen: set[str]) -> bool:
    if o.get("categories") and f.category not in o["categories"]:
        return False
    if o.get("rules") and f.rule_id not in o["rules"]:
        return False
    if any(s not in seen for s in o.get("seen", ())):
        return False
    if any(s in seen for s in o.get("unless_seen", ())):
        return False
    # the log's own words (the evidence line and what the rule captured), never the rule's message: a
    # message that lists the possible causes ("preemption, time limit or a kill") would match them all
    if o.get("evidence") and not _rx(o["evidence"]).search("\n".join([f.evidence, *f.captures.values()])):
        return False
    for name, pat in (o.get("captures") or {}).items():
        if not _rx(pat).search(f.captures.get(name, "")):
            return False
    return True


def action_for(f: Finding, seen: set[str], lang: Optional[str], rules_by_id: dict[str, Any]) -> tuple[str, str]:
    """(action, reason) of one finding: survived -> none; else override, rule action, category default."""
    spec = action_spec()
    if f.judgement is not None and f.severity != "error":
        return "none", tr(spec["survived"], lang, reason=f.judgement["reason"])
    if f.severity == "info":
        return "none", tr(spec["generic"]["none"], lang)
    for o in spec["overrides"]:
        if _override_applies(o, f, seen):
            return o["action"], tr(o["reason"], lang)
    rule_action = (rules_by_id.get(f.rule_id) or {}).get("action")
    cat = spec["categories"].get(f.category) or spec["categories"]["unknown"]
    if rule_action and rule_action != cat["action"]:
        return rule_action, tr(spec["generic"][rule_action], lang)
    return cat["action"], tr(cat, lang)


def next_line(action: str, reason: str, lang: Optional[str]) -> str:
    """The human `Next: <action> — <reason>` line."""
    labels = action_spec()["labels"]
    name = tr(labels["actions"].get(action, {"en": action}), lang)
    sep = "：" if lang == "zh" else ": "
    return f"{tr(labels['next'], lang)}{sep}{name} — {reason}"


def status_word(status: str, lang: Optional[str]) -> str:
    return tr(verdict_spec()["status"].get(status, {"en": status}), lang)


def rule_action(rule: dict[str, Any], lang: Optional[str]) -> tuple[str, str]:
    """The default (context-free) action of a rule: its own, else its category's."""
    spec = action_spec()
    cat = spec["categories"].get(rule["category"]) or spec["categories"]["unknown"]
    own = rule.get("action")
    if own and own != cat["action"]:
        return own, tr(spec["generic"][own], lang)
    return cat["action"], tr(cat, lang)
