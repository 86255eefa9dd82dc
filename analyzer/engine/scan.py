"""One scan of one log (layer 2): the per-scan state and the block loop of the engine.

1. Blocks of ~64 KiB (cut at a newline; forced cut at 1 MiB) are asked of the engine's Set once:
   which patterns occur here? (`flagged`)
2. For the patterns a block flags, hit positions are found by re-asking the Set on halves of the
   block down to single lines (`locate`); each hit segment (a line, or one `\\r` redraw of a
   progress bar) is attributed to its original line (`handle`).
3. Per rule only counters, the first hit, a few later hits and the last line are kept (bounded
   memory); `engine.build` turns them into findings at the end.
4. Traceback lines go to the traceback parser; every block goes to the observers the engine was
   given; at the end each observer's `finish(report, findings)` runs in order (one may return the
   judged list that replaces the findings, see detect.observers.VerdictObserver).

Where the Set's DFA cache thrashes (diverse text, nearly every line a different hit), the scan
answers with the engine's literal Set for a while. The switch is counted, never timed, so one input
always takes one path: a block flagging THRASH_FLAGGED distinct patterns, or holding (in the part
located so far) at least `thrash_hits` hit lines of THRASH_PATTERNS distinct patterns, leaves the Set
for LITERAL_STAY bytes, 4x longer each further time.
"""
from __future__ import annotations

import io
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Optional

from llmtriage.engine import build
from llmtriage.engine.logparse import (EVIDENCE_CAP, TracebackParser, decode_line, iter_blocks, match_view,
                                       normalise_text, split_prefix)
from llmtriage.engine.re2set import HAVE_RE2, GatedSet, LazySet
from llmtriage.findings import ExceptionInfo, Finding, Report
from llmtriage.ruleset.datafiles import use_data

THRASH_HITS = 128            # hit lines in one block ...
THRASH_PATTERNS = 16         # ... of this many distinct patterns: the Set's DFA cache thrashes
THRASH_FLAGGED = 64          # distinct patterns flagged in one block: it thrashes, leave before locating
LITERAL_STAY = 1 << 20
GATED_BYTES = 64 << 10       # a log's first bytes are answered by the engine's gated set (no Set compile)
GATED_MAX_CANDIDATES = 128   # ... unless a block gates this many candidates: one program each costs more than the Set
# Past GATED_BYTES the literal Set picks the candidates (GatedSet.use_literals) and the pattern Set is
# compiled only when blocks keep having more than this many: a decayed mean over the blocks so far
# (weight LITERAL_GATED_DECAY for the past), or one block with more than GATED_MAX_CANDIDATES.
# Measured on the benchmark's training log, 874 rules: ~32 candidates a block (51 in the block of the
# final error), 38 MB/s gated vs 32 MB/s on the Set, and ~20 MB less peak RSS: the Set's compile and
# its DFA cache (~10-15 MB on a long log) never happen.
LITERAL_GATED_MAX_CANDIDATES = 48
LITERAL_GATED_DECAY = 0.875
MAX_RANKS = 4096
RANK_SAMPLES = 2000
CAPTURE_SAMPLES = 8
LOCATE_LINE_SPAN = 2048      # below this many bytes, hits are attributed line by line
BARE_EXC_TAIL = 60           # a bare "XError: ..." counts as the crash only near the end of the log
_TB_MARK = b"Traceback (most recent call last)"
_PYTEST_MARK = re.compile(rb"_{3} (?:ERROR (?:collecting|at setup of|at teardown of) |[Tt]est)")
# a warning that quotes an exception ("WARNING ... OSError: [Errno 24] Too many open files", a
# FutureWarning naming a ValueError) reports it, it does not die of it: never the crash's headline
_WARNING_LINE = re.compile(rb"\bWARN(?:ING)?\b|\[[Ww]arning\]|\b[A-Z]\w*Warning: |\bwarnings\.warn\b")
_BARE_HEAD = re.compile(r"((?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception)|Exception)): ?(.*)")
_QUOTE_BEFORE = re.compile(r"""["'`“「]""")
# a traceback's echo of the raising source line (plain `    raise X(...)`, IPython `---> 20 raise ...`,
# rich `│ ❱ 20 │ raise ...`): the message template in it is code, not what happened; the exception
# line below carries the message. No rule counts a hit there (a bare `raise Exception` quotes no message:
# a rule may key on it).
_SOURCE_RAISE = re.compile((r"(?:\[[^\]\n]{1,60}\]:?)?(?:[ \t]+|\s*-*>\s*\d+\s+|[ \t]*\d+[ \t]+"
                            r"|\s*│\s*(?:❱\s*)?\d+\s*│[\s│]*)raise\s+[A-Za-z_][\w.]*\(\s*[rfbu]?"
                            r"""["']""").encode())
