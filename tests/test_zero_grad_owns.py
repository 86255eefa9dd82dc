"""Loss 0 and grad_norm 0 on every record: nothing is trained, so no-grad owns the run even when a masking
signature (tokenization mismatch, response template missing) says why; without a logged grad_norm the signature
stays the cause (rules/verdict.yaml explains_metric `grad_zero_owns`)."""
from __future__ import annotations

import llmtriage

MISMATCH = "WARNING: tokenization mismatch: 482 vs. 484. (ignored)\n"


def _records(grad: bool, n: int = 12) -> str:
    g = "'grad_norm': 0.0, " if grad else ""
    return "".join(MISMATCH + f"{{'loss': 0.0, {g}'learning_rate': {1e-7 * (i + 1):.3e}, 'epoch': {0.0002 * (i + 1):.4f}}}\n"
                   for i in range(n))


def _errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_grad_norm_zero_throughout_makes_no_grad_the_cause_and_the_signature_says_why():
    rep = llmtriage.analyze(_records(grad=True))
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs and errs[0].category == "no-grad"
    sig = next(f for f in rep.findings if f.rule_id == "template-tokenization-mismatch")
    assert sig.severity == "warning" and sig.judgement["context"] == "states-why"


def test_without_a_logged_grad_norm_the_masking_signature_stays_the_cause():
    errs = _errors(_records(grad=False))
    assert errs and errs[0].rule_id == "template-tokenization-mismatch"


def test_a_few_zero_grad_records_are_not_throughout():
    errs = _errors(_records(grad=True, n=3))
    assert errs and errs[0].rule_id == "template-tokenization-mismatch"
