"""The `unknown` finding: an exception or a death that no rule explains, and the failure family its
words place it in (detect/family.py, rules/families.yaml). Text comes from rules/verdict.yaml."""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.capture import capture_shape
from llmtriage.detect.family import family_of, scores, shape_cues
from llmtriage.detect.inner_exception import inner_exception, inner_type
from llmtriage.detect.spec import compiled as _rx, tr, verdict_spec
from llmtriage.detect.startup_warning import startup_warning_shape
from llmtriage.engine.logparse import is_benign
from llmtriage.engine.redact import clip
from llmtriage.findings import ExceptionInfo, Finding


def unknown_finding(exc: ExceptionInfo, lang: Optional[str]) -> Finding:
    """The `unknown` finding for an exception no rule explains (text from rules/verdict.yaml)."""
    u = verdict_spec()["unknown"]
    benign = is_benign(exc)
    where = ""
    if exc.user_frame is not None:
        where = f" (in {exc.user_frame.function} at {exc.user_frame.file}:{exc.user_frame.line})"
    inner = inner_type(exc)      # "RuntimeError: TypeError: ...": a re-raise; the inner exception is the failure
    shown = inner or exc.type
    captures = {"type": shown, **({"reraised_as": exc.type} if inner else {})}
    expr = asserted(exc)
    if expr:        # a bare assertion: what it asserted is all it says
        captures["asserted"] = expr
    return Finding(
        rule_id="unknown", category="unknown", severity="warning" if benign else "error",
        title=tr(u["title"], lang, type=shown)[:90], line=exc.line,
        message=clip(exc.headline + (f" ({expr})" if expr else ""), 500) + where,
        evidence=clip(exc.headline, 2000), rank=exc.rank, captures=captures, role="cause",
        confidence="low", priority=0, cause=tr(u["cause"], lang), location=exc.user_frame,
        fixes=[{"title": tr(f["title"], lang), "detail": tr(f["detail"], lang, type=shown)} for f in u["fixes"]],
    )


def death_unknown(death: dict[str, Any], lang: Optional[str]) -> Finding:
    u = verdict_spec()["unknown"]
    return Finding(
        rule_id="unknown", category="unknown", severity="error", title=tr(u["death_title"], lang, name=death["name"])[:90],
        message=clip(death["evidence"], 500), line=death["line"], evidence=clip(death["evidence"], 2000),
        captures={"type": death["name"]}, role="cause", confidence="low", priority=0,
        cause=tr(u["death_cause"], lang),
        fixes=[{"title": tr(f["title"], lang), "detail": tr(f["detail"], lang, type=death["name"])} for f in u["fixes"]],
    )


def name_families(findings: list[Finding], exceptions: list[ExceptionInfo], scanner: Any,
                   lang: Optional[str], taxonomy: dict[str, str], engine: Any = None) -> None:
    """An unexplained death whose words belong to one failure family (detect/family.py) takes that
    family's category; failing that, the category of the nearest known failure (detect/nearest.py)
    when it is close enough. It keeps rule id `unknown` and low confidence."""
    spec, near = verdict_spec()["unknown"]["family"], verdict_spec()["unknown"]["nearest"]
    wrappers = set(spec.get("wrappers", ()))
    for w in [f for f in findings if f.rule_id in wrappers and f.severity == "error"]:   # (cause or symptom)
        # a signature that only says how the process died (a C++ terminate, a segfault): the message
        # it wraps, or the error printed just before, may name a failure family it cannot
        # (a wrapper that is itself only a symptom, "Aborted" after a peer's watchdog timeout: any earlier error)
        if any(g.severity == "error" and (g.role == "cause" or w.role != "cause") and g is not w and g.line <= w.line
               for g in findings):
            continue
        # the wrapper's own line is left out: it is the death itself, often a launcher's command line
        context = scanner.error_lines_around(w.line, int(spec["wrapper_after"]))
        got = family_of(context, extra=int(spec["wrapper_extra_weight"])) if context else None
        # (a launcher's words around it: its failure record only reports the death the wrapper already names,
        # "exitcode: -11 ... Signal 11 (SIGSEGV) received by PID")
        if got is not None and got[0] != w.category and got[0] in taxonomy and got[0] not in spec.get("not_for_exceptions", ()):
            u = death_unknown({"line": w.line, "name": w.rule_id, "evidence": w.evidence}, lang)
            _place(u, got, spec, lang, taxonomy)
            w.role = "symptom"
            findings.append(u)
    for f in findings:
        if f.rule_id != "unknown" or f.severity != "error" or f.role != "cause" or f.category != "unknown":
            continue
        exc = next((e for e in exceptions if e.line == f.line), None)
        exc = inner_exception(exc, exceptions) if exc is not None else None   # (a re-raise: what it re-raised)
        barred = set(spec.get("not_for_exceptions", ())) if f.captures.get("type") else set()
        own = "\n".join([f.evidence, *(exc.chain if exc is not None else ()), asserted(exc)])
        shapes = shape_cues(exc.type, exc.message, [fr.file for fr in exc.frames],
                            exc.frames[-1].code if exc.frames else "",
                            [f"{fr.file} {fr.function}" for fr in exc.frames]) if exc is not None else []
        got = family_of(own, shapes=shapes)
        context = ""
        if got is None or got[0] in barred:   # an opaque headline: the error lines printed just before it (and after)
            context = scanner.error_lines_around(f.line, int(spec.get("exception_after", 0)))
            got = family_of(own + "\n" + context, shapes=shapes) if context else None
            got = None if got is not None and not can_cause(got[0], f.evidence) else got
        if got is not None and got[0] in barred:
            got = None
        capture = capture_shape(scanner, f.line, f.evidence) if got is None else []
        # (or after a start-up warning that the GPU lacks a capability, when it says something is unsupported)
        capture = capture or (startup_warning_shape(scanner, f.line, f.evidence) if got is None else [])
        if capture:   # nothing in its words or shape: when it was raised (while CUDA graphs were captured)
            shapes = shapes + capture
            got = family_of(own + "\n" + context, shapes=shapes)
            got = None if got is not None and got[0] in barred else got
        if got is None:
            from llmtriage.detect.nearest import nearest   # deferred: only an unexplained death needs the index

            near_to = nearest(f.evidence, engine, scores(own + "\n" + context, shapes), near, f.captures.get("type", ""))
            _place_nearest(f, None if near_to and near_to[0] in barred else near_to, near, lang, taxonomy)
        elif got[0] in taxonomy:
            _place(f, got, spec, lang, taxonomy)


