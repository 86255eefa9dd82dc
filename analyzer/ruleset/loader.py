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
import weakref
import zlib
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.errors import RuleLoadError
from llmtriage.ruleset import cachefile
from llmtriage.ruleset.files import (DATA_FILES, SECRETS_FILE, builtin_rules_dir, locale_files, rule_files,
                                     taxonomy_path)
from llmtriage.ruleset.verified import VERIFIED_FILE
from llmtriage.ruleset.rules import BODY_KEYS, ORDER_KEY, LazyRule, RuleSet
from llmtriage.version import __version__

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython builds always have it
    from hashlib import blake2b

CACHE_FORMAT = 9


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
        if cachefile.write(cache / f"rules-{key}.json", _cache_payload(ruleset, key, files)):
            ruleset.cache_key = key
    return ruleset


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _cache_payload(ruleset: RuleSet, key: str, files: list[Path]) -> bytes:
    """Two JSON documents on two lines: what every triage needs, then the details parsed on demand.
    In the first, `data.rules` comes last and each rule is preceded by a carriage return (JSON
    whitespace; a string never holds a raw one), so that a reader can parse it rule by rule while it
    streams the file (_read_cache) instead of decoding one 3 MB document at once; a second one
    inside each rule parts what the engine compiles from the prose (BODY_KEYS and the rule's key
    order), which the reader only checksums and parses when the rule is first used (LazyRule)."""
    data = _ruleset_data(ruleset)
    details = {"key": key, "examples": {r["id"]: r["examples"] for r in data["rules"]}, "locales": data.pop("locales")}
    rules = [{k: v for k, v in r.items() if k != "examples"} for r in data.pop("rules")]
    data["rules"] = []
    head = _dumps({"format": CACHE_FORMAT, "key": key, "sources": [str(p) for p in files], "data": data})
    assert head.endswith(_RULES_END)
    parts = [head[:-len(_RULES_END)]]
    for i, r in enumerate(rules):
        # a rule is two pieces: what the engine compiles, then its prose (parsed only when used)
        hot = _dumps({k: v for k, v in r.items() if k not in BODY_KEYS})
        body = _dumps({**{k: r[k] for k in BODY_KEYS if k in r}, ORDER_KEY: list(r)})
        parts += [b"\r," if i else b"\r", hot[:-1], b",\r", body[1:]]
    parts.append(b"\r" + _RULES_END)
    return b"".join(parts) + b"\n" + _dumps(details)


_RULES_END = b"]}}"       # how the first document ends: the rules list, `data`, the document


def _read_cache(path: Path, key: str, files: list[Path], rule_files: list[str], dirs: list[Path],
                builtin: bool = True) -> Optional[RuleSet]:
    """The cached RuleSet if the file is ours, intact, built from exactly `files`, with a rule for
    every rule file (a planted or stale cache is refused and rebuilt, never trusted).

    The file is streamed (cachefile.read_stream): the first document is parsed piece by piece (its
    head, then one rule at a time, see _cache_payload), the details only checksummed and read back
    from the same fd when something asks for them. Peak memory is the parsed rules, not the file
    plus its decoded text plus the rules (~25 MB less on the shipped rules)."""
    head: list[Any] = []
    rules: list[Any] = []
    buf = bytearray()
    at = [0]                                 # file offset of the piece in `buf`
    hot: list[Any] = []                      # a rule's first piece, waiting for its prose
    cache = _CacheFile(key, dirs, builtin)

    def piece(data: bytes, offset: int, last: bool) -> None:
        if not head:
            if last:                         # one plain document (no per-rule pieces): parse it whole
                doc = json.loads(data.decode("utf-8", "surrogatepass"))
                rules.extend(doc["data"]["rules"])
                doc["data"]["rules"] = []
            else:
                doc = json.loads((data + _RULES_END).decode("utf-8", "surrogatepass"))
                if doc["data"]["rules"] != []:
                    raise ValueError("malformed")
            head.append(doc)
        elif last:
            if data != _RULES_END or hot:
                raise ValueError("malformed")
        elif hot:                            # the prose: `"title":...}`, parsed on first use
            rid = hot[0]["id"]
            if data[-1:] != b"}" or not isinstance(rid, str):
                raise ValueError("malformed")
            rules.append(LazyRule(hot.pop(), cache.body(rid, offset, len(data), zlib.crc32(data))))
        else:                                # `{...,` (the first rule) or `,{...,`
            if not data.startswith(b",{" if rules else b"{") or data[-1:] != b",":
                raise ValueError("malformed")
            doc = json.loads((data[1 if rules else 0:-1] + b"}").decode("utf-8", "surrogatepass"))
            if not isinstance(doc, dict):
                raise ValueError("malformed")
            hot.append(doc)

    def consume(chunk: bytes, offset: int) -> int:
        start = 0
        while True:
            if not buf:
                at[0] = offset + start
            cr, nl = chunk.find(b"\r", start), chunk.find(b"\n", start)
            end = nl if cr < 0 or 0 <= nl < cr else cr
            if end < 0:
                buf.extend(memoryview(chunk)[start:])
                return -1
            buf.extend(memoryview(chunk)[start:end])
            piece(bytes(buf), at[0], end == nl)
            buf.clear()
            if end == nl:
                return end + 1
            start = end + 1

    try:
        got = cachefile.read_stream(path, consume)
        if got is None:
            return None
        fd, off, length, crc = got
        cache.opened(fd)
        details = _Details(cache, off, length, crc)
        if not head or buf or hot:
            raise ValueError("truncated")
        body = head[0]
        if (not isinstance(body, dict) or body.get("format") != CACHE_FORMAT or body.get("key") != key
                or body.get("sources") != [str(p) for p in files]):
            raise ValueError("stale")
        body["data"]["rules"] = rules
        body["data"]["locales"] = {}
        ruleset = _ruleset_from(body["data"], details)
        have = {r["file"] for r in ruleset.rules}
        if not have.issuperset(rule_files) or list(ruleset.dirs) != [str(d) for d in dirs]:
            raise ValueError("incomplete")
        ruleset.cache_key = key
        return ruleset
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, RecursionError):
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


