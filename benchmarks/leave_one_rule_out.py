"""Leave one rule out: how the tool does on a wording it has no rule for.

For every problem fixture (`fixtures/<category>/*.log`), the rule that is its top finding in the
golden is disabled and the log triaged again with every other rule, the verdict and the failure
families (rules/families.yaml). The result is the share of fixtures whose category still comes out
right: a stand-in for a user whose library printed a new wording. Healthy logs are not touched (a
disabled rule cannot raise a false alarm).

    python benchmarks/leave_one_rule_out.py            # summary
    python benchmarks/leave_one_rule_out.py -v         # one line per fixture
    python benchmarks/leave_one_rule_out.py --min 0.5  # exit 1 below that share (for CI-style guards)

Measured on 2026-12-01 (2 cores, about 2 minutes): on the 619 fixtures of that morning, 9% before
failure families and 55% with them; on the 738 after that day's new rules and fixtures, 50%.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import llmtriage

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"healthy", "jobs", "metrics", "reproduced"}


def cases(root: Path) -> dict[str, list[tuple[str, Path]]]:
    """rule id -> [(category, log)] for every problem fixture whose golden names a rule on top."""
    out: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for golden in sorted(root.glob("*/*.expected.json")):
        cat = golden.parent.name
        if cat in SKIP:
            continue
        findings = json.loads(golden.read_text(encoding="utf-8")).get("findings") or []
        rid = findings[0]["rule_id"] if findings else None
        log = golden.with_name(golden.name.replace(".expected.json", ".log"))
        if rid and rid != "unknown" and not rid.startswith("metric-") and log.exists():
            out[rid].append((cat, log))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", default=str(ROOT / "fixtures"))
    ap.add_argument("--min", type=float, default=None, help="exit 1 when the share right is below this")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    outcome: Counter = Counter()
    for rid, items in sorted(cases(Path(args.fixtures)).items()):
        engine = llmtriage.get_engine(disabled=[rid])
        for cat, log in items:
            rep = llmtriage.scan_source(engine, str(log))
            top = next((f for f in rep.findings if f.severity == "error"), None)
            got = top.category if top else "none"
            kind = "right" if got == cat else "unknown" if got == "unknown" else "none" if top is None else "wrong"
            outcome[kind] += 1
            if args.verbose:
                via = f"{top.rule_id}" if top else "-"
                print(f"{kind:8} {cat:24} without {rid:44} -> {got} ({via})  {log.name}")
    total = sum(outcome.values()) or 1
    share = outcome["right"] / total
    print(f"leave-one-rule-out: {outcome['right']}/{total} = {share:.3f} right; "
          f"unknown {outcome['unknown']}, wrong category {outcome['wrong']}, no error {outcome['none']}")
    return 1 if args.min is not None and share < args.min else 0


if __name__ == "__main__":
    sys.exit(main())
