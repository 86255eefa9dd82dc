"""The detection engine (layer 2): one multi-pattern pass over binary blocks, then confirmation.

1. Blocks of ~64 KiB (cut at a newline; forced cut at 1 MiB) are scanned once with an RE2 `Set`
   holding every rule pattern, so the cost barely grows with the number of rules. Where that Set's
   DFA cache thrashes (diverse text, nearly every line a hit), an RE2 Set of literals each match
   must contain takes over for a while (`LiteralSet`). Without google-re2 the same blocks go
   through a gate on those literals and stdlib `re` on bytes (slower, same results;
   `mode="reference"` skips the gate and is the oracle for equivalence tests).
2. For the patterns a block flags, hit positions are found with that one pattern; each hit
   segment (a line, or one `\\r` redraw of a progress bar) is attributed to its original line.
3. Per rule only counters, the first hit and the last line are kept (bounded memory); the first
   hit is confirmed with `regex` on at most 16 KiB, with a timeout, to take the captures.
4. Findings are ranked: causes before symptoms, errors before warnings, priority, earliest line.
   Then `verdict.judge` decides the status (crashed/finished/running), which signatures were
   survived, the `unknown` finding (an unmatched exception or the death evidence) and the actions.
"""
from __future__ import annotations

import io
import re
from time import perf_counter
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Optional

from llmtriage.findings import ExceptionInfo, Finding, Report
from llmtriage.detect.verdict import Scanner as VerdictScanner, judge
from llmtriage.report import redact as _redact
from llmtriage.ruleset.regexsafety import bounded_compile
from llmtriage.ruleset.datafiles import use_data
from llmtriage.ruleset.verified import best_run
from llmtriage.engine.logparse import (EVIDENCE_CAP, TracebackParser, decode_line, iter_blocks, match_view, normalise_text, split_prefix)

try:  # pragma: no cover - exercised when google-re2 is installed
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

RE2_MAX_MEM = 256 << 20
# The Set's budget caps its DFA state cache, which is most of the engine's memory: ~3 MB on ordinary
# logs, but ~30-40 MB with 156 rules where nearly every line is a different hit (the benchmark's
# every-line-a-hit log). When full, RE2 empties the cache and goes on (a many-match DFA never gives
# up half-way), so results stay exact, but a budget below the working set costs ~100x in speed;
# the thrash guard below hands such input to the literal Set within about a second.
RE2_SET_MEM = 8 << 20
# Below this Set throughput (bytes/s over a window of blocks, or over THRASH_MIN_S of scanning) the
# input defeats the DFA cache, and the scan takes the literal Set (see LiteralSet), whose DFA is
# bounded by the literals, for LITERAL_STAY bytes (4x longer each further time within a scan: the
# literal Set is less selective, so ordinary logs scan faster on the pattern Set).
THRASH_BYTES_PER_S = 1 << 20
THRASH_MIN_S = 0.5
LITERAL_STAY = 1 << 20
LITERAL_SET_MEM = 8 << 20
LITERAL_CAP = 12
THRASH_WINDOW = 256 << 10
REGEX_TIMEOUT_S = 0.5
MAX_RANKS = 4096
RANK_SAMPLES = 2000
CAPTURE_SAMPLES = 8
LOCATE_LINE_SPAN = 2048      # below this many bytes, hits are attributed line by line
_BARE_EXC = r"\b[A-Z][A-Za-z0-9_]*(?:Error|Exception): "
_BARE_EXC_TAIL = 60          # a bare "XError: ..." counts as the crash only near the end of the log
_TB_MARK = b"Traceback (most recent call last)"
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


_BOUNDED = re.compile(r"(?<!\\)\{(\d+),(\d+)\}")
_SF_TOKEN = re.compile(r"\\.|\[\^?\]?|\]", re.S)


def relax_bounds(pattern: str, limit: int = 8) -> str:
    """A superset of `pattern` for the RE2 Set: `x{m,n}` with a large n becomes `x{m,}`.

    RE2 expands bounded repeats, so `[^\\n]{0,400}` costs hundreds of states per pattern and made
    the Set compile ~20x slower; the exact pattern still decides every hit (see `_bytes_pattern`)."""
    return _BOUNDED.sub(lambda m: m.group(0) if int(m.group(2)) <= limit else "{%s,}" % m.group(1), pattern)


