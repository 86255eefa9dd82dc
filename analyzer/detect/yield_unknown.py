"""An unrecognised death yields to a recognised cause that explains it (rules/verdict.yaml `death_reports`,
`death_report_messages`, `explains_death`, `never_explained`).

`yield_unknown`: an `unknown` finding that only reports a death (a Ray actor's, a launcher's, mp.spawn's "Process N
terminated with exit code 1") ranks as a symptom below an error signature of the same process before it; with none,
a warning-level cause of an `explains_death` category before it (a long sequence, an OOM warning) is promoted to
error as the death it explains, unless the death is one no runtime condition causes (a missing attribute of a real
object, a NameError) or one the warning's category cannot cause (`explains_death_only`: a long sequence explains an
index or size error, not a TypeError raised inside a library). `promote_covering`: the same promotion when only cascade symptoms are errors.
"""
from __future__ import annotations

from typing import Optional

from llmtriage.detect.family import family_of
from llmtriage.detect.unknown import can_cause
from llmtriage.findings import Finding
from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled as _rx, tr, verdict_spec


def yield_unknown(findings: list[Finding], lang: Optional[str], scanner: Optional[Scanner] = None) -> None:
    spec = verdict_spec()
    reports = set(spec["death_reports"])
    explains = set(spec["explains_death"])
    explains_rules = set(spec.get("explains_death_rules", ()))
    by_message = spec.get("death_report_messages")
    never = spec.get("never_explained")
    for u in [f for f in findings if f.rule_id == "unknown" and f.severity == "error"]:
        report = u.captures.get("type", "").rsplit(".", 1)[-1] in reports or bool(
            by_message and _rx(by_message).search(u.message))
        earlier = [f for f in findings if f is not u and f.rule_id != "unknown" and f.judgement is None
                   and f.line <= u.line and f.same_process(u)]
        if report and any(f.severity == "error" for f in earlier):
            u.role = "symptom"          # it only reports a death that a recognised signature explains
            continue
        if any(f.severity == "error" and f.role == "cause" for f in earlier):
            continue
        explainable = not (never and _rx(never).search(u.message))
        # a bare assertion whose expression names a failure family ("assert torch.isnan(p).sum() == 0"): only
        # a cause of that family explains it
        fam = family_of(u.captures["asserted"]) if u.captures.get("asserted") else None
        causes = [f for f in earlier if explainable and f.severity == "warning" and f.role == "cause"
                  and (f.category in explains or f.rule_id in explains_rules)
                  and (fam is None or f.category == fam[0])
                  and (report or can_cause(f.category, u.evidence))]
        if causes:
            best = max(causes, key=lambda f: (f.priority, f.line))
            best.judgement = {"context": "explains-death", "severity_was": "warning",
                              "reason": tr(spec["explains_reason"], lang, line=u.line)}
            best.severity = "error"
            u.role = "symptom"          # the promoted cause explains this exception: one root cause, not two
            continue
        if report and scanner is not None:
            # a death report's message goes on below it (Ray's actor fields, then "The actor is dead
            # because ..."): a signature there is the report's own explanation, not a later event
            upto = u.line + scanner.continuation_after(u.line, int(spec["after_death"]["message_lines"]))
            if any(f is not u and f.rule_id != "unknown" and f.judgement is None and f.severity == "error"
                   and u.line < f.line <= upto and f.same_process(u) for f in findings):
                u.role = "symptom"


def promote_covering(covered: list[Finding], line: int, lang: Optional[str]) -> None:
    """Only cascade symptoms are errors, yet the exception that ended the job is itself the evidence
    of a warning-level cause ("RuntimeError: No CUDA GPUs are available" under srun): that cause is
    the root, promoted to error as a death it explains."""
    spec = verdict_spec()
    for f in covered:
        if f.severity == "warning" and f.role == "cause" and f.judgement is None and f.category in spec["explains_death"]:
            f.judgement = {"context": "explains-death", "severity_was": "warning",
                           "reason": tr(spec["explains_reason"], lang, line=line)}
            f.severity = "error"
