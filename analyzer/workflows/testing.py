"""Rule checks shared by `llmtriage rules test` and pytest (layer 4).

Every example runs through the full engine with ALL rules loaded: a `match` example must make its
rule the top finding (and agree with `expect` captures); a `no_match` example must not fire the
rule (and, with `expect_rule`, that rule must be top). `todo_*` examples are known gaps: they must
still fail, so a fixed gap is noticed (strict xfail).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from llmtriage import get_engine, scan_source

from llmtriage.findings import Report


@dataclass
class ExampleResult:
    rule_id: str
    kind: str          # match | no_match | todo_match | todo_no_match
    index: int
    ok: bool
    problem: str = ""
    file: str = ""

    @property
    def test_id(self) -> str:
        return f"{self.rule_id}::{self.kind}[{self.index}]"

    def __str__(self) -> str:
        return f"{self.rule_id}  {self.file}  examples.{self.kind}[{self.index}]: {self.problem}"


def _top(report: Report) -> Optional[str]:
    return report.findings[0].rule_id if report.findings else None


def run_example(engine: Any, rule: dict[str, Any], kind: str, index: int) -> ExampleResult:
    ex = rule["examples"][kind][index]
    res = ExampleResult(rule["id"], kind, index, True, file=rule.get("file", ""))
    try:
        report = scan_source(engine, ex["log"].encode("utf-8"), name=res.test_id)
    except Exception as exc:  # an example that cannot even be scanned is a failure, not a crash
        res.ok, res.problem = False, f"could not be scanned: {exc}"
        return res
    ids = [f.rule_id for f in report.findings]
    base = kind.replace("todo_", "")
    if base == "match":
        top = _top(report)
        if top != rule["id"]:
            res.ok = False
            res.problem = f"top finding was {top or 'nothing'}" + (f" (found: {', '.join(ids)})" if ids else "")
        else:
            caps = report.findings[0].captures
            bad = {k: (v, caps.get(k)) for k, v in ex.get("expect", {}).items() if caps.get(k) != v}
            if bad:
                res.ok = False
                res.problem = "captures differ: " + ", ".join(f"{k} expected {e!r} got {g!r}" for k, (e, g) in bad.items())
    else:
        if rule["id"] in ids:
            res.ok = False
            res.problem = f"rule fired on a near-miss (why: {ex['why']})"
        elif ex.get("expect_rule") and _top(report) != ex["expect_rule"]:
            res.ok = False
            res.problem = f"expected {ex['expect_rule']} as top finding, got {_top(report) or 'nothing'}"
    if kind.startswith("todo_"):
        res.ok = not res.ok
        res.problem = "" if res.ok else "todo example now passes: promote it to a real example"
    return res


def iter_examples(rules: Iterable[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], str, int]]:
    for rule in rules:
        for kind in ("match", "no_match", "todo_match", "todo_no_match"):
            for i in range(len(rule["examples"].get(kind, []))):
                yield rule, kind, i


def check_rules(ruleset: Any, rules: Optional[list[dict[str, Any]]] = None) -> tuple[list[ExampleResult], int]:
    """Run every example of `rules` (default: all). Returns (failures, number of examples)."""
    engine = get_engine(ruleset)
    if hasattr(ruleset, "load_details"):
        ruleset.load_details()             # the examples are what runs
    failures = []
    total = 0
    ids = set(ruleset.by_id)
    for rule, kind, i in iter_examples(rules if rules is not None else ruleset.rules):
        total += 1
        r = run_example(engine, rule, kind, i)
        exp = rule["examples"][kind][i].get("expect_rule")
        if exp and exp not in ids and exp != "unknown":
            r.ok, r.problem = False, f"expect_rule '{exp}' is not a known rule id"
        if not r.ok:
            failures.append(r)
    return failures, total


def schema_text() -> str:
    from llmtriage.ruleset.model import Rule   # deferred: pydantic, only for `rules schema`

    schema = Rule.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "llmtriage rule file"
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