_RANK_HEAD = (b"[", b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9")


@dataclass
class RuleState:
    count: int = 0
    first_line: int = 0
    last_line: int = 0
    first_seg: bytes = b""
    more_segs: list[tuple[int, bytes]] = field(default_factory=list)   # a few later hits (line, segment):
    #                                   captures the first lacks, and a hit whose numbers pass the rule's checks
    ranks: set[int] = field(default_factory=set)
    sampled: int = 0


class Scan:
    """The state of one scan: rule states, traceback parser, observers, and which Set answers."""

    def __init__(self, engine: Any, on_line_count: Optional[Callable[[int], None]] = None):
        self.engine = engine
        self.ruleset = engine.ruleset
        self.lang = engine.lang
        self.on_line_count = on_line_count
        self.states: dict[int, RuleState] = {}
        self.doc_hits: set[int] = set()
        self.doc_seg: dict[int, bytes] = {}
        self.tbp = TracebackParser()
        self.bare: Optional[tuple[int, bytes]] = None
        self.encodings: set[str] = set()
        self.leaves = 0                      # times this scan left the Set (see leave_set)
        self.active: Any = engine.set        # what flagged and locate ask: the Set, or the literal Set
        self._stay, self._away = LITERAL_STAY, 0
        self._cand_mean = 0.0                # decayed mean of the literal-gated blocks' candidates
        # the data files (verdict, versions...) parsed with the rule cache, before any detector reads one (no yaml here)
        use_data(getattr(self.ruleset, "data", None) or {})
        self.observers = [factory(self) for factory in engine.observers]

    @property
    def exceptions(self) -> list[ExceptionInfo]:
        return self.tbp.exceptions

    # ---------------------------------------------------------------- the loop
    def run(self, fh: BinaryIO, source: str) -> Report:
        eng = self.engine
        if isinstance(eng.set, LazySet) and not eng.set.compiled:
            if _known_size(fh) <= GATED_BYTES:      # 0 for a stream: start gated, move on after GATED_BYTES
                # until the Set is needed the gated set answers: a small log never compiles the Set
                self.active, self._away = eng.gated_set(), GATED_BYTES
            else:                            # a file too big for the bytes gate: the literal-gated set
                self._to_literal_gate()
        line_base, nbytes, forced_cuts = 1, 0, 0
        lines = b""
        for chunk, forced in iter_blocks(fh):
            nbytes += len(chunk)
            forced_cuts += forced
            lines, view = match_view(self._as_utf8(chunk, forced))
            self._match_block(lines, view, line_base)
            for o in self.observers:
                o.feed(lines, view, line_base)
            line_base += lines.count(b"\n")
            if self.on_line_count is not None:
                self.on_line_count(line_base)
        total = line_base - 1 if nbytes and lines.endswith(b"\n") else line_base
        report = Report(source=source, lines=total if nbytes else 0, bytes=nbytes, long_lines=forced_cuts)
        return self._finish(report)

    def _as_utf8(self, chunk: bytes, forced: bool) -> bytes:
        if not chunk.isascii():
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                if not (forced and exc.start > len(chunk) - 4):
                    chunk, gbk = utf8_lines(chunk)     # rule patterns are UTF-8: GBK lines must be too
                    if gbk:
                        self.encodings.add("gb18030")
        return chunk

    def _match_block(self, lines: bytes, view: bytes, line_base: int) -> None:
        eng = self.engine
        flagged = self.flagged(view)
        # a requires/unless pattern only needs its first hit: once seen, it is not located again
        todo = [pi for pi in flagged or () if eng.any_users[pi] or pi == eng.bare_idx
                or (eng.doc_users[pi] and pi not in self.doc_hits)]
        on_set = eng.set is not None and self.active is eng.set
        if on_set and HAVE_RE2 and len(todo) >= min(eng.thrash_hits, THRASH_FLAGGED):
            self.leave_set()        # a block this diverse thrashes the Set's DFA cache: locate on literals
            on_set = False
        events: list[tuple[int, int]] = []
        if todo:
            events = self.locate(todo, view) if self.active is not None else self._locate_py(todo, view)
            self._handle(events, lines, view, line_base)
        if on_set and self.active is eng.set and self._thrashing(events):
            self.leave_set()
        elif not on_set and eng.set is not None:
            self._away -= len(view)
            if self._away <= 0:
                if isinstance(self.active, GatedSet):
                    self._to_literal_gate()  # past the first GATED_BYTES: the literal Set picks candidates
                else:
                    self._to_set()
        if self.tbp.active or self.active is None or (flagged and eng.tb_idx in flagged):
            self._feed_traceback(lines, view, line_base)

    def _to_set(self) -> None:
        """Back (or on) to the pattern Set; the gated set's programs are dropped on the way."""
        if isinstance(self.active, GatedSet):
            self.engine.drop_gated_set()
        self.active = self.engine.set
        self._away = 0

    def _to_literal_gate(self) -> None:
        """Stay off the pattern Set: the gated set, its candidates from the literal Set (stays until a
        block has more than LITERAL_GATED_MAX_CANDIDATES)."""
        self.active = self.engine.literal_gated_set()
        self._away = 1 << 62

    def _thrashing(self, events: list[tuple[int, int]]) -> bool:
        hits = self.engine.thrash_hits
        return len(events) >= hits and len({pi for _, pi in events}) >= min(hits, THRASH_PATTERNS)

    def leave_set(self) -> None:
        """The Set's DFA cache thrashes on this input: answer with the literal Set for a while."""
        self.leaves += 1
        self._away = self._stay
        self._stay *= 4
        self.engine.release_set()
        self.active = self.engine.literal_set() if HAVE_RE2 else None

    def _feed_traceback(self, lines: bytes, view: bytes, line_base: int) -> None:
        tbpos = view.find(_TB_MARK)
        pm = _PYTEST_MARK.search(view, 0, tbpos if tbpos >= 0 else len(view))
        if pm is not None:
            tbpos = pm.start()
        if tbpos < 0 and not self.tbp.active:
            return
        if self.tbp.active:
            start = 0
        else:
            start = view.rfind(b"\n", 0, tbpos) + 1
            # the line before, in `lines` (a CRLF log's `\r` is a line break in `view`)
            prev = lines.rfind(b"\n", 0, max(start - 1, 0)) + 1 if start else start
            # the traceback Python reports and ignores, or one a background thread died of
            if b"Exception ignored in" in lines[prev:start] or b"Exception in thread " in lines[prev:start]:
                start = prev
        ln = line_base + lines.count(b"\n", 0, start)
        for raw in lines[start:].split(b"\n"):
            text, enc = decode_line(raw)
            self.encodings.add(enc)
            self.tbp.feed(ln, normalise_text(text))
            ln += 1

    # ---------------------------------------------------------------- which patterns, where
    def flagged(self, view: bytes) -> list[int]:
        eng = self.engine
        if isinstance(self.active, GatedSet):
            cand = self.active.candidates(view)
            ok = len(cand) <= GATED_MAX_CANDIDATES
            if ok and self.active.literal:
                self._cand_mean = LITERAL_GATED_DECAY * self._cand_mean + (1 - LITERAL_GATED_DECAY) * len(cand)
                limit = eng.gated_candidates
                ok = self._cand_mean <= (LITERAL_GATED_MAX_CANDIDATES if limit is None else limit)
            if ok:
                return self.active.match_among(view, cand)
            self._to_set()                   # hit-dense blocks: the Set answers this one and what follows
        if self.active is not None:
            return self.active.Match(view)
        if eng.mode == "reference":
            return [pi for pi in range(len(eng.patterns)) if eng.bytes_pattern(pi).search(view)]
        needles, always = eng.gate()
        low = view.lower()
        cand: set[int] = set(always)
        for (needle, icase), pis in needles:
            if needle in (low if icase else view):
                cand.update(pis)
        return [pi for pi in cand if eng.bytes_pattern(pi).search(view)]

    def locate(self, flagged: list[int], view: bytes) -> list[tuple[int, int]]:
        """(segment start, pattern) for every line of `view` that a pattern matches, found by
        re-running the Set on halves of the block until the pieces are single lines. No per-pattern
        regex is compiled (bounded memory however many rules fire), sparse hits cost a few extra Set
        passes, and a block where every line hits costs one Set pass per line; when that is found
        mid-block on a thrashing Set, the rest of the block asks the literal Set."""
        eng = self.engine
        out: list[tuple[int, int]] = []
        keep = set(flagged)      # the caller passes only patterns that still need locating
        set_match = self.active.Match
        watch = self.active is eng.set and HAVE_RE2
        distinct: set[int] = set()
        among = getattr(self.active, "match_among", None)

        def match(piece: bytes) -> list[int]:
            if among is not None:            # the gated set: search only the patterns still wanted
                return among(piece, keep)
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
            pos = a      # a short piece: attribute per line
            while pos < b:
                nl = view.find(b"\n", pos, b)
                end = b if nl < 0 else nl
                if end > pos:
                    line_ids = match(view[pos:end]) if (end - pos) < (b - a) or a != pos else ids
                    for pi in line_ids or ():
                        if (eng.any_users[pi] or eng.doc_users[pi] or pi == eng.bare_idx) and \
                                self.exact(pi, view, pos, end):
                            out.append((pos, pi))
                            distinct.add(pi)
                pos = end + 1
            if watch and len(out) >= eng.thrash_hits and len(distinct) >= min(eng.thrash_hits, THRASH_PATTERNS):
                self.leave_set()
                set_match, watch = self.active.Match, False
        out.sort()
        return out

    def exact(self, pi: int, view: bytes, a: int, b: int) -> bool:
        """The Set holds relaxed patterns (see re2set.relax_bounds), and the literal Set answers
        supersets: confirm the exact pattern on the line."""
        eng = self.engine
        if pi not in eng.inexact and (self.active is eng.set or getattr(self.active, "same_as_set", False)):
            return True
        return eng.bytes_pattern(pi).search(view, a, b) is not None

    def _locate_py(self, flagged: list[int], view: bytes) -> list[tuple[int, int]]:
        eng = self.engine
        out: list[tuple[int, int]] = []
        for pi in flagged:
            if not (eng.any_users[pi] or eng.doc_users[pi]) and pi != eng.bare_idx:
                continue
            pat = eng.bytes_pattern(pi)
            pos = 0
            while (m := pat.search(view, pos)) is not None:
                seg = view.rfind(b"\n", 0, m.start()) + 1
                end = view.find(b"\n", seg)
                end = len(view) if end < 0 else end
                if m.end() <= end or pat.search(view, seg, end):   # a match must lie within one line
                    out.append((seg, pi))
                # one hit per line, and a match that ran on over the newline does not hide the next lines
                pos = end + 1
        out.sort()
        return out

    def _handle(self, events: list[tuple[int, int]], lines: bytes, view: bytes, line_base: int) -> None:
        eng = self.engine
        states = self.states
        counted_to = 0
        newlines = 0
        done: set[tuple[int, int]] = set()
        echoes: set[int] = set()
        for seg, pi in events:
            newlines += lines.count(b"\n", counted_to, seg)
            counted_to = seg
            line_no = line_base + newlines
            end = view.find(b"\n", seg)
            if end < 0:
                end = len(view)
            if seg in echoes:
                continue
            if b"raise" in view[seg:end] and _SOURCE_RAISE.match(view, seg, end):
                echoes.add(seg)
                continue
            if pi == eng.bare_idx:
                if (self.bare is None or self.bare[0] != line_no) and not _WARNING_LINE.search(view, seg, end):
                    self.bare = (line_no, view[seg:min(end, seg + EVIDENCE_CAP)])
                continue
            if eng.doc_users[pi] and pi not in self.doc_hits:
                self.doc_hits.add(pi)
                self.doc_seg[pi] = view[seg:min(end, seg + EVIDENCE_CAP)]
            segment = None
            for ri in eng.any_users[pi]:
                if (ri, seg) in done:
                    continue
                done.add((ri, seg))
                if segment is None:
                    segment = view[seg:min(end, seg + EVIDENCE_CAP)]
                if eng.rules[ri]["match"]["not"] and any(n.search(segment) for n in eng.not_patterns(ri)):
                    continue
                st = states.get(ri)
                if st is None:
                    st = states[ri] = RuleState(first_line=line_no, first_seg=segment)
                if st.count and line_no == st.last_line:
                    continue
                if st.count and len(st.more_segs) < CAPTURE_SAMPLES:
                    st.more_segs.append((line_no, segment))
                st.count += 1
                st.last_line = line_no
                if st.sampled < RANK_SAMPLES and len(st.ranks) < MAX_RANKS:
                    st.sampled += 1
                    ls = lines.rfind(b"\n", 0, seg) + 1
                    head = lines[ls:ls + 64]
                    if head[:1] in _RANK_HEAD or b": " in head:
                        pre = split_prefix(decode_line(head)[0])
                        if pre.rank is not None:
                            st.ranks.add(pre.rank)

    # ---------------------------------------------------------------- the end
    def _exception(self, total_lines: int) -> Optional[ExceptionInfo]:
        """The crash's exception: the last traceback's, else a bare `XError: ...` near the end."""
        exc = self.tbp.headline()
        if (exc is None and self.bare is not None and total_lines - self.bare[0] <= BARE_EXC_TAIL
                and self.bare[0] not in self.tbp.ignored_lines):
            pre = split_prefix(normalise_text(decode_line(self.bare[1])[0]))
            m = _BARE_HEAD.search(pre.text)
            if m and not _QUOTE_BEFORE.search(pre.text, 0, m.start()):     # quoted in a question or a sample: not the crash
                exc = ExceptionInfo(type=m.group(1), message=m.group(2)[:2000], line=self.bare[0], rank=pre.rank)
        return exc

    def _finish(self, report: Report) -> Report:
        findings = build.findings(self)
        report.unless_rules = build.unless_rules(self)
        exc = self._exception(report.lines)
        by_line = {e.line: e for e in self.tbp.exceptions}
        for f in findings:
            e = by_line.get(f.line)
            if e is not None and e.user_frame is not None:
                f.location = e.user_frame
        errs = sorted((f for f in findings if f.severity == "error"), key=Finding.sort_key)
        if errs and errs[0].line in by_line:
            exc = by_line[errs[0].line]   # the exception behind the root cause, not the launcher's
        report.exception = exc
        judged = None
        for o in self.observers:
            out = o.finish(report, findings)
            if out is not None:       # the verdict: status, survived signatures, unknown, ranking, actions
                findings = judged = out
        report.findings = judged if judged is not None else sorted(findings, key=Finding.sort_key)
        report.encoding = "gb18030" if "gb18030" in self.encodings else "utf-8"
        return report


def _known_size(fh: BinaryIO) -> int:
    """The size of a regular file behind `fh` (0 for a pipe, a socket or an in-memory stream)."""
    try:
        st = os.fstat(fh.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def utf8_lines(chunk: bytes) -> tuple[bytes, bool]:
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
