#!/usr/bin/env python3
"""Score the engine in-process on the probe batches kept in benchmarks/heldout/.

Each batch is a folder of logs written from public reports with a labels.tsv (file, category,
source_url, note, action: the format of ../shared/corpus). A batch was scored *before* the rules and
engine changes written from its own misses (the held-out number, in heldout/README.md); after that
it is regression material: what later work must not break. The pass test is score.py's: the first
error finding has the labelled category, and a log labelled `none` has no error finding.

    python benchmarks/heldout.py                    # every batch: per-batch and overall top-1
    python benchmarks/heldout.py -v                 # and every miss
    python benchmarks/heldout.py --json out.json    # per-log results, for diffing two engines
    python benchmarks/heldout.py --diff a.json b.json   # logs whose result changed
    python benchmarks/heldout.py --grep 'TCPStore|rendezvous' --json sub.json   # only logs whose text matches
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "heldout"


def cases(root: Path = HERE):
    """(batch, log path, category, action) for every row of every labels.tsv under `root`."""
    for labels in sorted(root.rglob("labels.tsv")):
        with labels.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                if row.get("file"):
                    yield (labels.parent.name, labels.parent / row["file"], row["category"].strip(),
                           (row.get("action") or "").strip() or None)


def judge(path: Path) -> tuple[str, str, str | None]:
    """(first error finding's category or "none", report action, that finding's rule id) for one log."""
    import llmtriage
    rep = llmtriage.analyze(str(path))
    errors = [f for f in rep.findings if f.severity == "error"]
    return ((errors[0].category if errors else "none"), (rep.extra.get("action") or "none"),
            (errors[0].rule_id if errors else None))


def score(root: Path = HERE, grep: str | None = None) -> dict:
    """Per-log results and per-batch counts: {"logs": {rel: {...}}, "batches": {name: [ok, total]}}.

    With `grep`, only the logs whose text (decoded leniently) matches that regex are scored: a quick
    regression check over the logs a change can touch."""
    out: dict = {"logs": {}, "batches": {}, "grep": grep}
    pat = re.compile(grep) if grep else None
    for batch, path, want, action in cases(root):
        if pat and not pat.search(path.read_bytes().decode("utf-8", "replace")):
            continue
        got, got_action, rule = judge(path)
        ok = got == want
        rel = str(path.relative_to(root))
        out["logs"][rel] = {"want": want, "got": got, "ok": ok, "action": action, "got_action": got_action,
                            "rule": rule}
        b = out["batches"].setdefault(batch, [0, 0])
        b[0] += ok
        b[1] += 1
    return out


def _summary(res: dict, verbose: bool) -> None:
    logs = res["logs"]
    fails = [r for r in logs.values() if r["want"] != "none"]
    healthy = [r for r in logs.values() if r["want"] == "none"]
    for name, (ok, n) in sorted(res["batches"].items()):
        print(f"{name:24s} {ok:4d}/{n:<4d} {ok / n:.3f}")
    n = len(logs)
    ok = sum(r["ok"] for r in logs.values())
    print(f"{'all':24s} {ok:4d}/{n:<4d} {ok / max(n, 1):.3f}   failures named right "
          f"{sum(r['ok'] for r in fails)}/{len(fails)}, healthy with no error {sum(r['ok'] for r in healthy)}/{len(healthy)}")
    # the next action, scored where the category is right and the row has an action label
    acts = [r for r in logs.values() if r["ok"] and r.get("action")]
    if acts:
        print(f"{'action (category right)':24s} {sum(r['action'] == r['got_action'] for r in acts):4d}/{len(acts):<4d}")
    if verbose:
        for rel, r in sorted(logs.items()):
            if not r["ok"]:
                print(f"  MISS {rel}: want {r['want']}, got {r['got']}")
            elif r.get("action") and r["action"] != r["got_action"]:
                print(f"  ACTION {rel}: want {r['action']}, got {r['got_action']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", type=Path, default=HERE)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--json", type=Path, help="write per-log results here")
    ap.add_argument("--diff", nargs=2, type=Path, metavar=("A", "B"), help="compare two --json outputs")
    ap.add_argument("--grep", metavar="REGEX", help="score only the logs whose text matches REGEX")
    args = ap.parse_args()
    if args.diff:
        ja, jb = (json.loads(p.read_text()) for p in args.diff)
        a, b = ja["logs"], jb["logs"]
        rels = set(a) | set(b)
        if ja.get("grep") or jb.get("grep"):   # a subset run: compare the logs both sides scored
            rels = set(a) & set(b)
            print(f"(subset: {len(rels)} logs scored on both sides)")
        for rel in sorted(rels):
            ra, rb = a.get(rel), b.get(rel)
            if ra is None or rb is None or ra["got"] != rb["got"]:
                tag = "FIXED" if rb and rb["ok"] and not (ra and ra["ok"]) else \
                      "BROKE" if ra and ra["ok"] and not (rb and rb["ok"]) else "moved"
                print(f"{tag:6s} {rel}: {ra and ra['got']} -> {rb and rb['got']} (want {(rb or ra)['want']})")
        return 0
    try:
        res = score(args.root, args.grep)
    except re.error as exc:
        print(f"heldout.py: bad --grep regex: {exc}", file=sys.stderr)
        return 2
    _summary(res, args.verbose)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
