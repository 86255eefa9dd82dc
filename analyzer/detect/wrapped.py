"""An exception message wrapped over several lines (rich tracebacks, terminals that fold long lines,
`logging` of a multi-line message), or a whole traceback escaped into one line (a JSON log record's message): the rules match lines, so a message split after "is not" matches
no rule and the launcher's summary wins. When the final exception's message continues on the next
lines (no new record opens there) and no cause rule names those lines, the joined message is scanned
once more as one line, and the cause rules it matches become findings on the exception's line.
"""
from __future__ import annotations

import io
import re
from typing import Any, Optional

from llmtriage.detect.scanner import Scanner
from llmtriage.engine.logparse import split_prefix
from llmtriage.findings import ExceptionInfo, Finding

_MAX_JOINED = 4000
_MAX_ESCAPED = 64_000
_ESCAPE = re.compile(r"\\([nrt'\"\\])")
_ESCAPES = {"n": "\n", "r": "\n", "t": "\t", "'": "'", '"': '"', "\\": "\\"}
_ESCAPED_TB = b"Traceback (most recent call last):\\n"
_HEADLINE = re.compile(r"\s*(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*)?(?:Error|Exception): \S")


def wrapped_message(findings: list[Finding], exceptions: list[ExceptionInfo], scanner: Scanner, engine: Any,
                    rules_by_id: dict[str, Any], spec: Optional[dict[str, Any]],
                    vetoed: frozenset[str] = frozenset()) -> None:
    """Each of the last `spec["exceptions"]` exceptions of the log (a worker's, before its launcher's).
    `vetoed`: rules whose `unless` hit in the whole log; the joined line alone cannot show that."""
    if engine is None or not spec:
        return
    heads: dict[int, Optional[int]] = {e.line: e.rank for e in exceptions if e.line > 0}
    for n, raw in scanner.rows(0):      # exception lines the traceback parser did not take (a rich box's)
        if _ESCAPED_TB in raw:        # a traceback inside one structured record (TGI's JSON `fields.message`)
            heads.setdefault(n, None)
        elif b"rror: " in raw or b"xception: " in raw:
            text = split_prefix(raw.decode("utf-8", "replace")).text
            if _HEADLINE.match(text):
                heads.setdefault(n, None)
    for line in sorted(heads)[-int(spec["exceptions"]):]:
        _one(findings, line, heads[line], scanner, engine, rules_by_id, spec, vetoed)


def _full_line(scanner: Scanner, line: int) -> str:
    """Line `line` whole (Scanner.line_text clips long lines), as a terminal shows it."""
    for n, raw in scanner.rows(line):
        if n == line:
            return raw[:_MAX_ESCAPED].decode("utf-8", "replace").rstrip("\r").rsplit("\r", 1)[-1]
        if n > line:
            break
    return ""


def _unescape(text: str) -> str:
    """A subprocess's output as a Python repr shows it (b'...\\n...'): its lines back."""
    return _ESCAPE.sub(lambda m: _ESCAPES[m.group(1)], text)


def _one(findings: list[Finding], line: int, rank: Optional[int], scanner: Scanner, engine: Any,
         rules_by_id: dict[str, Any], spec: dict[str, Any], vetoed: frozenset[str]) -> None:
    head = split_prefix(_full_line(scanner, line)).text
    if head.count("\\n") >= int(spec["escaped_lines"]):
        # another program's output quoted in the message with its newlines escaped ("Error converting
        # to fp16: b'...Traceback...\\nFileNotFoundError: ...'"): read it as the log it was
        last = line
        text = _unescape(head)
    else:
        k = scanner.continuation_after(line, int(spec["max_lines"]))
        if not k:
            return
        last = line + k
        parts = [split_prefix(scanner.line_text(n)).text.strip() for n in range(line, last + 1)]
        if not all(parts):
            return
        text = " ".join(parts)[:_MAX_JOINED]
    if any(f.severity == "error" and f.role == "cause" and line <= f.line <= last for f in findings):
        return      # a rule already reads the message
    sub = engine.scan(io.BytesIO(text.encode("utf-8", "surrogateescape")), "-")
    known = {f.rule_id for f in findings}
    for f in sub.findings:
        if (f.severity != "error" or f.role != "cause" or f.rule_id in known or f.rule_id not in rules_by_id
                or f.rule_id in vetoed):
            continue
        f.line, f.last_line, f.rank, f.count = line, last, rank, 1
        f.judgement = None
        findings.append(f)
