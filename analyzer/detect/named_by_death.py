"""A signature judged recovered whose object the job's death names (verdict step).

A server-side failure is judged recovered when the server goes on serving after it: SGLang logs "Update
weights from disk failed: Cannot find any model weights with `<dir>`", answers 400 and serves the next
request. The client (an RL trainer asking its rollout servers to load new weights) then raises on that
answer and dies, and its exception names the same directory: "RuntimeError: Failed to update weights from
disk on server ...: ... <dir> ...". No rule knows the client's wrapper, so the death reads as unknown while
the signature that says why sits demoted above it.

Here: an `unknown` death finding whose message or evidence contains, verbatim, a path-like capture
(`captures` of rules/verdict.yaml `named_by_death`, at least `min_value` characters) of an earlier finding
that a context in `contexts` demoted from error. That finding is the cause again (error, context
`named-by-death`) and the unknown death ranks as its symptom.

The same holds for an error judged recovered because a client retried it, when the retries ran out: a
marker of kind `exhausted` ("POST .../generate failed after 3 retries: 500") after the error and just
before the unknown death (`retries_exhausted`, context `retries-exhausted`).

And when the job's final exception, or a cause in its chain, repeats the recovered signature's own message
(`death_repeats`, context `retried-then-died`): torch's TCPStore client logs "The client socket has timed out
after 60000ms while trying to connect to (host, port)" and "retrying", the retry times out the same way, and
torchrun dies of RendezvousConnectionError whose cause is that DistNetworkError. Whatever the death's own
wrapper says, the retried error is what it died of.

And when the job died of nothing but symptoms (every error finding's role says the cause is elsewhere: a
client that "can't reach the vLLM server", a launcher's child failure) while the only cause the log holds was
judged recovered because other work went on after it (`symptom_contexts`, context `symptom-death`): `trl
vllm-serve` rejected by an older TRL CLI ("invalid choice: 'vllm-serve'"), then the trainer in another process
waits for the server that never started and dies. The job did not recover from it; it is what the symptom
points at.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.findings import ExceptionInfo, Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr


def _named(f: Finding, text: str, keys: frozenset[str], min_value: int) -> bool:
    return any(k in keys and isinstance(v, str) and len(v.strip()) >= min_value and v.strip() in text
               for k, v in f.captures.items())


def recovered_named_by_death(findings: list[Finding], spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if not spec:
        return
    contexts = set(spec["contexts"])
    keys = frozenset(spec["captures"])
    min_value = int(spec["min_value"])
    for u in [f for f in findings if f.rule_id == "unknown" and f.severity == "error" and f.role == "cause"]:
        text = f"{u.message or ''}\n{u.evidence or ''}"
        named = [f for f in findings if f is not u and f.judgement and f.judgement.get("context") in contexts
                 and f.judgement.get("severity_was") == "error" and f.line < u.line and f.role == "cause"
                 and _named(f, text, keys, min_value)]
        if not named:
            continue
        _restore(max(named, key=lambda f: f.line), "named-by-death", tr(spec["reason"], lang, line=u.line))
        u.role = "symptom"


def _restore(cause: Finding, context: str, reason: str) -> None:
    """A finding judged recovered (or demoted) is the cause again: an error, with why."""
    cause.judgement = {"context": context, "severity_was": cause.severity, "reason": reason}
    cause.severity = "error"


def retries_exhausted(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                      lang: Optional[str]) -> None:
    if not spec or "exhausted_window" not in spec:
        return
    hits = sorted(h[0] for h in scanner.hits.get("exhausted", ()))
    if not hits:
        return
    window, before = int(spec["exhausted_window"]), int(spec["exhausted_before_death"])
    for u in [f for f in findings if f.rule_id == "unknown" and f.severity == "error" and f.role == "cause"]:
        near = [h for h in hits if u.line - before <= h <= u.line + before]
        if not near:
            continue
        named = [f for f in findings if f is not u and f.judgement and f.judgement.get("context") == "recovered"
                 and f.judgement.get("severity_was") == "error" and f.role == "cause"
                 and any(0 < h - (f.last_line or f.line) <= window for h in near)]
        if not named:
            continue
        _restore(max(named, key=lambda f: f.line), "retries-exhausted",
                 tr(spec["exhausted_reason"], lang, line=u.line, exhausted=min(near)))
        u.role = "symptom"


def _messages(exc: ExceptionInfo, min_len: int) -> list[str]:
    """The death's message and the messages of the causes in its chain ("Type: message" -> message)."""
    out = [exc.message, *(c.split(": ", 1)[1] if ": " in c else c for c in exc.chain)]
    return [" ".join(m.split()) for m in out if m and len(m.strip()) >= min_len]


def death_repeats(findings: list[Finding], exc: Optional[ExceptionInfo], status: str,
                  spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if not spec or exc is None or status != "crashed" or "chain_min" not in spec:
        return
    texts = _messages(exc, int(spec["chain_min"]))
    if not texts:
        return
    named = [f for f in findings if f.judgement and f.judgement.get("context") == "recovered"
             and f.judgement.get("severity_was") == "error" and f.role == "cause" and f.line < exc.line
             and any(t in " ".join((f.evidence or "").split()) for t in texts)]
    if not named:
        return
    _restore(min(named, key=lambda f: f.line), "retried-then-died", tr(spec["chain_reason"], lang, line=exc.line))


def symptom_death_recovered(findings: list[Finding], spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if not spec or "symptom_contexts" not in spec:
        return
    errors = [f for f in findings if f.severity == "error"]
    if not errors or any(f.role != "symptom" for f in errors):
        return
    first = min(f.line for f in errors)
    contexts = set(spec["symptom_contexts"])
    named = [f for f in findings if f.judgement and f.judgement.get("context") in contexts
             and f.judgement.get("severity_was") == "error" and f.role == "cause" and f.line < first]
    if not named:
        return
    _restore(max(named, key=lambda f: f.line), "symptom-death", tr(spec["symptom_reason"], lang, line=first))
