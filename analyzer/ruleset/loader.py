"""Load the rules: from the rule cache, or validated afresh on a miss (layer 1).

The triage path only touches `load_ruleset()`, which returns plain data from a JSON cache
(`cachefile`: private folder, owner and mode checked, payload digest) keyed on every rule file's
path, mtime and size, and refused unless it holds a rule for every rule file found. yaml, pydantic and the models are imported
only on a cache miss or when validating.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.errors import RuleLoadError
from llmtriage.ruleset import cachefile
from llmtriage.ruleset.files import (DATA_FILES, SECRETS_FILE, builtin_rules_dir, locale_files, rule_files,
                                     taxonomy_path)
from llmtriage.ruleset.verified import VERIFIED_FILE
from llmtriage.ruleset.rules import RuleSet
from llmtriage.version import __version__

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython builds always have it
    from hashlib import blake2b

CACHE_FORMAT = 7


def _fingerprint(paths: Iterable[Path]) -> str:
    # blake2 from its own extension: `hashlib` loads OpenSSL, 3.6 MB of RSS on the triage path
    h = blake2b(f"{CACHE_FORMAT}|{sys.version_info[:2]}".encode(), digest_size=16)
    h.update(__version__.encode())
    for p in paths:
        st = p.stat()
        h.update(f"{p}|{st.st_mtime_ns}|{st.st_size}\n".encode())
    return h.hexdigest()[:24]


def cache_dir() -> Optional[Path]:
    """Where llmtriage keeps its caches (None when LLMTRIAGE_NO_CACHE is set)."""
    return cachefile.cache_dir()


def _validate(dirs: list[Path], builtin: bool) -> RuleSet:
    """Validate `dirs` in this process; the shipped rules without the timed regex probes (CI runs them)."""
    from llmtriage.ruleset.validate import validate_dirs   # deferred: yaml, pydantic and regex, only on a cache miss

    return validate_dirs(dirs, builtin=builtin, probe_shipped=False)


# Set by the CLI: a cache miss validates the rules in a forked child, so yaml, pydantic and the
# validation's garbage (adversarial probes on 1 MB lines) never enter the scanning process, whose
# peak RSS is then the same with a cold cache as with a warm one.
ISOLATE_VALIDATION = False


def _validate_isolated(dirs: list[Path], builtin: bool) -> RuleSet:
    if not hasattr(os, "fork"):
        return _validate(dirs, builtin)
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                       # child: validate, send the result, exit
        code = 0
        try:
            os.close(r)
            try:
                payload: Any = ("ok", _ruleset_data(_validate(dirs, builtin)))
            except RuleLoadError as exc:
                payload = ("problems", exc.problems)
            with os.fdopen(w, "wb") as fh:
                fh.write(json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        except BaseException:                          # noqa: BLE001 - the parent validates in-process
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return _validate(dirs, builtin)    # anything odd in the child: the plain path
    kind, value = json.loads(data.decode("utf-8", "surrogatepass"))
    if kind == "problems":
        raise RuleLoadError(value)
    return _ruleset_from(value)


def load_ruleset(extra_dirs: Iterable[os.PathLike[str] | str] = (), *, use_cache: bool = True,
                 builtin: bool = True) -> RuleSet:
    """Load the built-in rules plus `extra_dirs`; raise RuleLoadError listing every problem."""
    dirs = ([builtin_rules_dir()] if builtin else []) + [Path(d) for d in extra_dirs]
    for d in dirs:
        if not d.is_dir():
            raise RuleLoadError([f"{d}: rules directory not found"])
    files: list[Path] = []
    rule_paths: list[str] = []
    for d in dirs:
        found = rule_files(d)
        rule_paths += map(str, found)
        files += found
        files += [p for _, p in locale_files(d)]
    tax = taxonomy_path(dirs) if builtin else None
    if tax is not None and tax.exists():
        files.append(tax)
    if builtin and (dirs[0] / VERIFIED_FILE).exists():
        files.append(dirs[0] / VERIFIED_FILE)
    if builtin:
        files += [dirs[0] / n for n in DATA_FILES if (dirs[0] / n).exists()]
    files.append(builtin_rules_dir() / SECRETS_FILE)
    cache = cache_dir() if use_cache else None
    key = None
    if cache is not None:
        try:
            key = _fingerprint(files)
        except OSError:
            key = None
    if key is not None:
        ruleset = _read_cache(cache / f"rules-{key}.json", key, files, rule_paths, dirs, builtin)
        if ruleset is not None:
            return ruleset
    ruleset = (_validate_isolated(dirs, builtin) if ISOLATE_VALIDATION
               else _validate(dirs, builtin))
    if cache is not None and key is not None:
        data = _ruleset_data(ruleset)
        details = {"key": key, "examples": {r["id"]: r["examples"] for r in data["rules"]}, "locales": data.pop("locales")}
        data["rules"] = [{k: v for k, v in r.items() if k != "examples"} for r in data["rules"]]
        body = {"format": CACHE_FORMAT, "key": key, "sources": [str(p) for p in files], "data": data}
        # two JSON documents on two lines: what every triage needs, then the details parsed on demand
        cachefile.write(cache / f"rules-{key}.json", b"\n".join(
            json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
            for doc in (body, details)))
    return ruleset


def _read_cache(path: Path, key: str, files: list[Path], rule_files: list[str], dirs: list[Path],
                builtin: bool = True) -> Optional[RuleSet]:
    """The cached RuleSet if the file is ours, intact, built from exactly `files`, with a rule for
    every rule file (a planted or stale cache is refused and rebuilt, never trusted)."""
    blob = cachefile.read(path)
    if blob is None:
        return None
    try:
        head, sep, rest = blob.partition(b"\n")   # JSON never holds a raw newline: the split is exact
        body = json.loads(head.decode("utf-8", "surrogatepass"))
        if (not sep or not isinstance(body, dict) or body.get("format") != CACHE_FORMAT or body.get("key") != key
                or body.get("sources") != [str(p) for p in files]):
            raise ValueError("stale")
        body["data"]["locales"] = {}
        ruleset = _ruleset_from(body["data"], _details_reader(rest, key, dirs, builtin))
        have = {r["file"] for r in ruleset.rules}
        if not have.issuperset(rule_files) or list(ruleset.dirs) != [str(d) for d in dirs]:
            raise ValueError("incomplete")
        return ruleset
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        cachefile.remove(path)
        return None


def _ruleset_data(rs: RuleSet) -> dict[str, Any]:
    """A RuleSet as plain data (the cache file, and what a validating child sends back)."""
    return {"rules": rs.rules, "locales": rs.locales, "taxonomy": rs.taxonomy, "dirs": list(rs.dirs),
            "verified": rs.verified, "data": rs.data, "secrets": rs.secrets}


def _ruleset_from(data: dict[str, Any], details: Any = None) -> RuleSet:
    return RuleSet(rules=list(data["rules"]), locales=dict(data["locales"]), taxonomy=dict(data["taxonomy"]),
                   dirs=tuple(data["dirs"]), verified=dict(data["verified"]), data=dict(data["data"]),
                   secrets=list(data["secrets"]), details=details)


def _details_reader(blob: bytes, key: str, dirs: list[Path], builtin: bool) -> Any:
    """The rule cache's second document, parsed when first needed (its bytes were checked with the
    rest of the file). Should it not parse, the rules are validated again for their details."""
    def details() -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            doc = json.loads(blob.decode("utf-8", "surrogatepass"))
            if not isinstance(doc, dict) or doc.get("key") != key:
                raise ValueError("not this cache's details")
            examples, locales = doc["examples"], doc["locales"]
            if not isinstance(examples, dict) or not isinstance(locales, dict):
                raise ValueError("malformed details")
            return examples, locales
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            fresh = _validate(dirs, builtin)
            return {r["id"]: r["examples"] for r in fresh.rules}, fresh.locales
    return details


# --------------------------------------------------------------------------- validation

