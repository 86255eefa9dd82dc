"""An exception re-raised with another exception's headline as its whole message: a launcher's
`raise RuntimeError(f"{type(e).__name__}: {e}")` ("RuntimeError: TypeError: quant_type must be an
AOBaseConfig instance, got str"), a pool's `RuntimeError: ValueError: ...`. The outer type only says that
something was re-raised; the inner exception is the failure. When the inner exception's own traceback is
earlier in the log (the launched code printed it before its launcher re-raised it), that traceback is the
inner exception, frames and all; otherwise its type and message stand alone, with no frames (the outer
frames are the launcher's re-raise, not where the error happened)."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional

from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import ExceptionInfo

# "TypeError: ...", "torch.OutOfMemoryError: ...", "KeyError: 'x'": a class name ending like an
# exception class, then the inner message. Not "CUDA error: ..." (words) nor a bare "Error: ...".
_INNER = re.compile(r"(?:[A-Za-z_]\w*\.){0,4}(?P<type>[A-Z]\w*(?:Error|Exception))\s?:\s(?P<msg>\S.*)", re.S)


def inner_type(exc: ExceptionInfo) -> Optional[str]:
    """The inner exception's type when `exc` only re-raises another exception's headline, else None."""
    m = _INNER.fullmatch(exc.message or "")
    return m["type"] if m else None


def inner_exception(exc: ExceptionInfo, exceptions: list[ExceptionInfo]) -> ExceptionInfo:
    """The exception `exc` re-raises (see the module docstring), or `exc` itself."""
    m = _INNER.fullmatch(exc.message or "")
    if not m:
        return exc
    short, msg = m["type"], m["msg"].strip()
    for e in reversed(exceptions):       # the inner traceback, printed before the re-raise
        if e.line < exc.line and e.type.rsplit(".", 1)[-1] == short and e.message.strip() == msg:
            return e
    return replace(exc, type=short, message=msg, frames=[])


def opaque_headline(exc: ExceptionInfo) -> bool:
    """The exception's message only says the death is told in the stack trace above it (`unknown.opaque_headline`
    in rules/verdict.yaml): vLLM V0's "Engine process failed to start. See stack trace for the root cause." """
    pattern = verdict_spec()["unknown"].get("opaque_headline")
    if not pattern:
        return False
    got = _OPAQUE.get(pattern)
    if got is None:
        got = _OPAQUE[pattern] = re.compile(pattern)
    return got.search(exc.message or "") is not None


_OPAQUE: dict[str, "re.Pattern[str]"] = {}