def set_form(pattern: str) -> tuple[str, bool]:
    """The pattern as the RE2 Set holds it, and whether the Set's hits are then exact.

    Hits are decided by stdlib bytes patterns; the Set (Latin-1, see _compile_set) agrees with them
    except in three places: large bounds are relaxed (relax_bounds), RE2's `\\s` lacks the vertical
    tab that Python's has (widened here: `\\s` becomes `[\\s\\x0b]`, and `\\S` `[^\\s\\x0b]`; a
    `\\S` inside a class stays a superset), and `(?i)` folds Latin-1 letters in non-ASCII patterns.
    Inexact entries are confirmed line by line (Engine._exact)."""
    out: list[str] = []
    exact = pattern.isascii()
    in_class = False
    last = 0
    # Only escapes, "[" (with a leading "^" and "]" that belong to it) and "]" change anything:
    # the text between them is copied in one piece (this runs for every pattern at start-up).
    for m in _SF_TOKEN.finditer(pattern):
        out.append(pattern[last:m.start()])
        last = m.end()
        tok = m.group()
        if tok[0] == "\\":
            e = tok[1]
            if e == "s":
                out.append("\\s\\x0b" if in_class else "[\\s\\x0b]")
            elif e == "S" and not in_class:
                out.append("[^\\s\\x0b]")
            else:
                exact = exact and e != "S"
                out.append(tok)
        elif tok[0] == "[" and not in_class:
            out.append(tok)
            in_class = True
        else:                       # "]", or a "[" (and what follows it) inside a class
            for ch in tok:
                if ch == "]" and in_class:
                    in_class = False
                out.append(ch)
    out.append(pattern[last:])
    form = "".join(out)
    relaxed = relax_bounds(form)
    return relaxed, exact and relaxed == form


def render_template(template: str, captures: dict[str, str]) -> str:
    def seg(m: re.Match[str]) -> str:
        names = _PLACEHOLDER.findall(m.group(1))
        if all(captures.get(n) for n in names):
            return _PLACEHOLDER.sub(lambda p: captures[p.group(1)], m.group(1))
        return ""

    out = _SEGMENT.sub(seg, template)
    return _PLACEHOLDER.sub(lambda p: captures.get(p.group(1)) or "?", out).strip()


@dataclass
class _RuleState:
    count: int = 0
    first_line: int = 0
    last_line: int = 0
    first_seg: bytes = b""
    more_segs: list[bytes] = field(default_factory=list)   # a few later hits, for captures the first lacks
    ranks: set[int] = field(default_factory=set)
    sampled: int = 0


