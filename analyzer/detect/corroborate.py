"""Corroboration (layer 3): a signature warning and a metric warning naming the same silent failure.

torch's "None of the inputs have requires_grad=True" is printed by runs that train fine, and a flat
loss may be a plateau; a log holding both, in a category of rules/verdict.yaml `corroborate`, with no
error anywhere, has one root cause: the signature becomes an error, with the metric finding as the
stated reason (`Finding.judgement`), and the metric finding stays beside it as a warning.
"""
from __future__ import annotations

import re
from typing import Optional

from llmtriage.detect.spec import tr, verdict_spec
from llmtriage.findings import Finding


def corroborating_categories() -> frozenset[str]:
    """The categories whose metric warnings are kept beside a signature warning (metric_findings)."""
    return frozenset(verdict_spec().get("corroborate", {}).get("categories", ()))


def corroborate(findings: list[Finding], lang: Optional[str]) -> None:
    spec = verdict_spec().get("corroborate")
    if not spec or any(f.severity == "error" for f in findings):
        return
    cats = set(spec["categories"])
    metric = {f.category: f for f in findings
              if f.rule_id.startswith("metric-") and f.severity == "warning" and f.category in cats}
    for f in findings:
        m = metric.get(f.category)
        if (m is None or f is m or f.rule_id.startswith("metric-") or f.rule_id == "unknown"
                or m.line <= f.line <= (m.last_line or m.line)
                or f.severity != "warning" or f.role != "cause"
                or (f.judgement is not None and f.judgement.get("context") != "finished")):
            continue
        f.judgement = {"context": "corroborated", "severity_was": "warning",
                       "reason": tr(spec["reason"], lang, title=m.title, line=m.line)}
        f.severity = "error"
        return


def explain_metric(findings: list[Finding], lang: Optional[str], metrics: Optional[dict] = None) -> None:
    """A metric error with a signature that states its cause (rules/verdict.yaml `explains_metric`): a loss
    that reads exactly 0 from the first record (NaN, or no supervised token) beside the collator's
    'could not find the response template ... ignored in loss calculation' is the masking, not a NaN.
    The signature becomes the error, with the metric finding as its stated reason; the metric finding
    stays beside it as a warning. An entry's `grad_zero_owns` reverses that when the run's every logged
    grad_norm is 0 (`metrics["grad_norm_zero"]` records, at least `min_records`) and the metric finding is of
    its `category`: nothing is trained at all (the taxonomy's "grad_norm stuck at 0"), so that finding stays
    the error and the signature, which says why, becomes a warning beside it."""
    zero = int((metrics or {}).get("grad_norm_zero") or 0)
    for entry in verdict_spec().get("explains_metric", ()):
        ids = entry["metric"] if isinstance(entry["metric"], list) else [entry["metric"]]
        metric = next((f for f in findings if f.rule_id in ids and f.severity == "error"), None)
        sig = next((f for f in findings if f.rule_id in entry["by"]), None)
        if metric is None or sig is None:
            continue
        own = entry.get("grad_zero_owns")
        if own and zero >= int(own["min_records"]) and metric.category == own["category"]:
            if sig.severity == "error" and sig.judgement is None:
                sig.judgement = {"context": "states-why", "severity_was": "error",
                                 "reason": tr(own["reason"], lang, title=metric.title, line=metric.line, records=zero)}
                sig.severity = "warning"
            continue
        was = sig.severity
        if was != "error":
            sig.judgement = {"context": "explains-metric", "severity_was": was,
                             "reason": tr(entry["reason"], lang, title=metric.title, line=metric.line)}
            sig.severity = "error"
        metric.judgement = {"context": "explained", "severity_was": "error",
                            "reason": tr(entry["explained"], lang, title=sig.title, line=sig.line)}
        metric.severity = "warning"


def metric_outranks_warning(findings: list[Finding], status: str, lang: Optional[str]) -> None:
    """A signature error whose own line says it is only a warning ("warning: The size of tensor a ... must
    match ...": a caught exception the script printed and trained on past), in a run that did not die, beside a
    metric error that holds from the run's first record (rules/verdict.yaml `metric_outranks_warning`): the
    warning did not stop the run, the whole-run metric failure is what the run shows. The metric finding leads;
    the signature stays beside it as a warning."""
    spec = verdict_spec().get("metric_outranks_warning")
    if not spec or status == "crashed":
        return
    metric = next((f for f in findings if f.rule_id in spec["metrics"] and f.severity == "error"), None)
    if metric is None:
        return
    said = re.compile(spec["warning_line"])
    for f in findings:
        if (f is metric or f.severity != "error" or f.role != "cause" or f.rule_id.startswith("metric-")
                or f.rule_id == "unknown" or f.judgement is not None or not said.search(f.evidence or "")):
            continue
        f.judgement = {"context": "outranked-by-metric", "severity_was": "error",
                       "reason": tr(spec["reason"], lang, title=metric.title, line=metric.line)}
        f.severity = "warning"