def can_cause(category: str, line: str) -> bool:
    """Whether a warning of `category` printed before the exception `line` can be what raised it (rules/verdict.yaml
    `explains_death_only`): a long sequence explains an index or size error, not a TypeError raised inside a library."""
    only = verdict_spec().get("explains_death_only") or {}
    return category not in only or bool(_rx(only[category]).search(line))


# an assertion's message that is only a value (`assert cond, tensor`): "tensor([nan, nan, ...])", "[3, 4]", "-1.5"
VALUE_ONLY = re.compile(r"^(?:(?:tensor|array|Parameter containing)\b|[\[(]*\s*(?:[-+]?\d|nan\b|inf\b))")


def asserted(exc: Optional[ExceptionInfo]) -> str:
    """The expression a bare `AssertionError` (no message, or a message that only dumps a value such as the
    tensor that failed the check) asserted, read from its innermost frame's source line
    ("assert torch.isnan(p).sum() == 0"): the only words such an error has; "" otherwise."""
    if (exc is None or exc.type.rsplit(".", 1)[-1] != "AssertionError" or not exc.frames
            or exc.message and not VALUE_ONLY.match(exc.message.strip())):
        return ""
    code = exc.frames[-1].code.strip()
    return code if code.startswith("assert ") else ""


def _place_nearest(f: Finding, got: Optional[tuple[str, str, float]], spec: dict[str, Any], lang: Optional[str],
                   taxonomy: dict[str, str]) -> None:
    if got is None or got[0] not in taxonomy:
        return
    cat, rid, score = got
    if spec.get("as_category", True):
        f.category = cat
    f.captures = {**f.captures, "nearest_category": cat, "nearest_rule": rid, "nearest_score": f"{score:.2f}"}
    f.title = tr(spec["title"], lang, type=f.captures.get("type", "error"), family=cat)[:90]
    f.cause = tr(spec["cause"], lang, family=cat, desc=taxonomy[cat], rule=rid or "-")
    f.fixes = [{"title": tr(spec["fix"]["title"], lang, family=cat, rule=rid or "-"),
                "detail": tr(spec["fix"]["detail"] if rid else spec["fix"]["family_detail"], lang, family=cat, rule=rid)},
               *f.fixes]


def _place(f: Finding, got: tuple[str, list[str]], spec: dict[str, Any], lang: Optional[str],
           taxonomy: dict[str, str]) -> None:
    family, words = got
    if spec.get("as_category", True):
        f.category = family
    f.captures = {**f.captures, "family": family, "family_words": ", ".join(w[:60] for w in words)}
    f.title = tr(spec["title"], lang, type=f.captures.get("type", "error"), family=family)[:90]
    f.cause = tr(spec["cause"], lang, family=family, desc=taxonomy[family])
    f.fixes = [{"title": tr(spec["fix"]["title"], lang, family=family),
                "detail": tr(spec["fix"]["detail"], lang, family=family)}, *f.fixes]


def points_elsewhere(exc: ExceptionInfo) -> bool:
    """The exception's message only points at other output ("Please see the training logs for more
    context"): a wrapper's report of a failure told elsewhere, not a root-cause guess of its own."""
    pattern = verdict_spec()["unknown"].get("pointer_message")
    return bool(pattern) and _compiled(pattern).search(exc.message or "") is not None


def _compiled(pattern: str) -> "re.Pattern[str]":
    got = _PATTERNS.get(pattern)
    if got is None:
        got = _PATTERNS[pattern] = re.compile(pattern)
    return got


_PATTERNS: dict[str, "re.Pattern[str]"] = {}