class _CacheFile:
    """The checked rule cache file, kept open (its fd) for what is parsed on demand: each rule's
    prose and the details document. Pieces are read back from the very file that was checked and must
    still have the CRC-32 noted while it was streamed; should one not (or not parse), the rules are
    validated again and the piece is taken from them (rare: nothing rewrites a cache file in place)."""

    def __init__(self, key: str, dirs: list[Path], builtin: bool):
        self.key, self._dirs, self._builtin = key, dirs, builtin
        self._fd: Optional[int] = None
        self._close: Any = None
        self._fresh: Optional[RuleSet] = None

    def opened(self, fd: int) -> None:
        self._fd = fd
        self._close = weakref.finalize(self, os.close, fd)

    def read(self, offset: int, length: int, crc: int) -> Optional[bytes]:
        if self._fd is None or not self._close.alive:
            return None
        return cachefile.read_tail(self._fd, offset, length, crc)

    def fresh(self) -> RuleSet:
        if self._fresh is None:
            self._fresh = _validate(self._dirs, self._builtin)
        return self._fresh

    def body(self, rid: str, offset: int, length: int, crc: int) -> Any:
        def load() -> dict[str, Any]:
            try:
                blob = self.read(offset, length, crc)
                if blob is None:
                    raise ValueError("changed since it was checked")
                doc = json.loads((b"{" + blob).decode("utf-8", "surrogatepass"))
                if not isinstance(doc, dict) or not isinstance(doc.get(ORDER_KEY), list):
                    raise ValueError("malformed prose")
                return doc
            except (ValueError, UnicodeDecodeError):
                r = self.fresh().by_id[rid]
                return {**{k: r[k] for k in BODY_KEYS if k in r}, ORDER_KEY: [k for k in r if k != "examples"]}
        return load


class _Details:
    """The rule cache's second document, read back and parsed when first needed (its bytes were
    checksummed with the rest of the file). Should it not parse, the rules are validated again for their details."""

    def __init__(self, cache: _CacheFile, offset: int, length: int, crc: int):
        self._cache, self._where = cache, (offset, length, crc)

    def __call__(self) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            blob = self._cache.read(*self._where)
            if blob is None:
                raise ValueError("details changed since they were checked")
            doc = json.loads(blob.decode("utf-8", "surrogatepass"))
            if not isinstance(doc, dict) or doc.get("key") != self._cache.key:
                raise ValueError("not this cache's details")
            examples, locales = doc["examples"], doc["locales"]
            if not isinstance(examples, dict) or not isinstance(locales, dict):
                raise ValueError("malformed details")
            return examples, locales
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            fresh = self._cache.fresh()
            return {r["id"]: r["examples"] for r in fresh.rules}, fresh.locales


# --------------------------------------------------------------------------- validation

