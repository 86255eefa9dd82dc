"""A handler's fallback that failed anew: the chain's last exception, not its first, is the cause.

Python prints "During handling of the above exception, another exception occurred" when the code
that caught an exception raised again while handling it. For a fallback (librosa tries libsndfile,
then audioread; a loader tries one backend, then the next) the first exception was expected and
handled, and the one that ended the process says what is missing: libsndfile's "File contains data
in an unknown format" for an mp3 is not a damaged file when audioread's NoBackendError follows it.
So when a cause rule names the chain's final exception, an error finding on a
handled link (`ExceptionInfo.handled`, recorded by the traceback parser) becomes a warning beside it.
A link counts as handled only when the final exception was raised below the handler (its innermost frame
is not among the link's frames); an except block that re-raises with another message is a wrapper.
"Direct cause" links (`raise X from Y`, a wrapper re-raising) are left alone: there the first
exception is usually the specific one.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import ExceptionInfo, Finding


def fallback_failed(findings: list[Finding], exceptions: list[ExceptionInfo], reason: Optional[Any],
                    lang: Optional[str]) -> None:
    if not reason:
        return
    for exc in exceptions:
        if not exc.handled or exc.thread:
            continue
        final = next((f for f in findings if f.line == exc.line and f.role == "cause" and f.severity == "error"
                      and f.judgement is None and f.rule_id != "unknown"), None)
        if final is None:
            continue
        handled = set(exc.handled)
        for f in findings:
            if f is not final and f.severity == "error" and f.judgement is None and f.line in handled:
                f.judgement = {"context": "handled-fallback-failed", "severity_was": f.severity,
                               "reason": tr(reason, lang, rule=final.rule_id)}
                f.severity = "warning"
