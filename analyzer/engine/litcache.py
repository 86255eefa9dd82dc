"""The literal gate's index and the RE2 Set forms, kept on disk beside the rule cache (layer 2).

Working out the required literals of every pattern (`literals.required_literals`, a walk of the
stdlib parser's tree) costs more than the rest of a small log's triage, and it depends on nothing
but the pattern strings: it is computed once per distinct pattern list and stored as JSON in the
private cache folder (`ruleset.cachefile`: owner, mode and digest checked; never pickle). So is each
pattern's RE2 Set form (`re2set.set_form`, a tokenising pass per pattern: ~10-20 ms for the shipped
rules on every start otherwise).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from llmtriage.ruleset import cachefile
from llmtriage.ruleset.cachefile import blake2b

FORMAT = 1
Index = tuple[list[tuple[tuple[str, bool], list[int]]], list[int]]


def _key(kind: str, patterns: list[str], extra: str = "") -> str:
    """The cache file's key: what it holds, the exact pattern list, and `extra` (which patterns are wanted)."""
    h = blake2b(f"{kind} {FORMAT}\n".encode(), digest_size=16)
    for p in patterns:
        h.update(p.encode("utf-8", "surrogatepass") + b"\0")
    h.update(extra.encode())
    return h.hexdigest()[:24]


def cached_index(patterns: list[str], wanted: list[int], cache_dir: Optional[Path],
                 compute: Callable[[], Index]) -> Index:
    """`compute()` (literal -> patterns, patterns without a literal), read from the cache when a
    file for exactly these patterns is there, written to it otherwise."""
    path = cache_dir / f"gate-{_key('gate', patterns, ','.join(map(str, wanted)))}.json" if cache_dir is not None else None

    def decode(body: Any) -> Index:
        users = [((str(t), bool(ic)), [int(i) for i in pis]) for (t, ic), pis in body["users"]]
        rest = [int(i) for i in body["rest"]]
        if not (all(0 <= i < len(patterns) for _, pis in users for i in pis) and all(0 <= i < len(patterns) for i in rest)):
            raise ValueError("pattern index out of range")
        return users, rest

    return cachefile.cached_json(path, decode, compute,
                                 lambda idx: {"users": [[[t, ic], pis] for (t, ic), pis in idx[0]], "rest": idx[1]})


Forms = list[tuple[str, bool]]


def cached_forms(patterns: list[str], cache_dir: Optional[Path], compute: Callable[[], Forms]) -> Forms:
    """`compute()` (the Set form of each pattern and whether it is exact), cached like the gate index."""
    path = cache_dir / f"forms-{_key('forms', patterns)}.json" if cache_dir is not None else None

    def decode(body: Any) -> Forms:
        forms = [(str(f), bool(x)) for f, x in body["forms"]]
        if len(forms) != len(patterns):
            raise ValueError("one form per pattern")
        return forms

    return cachefile.cached_json(path, decode, compute, lambda forms: {"forms": [[f, x] for f, x in forms]})