class Engine:
    """Compiled form of a RuleSet. Reusable across inputs; not thread-safe."""

    def __init__(self, ruleset: Any, *, lang: Optional[str] = None, mode: str = "auto",
                 severities: Optional[set[str]] = None, disabled: frozenset[str] = frozenset(),
                 observers: Optional[list[Callable[["Engine"], Any]]] = None,
                 set_mem: int = RE2_SET_MEM, thrash_rate: Optional[float] = None):
        self.ruleset = ruleset
        # Block observers (metric detectors, phase/step tracking): factories called once per scan,
        # returning objects with feed(lines, view, line_base) and finish(report, findings).
        self.observers = default_observers() if observers is None else observers
        self.lang = lang
        self.rules = [r for r in ruleset.rules if r["id"] not in disabled and r.get("status") != "deprecated"]
        if getattr(ruleset, "secrets", None):
            _redact.install(ruleset.secrets)      # the credential catalogue every renderer masks with
        if mode == "auto":
            mode = "re2" if _re2 is not None else "python"
        if mode == "re2" and _re2 is None:
            raise RuntimeError("google-re2 is not installed")
        if mode not in ("re2", "hyperscan", "python", "reference"):
            raise ValueError(f"unknown engine mode {mode!r}")
        self.mode = mode
        self.patterns: list[str] = []
        index: dict[str, int] = {}
        self.any_users: list[list[int]] = []       # pattern -> rule indices using it in match.any
        self.doc_users: list[bool] = []            # pattern used by requires/unless
        self.rule_any: list[list[int]] = []

        def add(p: str) -> int:
            if p not in index:
                index[p] = len(self.patterns)
                self.patterns.append(p)
                self.any_users.append([])
                self.doc_users.append(False)
            return index[p]

        self.rule_req: list[list[int]] = []
        self.rule_unless: list[list[int]] = []
        for ri, r in enumerate(self.rules):
            ids = [add(p["regex"]) for p in r["match"]["any"]]
            for pi in ids:
                self.any_users[pi].append(ri)
            self.rule_any.append(ids)
            req = [add(p["regex"]) for p in r["match"]["requires"]]
            unl = [add(p["regex"]) for p in r["match"]["unless"]]
            for pi in req + unl:
                self.doc_users[pi] = True
            self.rule_req.append(req)
            self.rule_unless.append(unl)
        self.bare_idx = add(_BARE_EXC)
        # The traceback marker rides in the Set too, so blocks without one cost no extra scan.
        self.tb_idx = add(r"Traceback \(most recent call last\)")
        self._bytes_re: dict[int, Any] = {}
        self._not_re: dict[int, list[Any]] = {}
        self._py_re: dict[tuple[int, int], Any] = {}
        self._gate: Optional[tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]]] = None
        self.set = None
        self.set_mem = 0
        self._inexact: set[int] = set()     # Set entries that are supersets: confirm hits with `re`
        if self.mode == "hyperscan":
            from llmtriage.engine.hsengine import HyperscanSet
            from llmtriage.ruleset.loader import _cache_dir

            self.set = HyperscanSet([relax_bounds(p) for p in self.patterns], _cache_dir(), set_mem)
            self._inexact = set(range(len(self.patterns)))     # PCRE and RE2 classes differ at the edges
        elif self.mode == "re2":
            forms = [set_form(p) for p in self.patterns]
            self._forms = [f for f, _ in forms]
            self.set, self.set_mem = _compile_set(self._forms, set_mem)
            if self.set is None:   # a huge user rule set: the literal-gated stdlib path has no state budget
                self.mode = "python"
            self._inexact = {pi for pi, (_, exact) in enumerate(forms) if not exact}
        self.thrash_rate = THRASH_BYTES_PER_S if thrash_rate is None else thrash_rate
        self.leaves = 0                      # times this scan left the Set (see _leave_set)
        self._active: Any = self.set         # what _flagged and _locate ask: the Set, or the literal Set
        self._stay = self._away = 0          # bytes: how long to keep away from the Set (see _leave_set)
        self._litset: Optional[LiteralSet] = None

    def _leave_set(self) -> None:
        """The Set's DFA cache thrashes on this input (diverse text, nearly every position a new DFA
        state): answer with the literal Set for a while (see scan), 4x longer each further time."""
        self.leaves += 1
        self._away = self._stay
        self._stay *= 4
        if self.mode == "re2":      # drop the Set and its full DFA cache; it is compiled afresh on return
            self.set = _LazySet(self._forms, self.set_mem)
        if _re2 is None:
            self._active = None             # literal gate + stdlib `re` per block
            return
        if self._litset is None:
            self._litset = LiteralSet(self)
        self._active = self._litset

    # ---------------------------------------------------------------- compiled helpers
    def _bytes_pattern(self, pi: int) -> Any:
        """The exact pattern in stdlib `re` (python/reference modes, and a scan that left the Set)."""
        c = self._bytes_re.get(pi)
        if c is None:
            c = self._bytes_re[pi] = bounded_compile(("(?m)" + self.patterns[pi]).encode())
        return c

    def _not_patterns(self, ri: int) -> list[Any]:
        c = self._not_re.get(ri)
        if c is None:
            c = [bounded_compile(p["regex"].encode()) for p in self.rules[ri]["match"]["not"]]
            self._not_re[ri] = c
        return c

    def _flagged(self, view: bytes) -> list[int]:
        if self._active is not None:
            return self._active.Match(view)
        if self.mode == "reference":
            return [pi for pi in range(len(self.patterns)) if self._bytes_pattern(pi).search(view)]
        if self._gate is None:
            self._gate = _literal_gate(self)
        needles, always = self._gate
        low = view.lower()
        cand: set[int] = set(always)
        for (needle, icase), pis in needles:
            if needle in (low if icase else view):
                cand.update(pis)
        return [pi for pi in cand if self._bytes_pattern(pi).search(view)]

    # ---------------------------------------------------------------- scanning
    def scan(self, fh: BinaryIO, source: str = "-", *, on_line_count: Optional[Callable[[int], None]] = None
             ) -> Report:
        states: dict[int, _RuleState] = {}
        doc_hits: set[int] = set()
        self._doc_seg: dict[int, bytes] = {}
        tbp = TracebackParser()
        bare: Optional[tuple[int, bytes]] = None
        line_base = 1
        nbytes = 0
        forced_cuts = 0
        encodings: set[str] = set()
        obs = [factory(self) for factory in self.observers]
        use_data(getattr(self.ruleset, "data", None) or {})
        verdict = VerdictScanner()      # status evidence: death, finish, progress, retries
        self.leaves = 0
        self._active = self.set
        win_bytes, win_s = 0, 0.0
        self._stay, self._away = LITERAL_STAY, 0
        for chunk, forced in iter_blocks(fh):
            nbytes += len(chunk)
            forced_cuts += forced
            if not chunk.isascii():
                try:
                    chunk.decode("utf-8")
                except UnicodeDecodeError as exc:
                    if not (forced and exc.start > len(chunk) - 4):
                        chunk, gbk = _utf8_lines(chunk)     # rule patterns are UTF-8: GBK lines must be too
                        if gbk:
                            encodings.add("gb18030")
            lines, view = match_view(chunk)
            t0 = perf_counter()
            flagged = self._flagged(view)
            # a requires/unless pattern only needs its first hit: once seen, it is not located again
            todo = [pi for pi in flagged or () if self.any_users[pi] or pi == self.bare_idx
                    or (self.doc_users[pi] and pi not in doc_hits)]
            if todo:
                bare = self._handle(todo, lines, view, line_base, states, doc_hits, bare)
            on_set = self.set is not None and self._active is self.set
            if on_set:          # is the Set's DFA cache thrashing? then leave it for a while
                win_bytes += len(view)
                win_s += perf_counter() - t0
                if win_s >= THRASH_MIN_S or win_bytes >= THRASH_WINDOW:
                    if win_bytes < win_s * self.thrash_rate:
                        self._leave_set()
                    win_bytes, win_s = 0, 0.0
            elif self.set is not None:
                self._away -= len(view)
                if self._away <= 0:
                    self._active = self.set
            tbpos = view.find(_TB_MARK) if self._active is None or (flagged and self.tb_idx in flagged) else -1
            if tbpos >= 0 or tbp.active:
                start = 0 if tbp.active else view.rfind(b"\n", 0, tbpos) + 1
                ln = line_base + lines.count(b"\n", 0, start)
                for raw in lines[start:].split(b"\n"):
                    text, enc = decode_line(raw)
                    encodings.add(enc)
                    tbp.feed(ln, normalise_text(text))
                    ln += 1
            for o in obs:
                o.feed(lines, view, line_base)
            verdict.feed(lines, view, line_base)
            line_base += lines.count(b"\n")
            if on_line_count is not None:
                on_line_count(line_base)
        total_lines = line_base - 1 if nbytes and lines.endswith(b"\n") else line_base
        report = Report(source=source, lines=total_lines if nbytes else 0, bytes=nbytes, long_lines=forced_cuts)
        findings = self._findings(states, doc_hits, encodings)
        exc = tbp.headline()
        if exc is None and bare is not None and total_lines - bare[0] <= _BARE_EXC_TAIL:
            text, _ = decode_line(bare[1])
            pre = split_prefix(normalise_text(text))
            m = re.search(r"((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): ?(.*)", pre.text)
            if m:
                exc = ExceptionInfo(type=m.group(1), message=m.group(2)[:2000], line=bare[0], rank=pre.rank)
        by_line = {e.line: e for e in tbp.exceptions}
        for f in findings:
            e = by_line.get(f.line)
            if e is not None and e.user_frame is not None:
                f.location = e.user_frame
        errs = sorted((f for f in findings if f.severity == "error"), key=Finding.sort_key)
        if errs and errs[0].line in by_line:
            exc = by_line[errs[0].line]   # the exception behind the root cause, not the launcher's
        report.exception = exc
        for o in obs:
            o.finish(report, findings)
        # status, survived signatures, the unknown finding, ranking and actions (analyzer/verdict.py)
        report.findings = judge(report, findings, tbp.exceptions, exc, verdict, self.lang, self.ruleset.by_id)
        report.encoding = "gb18030" if "gb18030" in encodings else "utf-8"
        return report

    def _locate(self, flagged: list[int], view: bytes) -> list[tuple[int, int]]:
        """(segment start, pattern) for every line of `view` that a pattern matches, found by
        re-running the RE2 Set on halves of the block until the pieces are single lines. No
        per-pattern regex is compiled (bounded memory however many rules fire), sparse hits cost a
        few extra Set passes, and a block where every line hits costs one Set pass per line."""
        out: list[tuple[int, int]] = []
        keep = set(flagged)      # the caller passes only patterns that still need locating
        set_match = self._active.Match
        # a Set whose DFA cache thrashes makes every piece slow: leave it mid-block (see _leave_set)
        deadline = (perf_counter() + THRASH_MIN_S / 2 if self._active is self.set and self.thrash_rate > 0
                    and _re2 is not None else None)

        def match(piece: bytes) -> list[int]:
            nonlocal set_match, deadline
            if deadline is not None and perf_counter() > deadline:
                self._leave_set()
                set_match, deadline = self._active.Match, None
            return [pi for pi in set_match(piece) or () if pi in keep]

        stack = [(0, len(view), flagged)]
        while stack:
            a, b, ids = stack.pop()
            if b - a > LOCATE_LINE_SPAN:
                mid = view.rfind(b"\n", a, (a + b) // 2) + 1
                if mid <= a:
                    mid = view.find(b"\n", (a + b) // 2, b - 1) + 1
                if mid > a:
                    for lo, hi in ((mid, b), (a, mid)):
                        sub = match(view[lo:hi])
                        if sub:
                            stack.append((lo, hi, sub))
                    continue
            # a short piece: attribute per line
            pos = a
            while pos < b:
                nl = view.find(b"\n", pos, b)
                end = b if nl < 0 else nl
                if end > pos:
                    line_ids = match(view[pos:end]) if (end - pos) < (b - a) or a != pos else ids
                    for pi in line_ids or ():
                        if (self.any_users[pi] or self.doc_users[pi] or pi == self.bare_idx) and \
                                self._exact(pi, view, pos, end):
                            out.append((pos, pi))
                pos = end + 1
        out.sort()
        return out

    def _exact(self, pi: int, view: bytes, a: int, b: int) -> bool:
        """The Set holds relaxed patterns (see relax_bounds), and the literal Set answers supersets;
        confirm the exact pattern on the line."""
        if pi not in self._inexact and self._active is self.set:
            return True
        return self._bytes_pattern(pi).search(view, a, b) is not None

    def _locate_py(self, flagged: list[int], view: bytes) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for pi in flagged:
            if not (self.any_users[pi] or self.doc_users[pi]) and pi != self.bare_idx:
                continue
            pat = self._bytes_pattern(pi)
            last_seg = -1
            for m in pat.finditer(view):
                seg = view.rfind(b"\n", 0, m.start()) + 1
                if seg == last_seg:
                    continue
                end = view.find(b"\n", seg)
                end = len(view) if end < 0 else end
                if m.end() <= end or pat.search(view, seg, end):   # a match must lie within one line
                    out.append((seg, pi))
                    last_seg = seg
        out.sort()
        return out

    def _handle(self, flagged: list[int], lines: bytes, view: bytes, line_base: int,
                states: dict[int, _RuleState], doc_hits: set[int], bare: Optional[tuple[int, bytes]]
                ) -> Optional[tuple[int, bytes]]:
        events = self._locate(flagged, view) if self._active is not None else self._locate_py(flagged, view)
        events.sort()
        counted_to = 0
        newlines = 0
        done: set[tuple[int, int]] = set()
        for seg, pi in events:
            newlines += lines.count(b"\n", counted_to, seg)
            counted_to = seg
            line_no = line_base + newlines
            end = view.find(b"\n", seg)
            if end < 0:
                end = len(view)
            if pi == self.bare_idx:
                if bare is None or bare[0] != line_no:
                    bare = (line_no, view[seg:min(end, seg + EVIDENCE_CAP)])
                continue
            if self.doc_users[pi] and pi not in doc_hits:
                doc_hits.add(pi)
                self._doc_seg[pi] = view[seg:min(end, seg + EVIDENCE_CAP)]
            segment = None
            for ri in self.any_users[pi]:
                if (ri, seg) in done:
                    continue
                done.add((ri, seg))
                if segment is None:
                    segment = view[seg:min(end, seg + EVIDENCE_CAP)]
                if self.rules[ri]["match"]["not"] and any(n.search(segment) for n in self._not_patterns(ri)):
                    continue
                st = states.get(ri)
                if st is None:
                    st = states[ri] = _RuleState(first_line=line_no, first_seg=segment)
                if st.count and line_no == st.last_line:
                    continue
                if st.count and len(st.more_segs) < CAPTURE_SAMPLES:
                    st.more_segs.append(segment)
                st.count += 1
                st.last_line = line_no
                if st.sampled < RANK_SAMPLES and len(st.ranks) < MAX_RANKS:
                    st.sampled += 1
                    ls = lines.rfind(b"\n", 0, seg) + 1
                    head = lines[ls:ls + 64]
                    if head[:1] in (b"[", b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9") or b": " in head:
                        pre = split_prefix(decode_line(head)[0])
                        if pre.rank is not None:
                            st.ranks.add(pre.rank)
        return bare

    # ---------------------------------------------------------------- findings
    def _py_regex(self, ri: int, ai: int) -> Any:
        key = (ri, ai)
        c = self._py_re.get(key)
        if c is None:
            c = self._py_re[key] = _py_compile(self.rules[ri]["match"]["any"][ai]["regex"])
        return c

    def _captures(self, ri: int, text: str) -> dict[str, str]:
        for ai in range(len(self.rules[ri]["match"]["any"])):
            m = self._py_regex(ri, ai).search(text)      # time-bounded (see regexsafety.bounded_compile)
            if m:
                return {k: v for k, v in m.groupdict().items() if v is not None}
        return {}

    def _findings(self, states: dict[int, _RuleState], doc_hits: set[int], encodings: set[str]) -> list[Finding]:
        out = []
        for ri, st in states.items():
            if any(pi not in doc_hits for pi in self.rule_req[ri]):
                continue
            if any(pi in doc_hits for pi in self.rule_unless[ri]):
                continue
            rule = self.rules[ri]
            raw_text, enc = decode_line(st.first_seg)
            encodings.add(enc)
            pre = split_prefix(normalise_text(raw_text))
            caps = self._captures(ri, pre.text)
            wanted = set(_PLACEHOLDER.findall(rule["message"]))
            for seg in st.more_segs:
                if wanted <= set(caps):
                    break
                more = self._captures(ri, split_prefix(normalise_text(decode_line(seg)[0])).text)
                for k, v in more.items():
                    caps.setdefault(k, v)
            for pi in self.rule_req[ri]:       # numbers printed on a required line (e.g. "72 > 32")
                if wanted <= set(caps):
                    break
                seg = self._doc_seg.get(pi)
                if seg is not None:
                    m = _py_compile(self.patterns[pi]).search(split_prefix(normalise_text(decode_line(seg)[0])).text)
                    if m:
                        for k, v in m.groupdict().items():
                            if v is not None:
                                caps.setdefault(k, v)
            text = self.ruleset.text(rule, self.lang)
            rank = pre.rank
            if rank is None and caps.get("rank", "").isdigit():
                rank = int(caps["rank"])
            out.append(Finding(
                rule_id=rule["id"], category=rule["category"], severity=rule["severity"], title=text["title"],
                message=render_template(text["message"], caps), line=st.first_line, evidence=_redact.clip(pre.text.strip(), 2000),
                rank=rank, count=st.count, captures=caps, cause=text["explain"]["why"],
                explanation=text["explain"]["what"], fixes=[self._fix(f) for f in text["fixes"]], role=rule["role"],
                confidence=rule["confidence"], priority=rule["priority"], last_line=st.last_line,
                ranks=sorted(st.ranks), references=list(rule["references"]),
            ))
        return out

    def _fix(self, f: dict[str, Any]) -> dict[str, Any]:
        out = fix_entry(f)
        if f.get("verified_by"):
            rec = best_run(getattr(self.ruleset, "verified", {}).get(f["verified_by"]))
            out["verified"] = bool(rec and rec.get("verified") is True)
            if rec:
                out["verification"] = {k: rec.get(k) for k in ("device", "torch", "transformers", "date")}
        return out

def _located(engine: "Engine") -> list[int]:
    """The patterns a stand-in for the Set must answer: rules', the bare exception, the traceback mark."""
    return [pi for pi in range(len(engine.patterns))
            if engine.any_users[pi] or engine.doc_users[pi] or pi in (engine.bare_idx, engine.tb_idx)]


def _literal_index(engine: "Engine", key: Callable[[str, bool], Any]) -> tuple[dict[Any, list[int]], list[int]]:
    """key(literal, ignore_case) -> the patterns whose every match holds that literal (see
    literals.required_literals), and the patterns without a required literal."""
    from llmtriage.engine.literals import required_literals

    users: dict[Any, set[int]] = {}
    rest: list[int] = []
    for pi in _located(engine):
        lits = required_literals(engine.patterns[pi])
        if lits is None:
            rest.append(pi)
        for text, icase in lits or ():
            users.setdefault(key(text, icase), set()).add(pi)
    return {k: sorted(v) for k, v in sorted(users.items())}, rest


def _literal_gate(engine: "Engine") -> tuple[list[tuple[tuple[bytes, bool], list[int]]], list[int]]:
    """For the stdlib path: (needle, ignore ASCII case) -> patterns. Bytes patterns fold ASCII case
    only, and so does `bytes.lower`, so the gate never drops a hit."""
    users, rest = _literal_index(engine, lambda t, ic: (t.encode().lower() if ic else t.encode(), ic))
    return list(users.items()), rest


class _LazySet:
    """The pattern Set, compiled on first use (~20 ms): what the engine holds while it is away from
    the Set, so the thrashed DFA cache is freed before the literal Set's grows (peak RSS ~5 MB lower)."""

    def __init__(self, forms: list[str], mem: int):
        self._forms, self._mem, self._set = forms, mem, None

    def Match(self, data: bytes) -> Any:
        if self._set is None:
            self._set, _ = _compile_set(self._forms, self._mem)
        return self._set.Match(data)


class LiteralSet:
    """The engine's fallback when the pattern Set's DFA cache thrashes (diverse text where nearly
    every position is a new DFA state): the same `Match(bytes)` question, answered with a superset.

    One RE2 Set holds, for every pattern, literals that each of its matches must contain (see
    `literals.required_literals`; at most LITERAL_CAP characters of each, the end of the literal): a
    literal Set's DFA has at most one state per literal prefix (~1-2 MB with 160 rules), whatever
    the input. The rare pattern without a required literal goes to a small Set of its own.
    `Engine._exact` confirms every candidate on its line with the exact pattern."""

    def __init__(self, engine: "Engine"):
        users, rest = _literal_index(engine, lambda text, icase: (text[-LITERAL_CAP:], icase))
        keys = list(users)
        self.lit_pats = list(users.values())
        self.lits, _ = _compile_set([("(?i)" if icase else "") + _literal(text) for text, icase in keys],
                                    LITERAL_SET_MEM)
        self.rest_pats = rest
        self.rest = None
        if rest:
            self.rest, _ = _compile_set([set_form(engine.patterns[pi])[0] for pi in rest], LITERAL_SET_MEM)
        if self.lits is None or (rest and self.rest is None):   # pragma: no cover - literals always fit
            raise RuntimeError("literal Set does not compile")

    def Match(self, data: bytes) -> list[int]:
        out: set[int] = set()
        for li in self.lits.Match(data) or ():
            out.update(self.lit_pats[li])
        if self.rest is not None:
            out.update(self.rest_pats[i] for i in self.rest.Match(data) or ())
        return list(out)


def _utf8_lines(chunk: bytes) -> tuple[bytes, bool]:
    """`chunk` with each line that is not UTF-8 but decodes as GB18030 (GBK logs from Chinese
    Windows or locales) re-encoded as UTF-8, so that patterns holding Chinese text match it. A
    newline byte never occurs inside a GB18030 character, so lines and their numbers stay. Also
    says whether any line was GB18030."""
    out = chunk.split(b"\n")
    gbk = False
    for i, line in enumerate(out):
        if not line.isascii():
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                try:
                    out[i] = line.decode("gb18030").encode("utf-8")
                    gbk = True
                except UnicodeDecodeError:
                    pass
    return b"\n".join(out), gbk


def _literal(text: str) -> str:
    """`text` as an RE2 literal: ASCII punctuation and spaces as \\xHH, everything else as is."""
    return "".join(c if c.isalnum() or ord(c) > 127 else "\\x%02x" % ord(c) for c in text)


_PY_CACHE: dict[str, Any] = {}


def _compile_set(patterns: list[str], mem: int) -> tuple[Any, int]:
    """An unanchored RE2 Set of `patterns`, or (None, 0) if even a generous budget cannot hold it.

    `never_nl` keeps every match inside one line, which is all the engine counts (hits are
    attributed per line): no NFA thread survives a newline, so hit-dense logs create about half
    the DFA states and blocks scan faster. A larger budget is tried only if the program itself does
    not fit (thousands of user rules)."""
    for budget in (mem, 4 * mem, RE2_MAX_MEM):
        opts = _re2.Options()
        opts.max_mem = budget
        opts.log_errors = False
        opts.never_nl = True
        # Latin-1: one byte, one character, as in the stdlib bytes patterns that decide every hit.
        # In UTF-8 mode `[^\n]` does not match an invalid byte, and GBK logs are full of them.
        opts.encoding = _re2.Options.Encoding.LATIN1
        s = _re2.Set.SearchSet(opts)
        for p in patterns:
            s.Add("(?m)" + p)
        try:
            s.Compile()
        except _re2.error:
            continue
        return s, budget
    return None, 0


def _py_compile(pattern: str) -> Any:
    """`pattern` on text for captures: stdlib `re` when it cannot backtrack badly, else `regex`
    under a timeout (a timeout reads as no match); `regex` is imported only for such patterns."""
    c = _PY_CACHE.get(pattern)
    if c is None:
        c = _PY_CACHE[pattern] = bounded_compile(pattern)
    return c


def default_observers() -> list[Callable[[Engine], Any]]:
    """Observer factories shipped with llmtriage (`llmtriage.detect.observers.FACTORIES`, when present)."""
    try:
        from llmtriage.detect.observers import FACTORIES
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.endswith("observers"):
            return []
        raise
    return list(FACTORIES)


def fix_entry(f: dict[str, Any]) -> dict[str, Any]:
    """The finding's copy of a rule fix: title, detail and the optional keys it has."""
    out = {"title": f["title"], "detail": f["detail"]}
    for k in ("snippet", "when", "verified_by"):
        if f.get(k):
            out[k] = f[k]
    return out


def scan_bytes(engine: Engine, data: bytes, source: str = "-") -> Report:
    return engine.scan(io.BytesIO(data), source)
