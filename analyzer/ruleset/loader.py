"""Discover, validate and cache rule files, locale overlays and the taxonomy (layer 1).

The triage path only touches `load_ruleset()`, which returns plain data from a JSON cache
(`cachefile`: private folder, owner and mode checked, payload digest) keyed on every rule file's
path, mtime and size, and refused unless it holds a rule for every rule file found. yaml, pydantic and the models are imported
only on a cache miss or when validating.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage.ruleset import cachefile
from llmtriage.errors import RuleLoadError

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython builds always have it
    from hashlib import blake2b

CACHE_FORMAT = 6
VERIFIED_FILE = "verified.json"
DATA_FILES = ("verdict.yaml", "actions.yaml")      # verdict data (analyzer/verdict.py), cached with the rules
SECRETS_FILE = "secrets.yaml"
NON_RULE_FILES = {"taxonomy.yaml", "detectors.yaml", "fleet.yaml", "job_texts.yaml", "kb.yaml", SECRETS_FILE, *DATA_FILES}   # data beside the rules, not rules
LOCALES_DIR = "locales"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SEGMENT = re.compile(r"\[([^\[\]]*)\]")


@dataclass
class RuleSet:
    """Validated rules as plain dicts (what the matcher, KB and renderers use)."""

    rules: list[dict[str, Any]]
    locales: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    taxonomy: dict[str, str] = field(default_factory=dict)
    dirs: tuple[str, ...] = ()
    verified: dict[str, Any] = field(default_factory=dict)   # rules/verified.json "fixes" (by verify --record)
    data: dict[str, Any] = field(default_factory=dict)       # DATA_FILES by name (built-in rules only)
    secrets: list[dict[str, Any]] = field(default_factory=list)  # rules/secrets.yaml (see redact.py)

    def __post_init__(self) -> None:
        self.by_id = {r["id"]: r for r in self.rules}

    def __len__(self) -> int:
        return len(self.rules)

    def text(self, rule: dict[str, Any], lang: Optional[str]) -> dict[str, Any]:
        """User-facing text of `rule` in `lang` (title, message, explain, fixes, tags)."""
        base = {k: rule[k] for k in ("title", "message", "explain", "fixes", "tags")}
        if lang and lang != "en":
            over = self.locales.get(lang, {}).get(rule["id"])
            if over:
                fixes = [dict(f, **{k: o[k] for k in ("title", "detail", "when") if o.get(k)})
                         for f, o in zip(rule["fixes"], over["fixes"])]
                base = {"title": over["title"], "message": over["message"], "explain": over["explain"],
                        "fixes": fixes, "tags": list(rule["tags"]) + list(over.get("tags", []))}
        return base


# --------------------------------------------------------------------------- discovery

def builtin_rules_dir() -> Path:
    from importlib.resources import files

    root = files("llmtriage.rules")
    return Path(str(root))


def _rule_files(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*.y*ml")):
        if p.suffix not in (".yaml", ".yml"):
            continue
        rel = p.relative_to(root).parts
        if rel[0] == LOCALES_DIR or (len(rel) == 1 and p.name in NON_RULE_FILES) or any(x.startswith(".") for x in rel):
            continue
        out.append(p)
    return out


def _locale_files(root: Path) -> list[tuple[str, Path]]:
    base = root / LOCALES_DIR
    if not base.is_dir():
        return []
    return [(d.name, p) for d in sorted(base.iterdir()) if d.is_dir() for p in sorted(d.glob("*.y*ml"))]


def _taxonomy_path(dirs: list[Path]) -> Path:
    return dirs[0] / "taxonomy.yaml"


def _fingerprint(paths: Iterable[Path]) -> str:
    # blake2 from its own extension: `hashlib` loads OpenSSL, 3.6 MB of RSS on the triage path
    h = blake2b(f"{CACHE_FORMAT}|{sys.version_info[:2]}".encode(), digest_size=16)
    from llmtriage.version import __version__

    h.update(__version__.encode())
    for p in paths:
        st = p.stat()
        h.update(f"{p}|{st.st_mtime_ns}|{st.st_size}\n".encode())
    return h.hexdigest()[:24]


def _cache_dir() -> Optional[Path]:
    return cachefile.cache_dir()


def cache_dir() -> Optional[Path]:
    """Where llmtriage keeps its caches (None when LLMTRIAGE_NO_CACHE is set)."""
    return _cache_dir()


# Set by the CLI: a cache miss validates the rules in a forked child, so yaml, pydantic and the
# validation's garbage (adversarial probes on 1 MB lines) never enter the scanning process, whose
# peak RSS is then the same with a cold cache as with a warm one.
ISOLATE_VALIDATION = False


def _validate_isolated(dirs: list[Path], builtin: bool) -> RuleSet:
    if not hasattr(os, "fork"):
        return validate_dirs(dirs, builtin=builtin, probe_shipped=False)
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                       # child: validate, send the result, exit
        code = 0
        try:
            os.close(r)
            try:
                payload: Any = ("ok", _ruleset_data(validate_dirs(dirs, builtin=builtin, probe_shipped=False)))
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
        return validate_dirs(dirs, builtin=builtin, probe_shipped=False)    # anything odd in the child: the plain path
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
    rule_files: list[str] = []
    for d in dirs:
        found = _rule_files(d)
        rule_files += map(str, found)
        files += found
        files += [p for _, p in _locale_files(d)]
    tax = _taxonomy_path(dirs) if builtin else None
    if tax is not None and tax.exists():
        files.append(tax)
    if builtin and (dirs[0] / VERIFIED_FILE).exists():
        files.append(dirs[0] / VERIFIED_FILE)
    if builtin:
        files += [dirs[0] / n for n in DATA_FILES if (dirs[0] / n).exists()]
    files.append(builtin_rules_dir() / SECRETS_FILE)
    cache = _cache_dir() if use_cache else None
    key = None
    if cache is not None:
        try:
            key = _fingerprint(files)
        except OSError:
            key = None
    if key is not None:
        ruleset = _read_cache(cache / f"rules-{key}.json", key, files, rule_files, dirs)
        if ruleset is not None:
            return ruleset
    ruleset = (_validate_isolated(dirs, builtin) if ISOLATE_VALIDATION
               else validate_dirs(dirs, builtin=builtin, probe_shipped=False))
    if cache is not None and key is not None:
        body = {"format": CACHE_FORMAT, "key": key, "sources": [str(p) for p in files], "data": _ruleset_data(ruleset)}
        cachefile.write(cache / f"rules-{key}.json",
                        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return ruleset


def _read_cache(path: Path, key: str, files: list[Path], rule_files: list[str], dirs: list[Path]
                ) -> Optional[RuleSet]:
    """The cached RuleSet if the file is ours, intact, built from exactly `files`, with a rule for
    every rule file (a planted or stale cache is refused and rebuilt, never trusted)."""
    blob = cachefile.read(path)
    if blob is None:
        return None
    try:
        body = json.loads(blob.decode("utf-8", "surrogatepass"))
        if (not isinstance(body, dict) or body.get("format") != CACHE_FORMAT or body.get("key") != key
                or body.get("sources") != [str(p) for p in files]):
            raise ValueError("stale")
        ruleset = _ruleset_from(body["data"])
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


def _ruleset_from(data: dict[str, Any]) -> RuleSet:
    return RuleSet(rules=list(data["rules"]), locales=dict(data["locales"]), taxonomy=dict(data["taxonomy"]),
                   dirs=tuple(data["dirs"]), verified=dict(data["verified"]), data=dict(data["data"]),
                   secrets=list(data["secrets"]))


# --------------------------------------------------------------------------- validation

MAX_RULE_FILE = 1 << 20       # bytes; a rule file is a page of YAML


def read_rule_text(path: Path) -> str:
    """A rule/locale/data file's text: a regular file (a FIFO, device or socket is refused without
    blocking, a symlink to /dev/zero included) of at most MAX_RULE_FILE bytes, in UTF-8."""
    import errno
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device, socket or a link to one)")
        if st.st_size > MAX_RULE_FILE:
            raise OSError(errno.EFBIG, f"too large ({st.st_size} bytes; a rule file may hold at most {MAX_RULE_FILE})")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_RULE_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_RULE_FILE:
        raise OSError(errno.EFBIG, f"too large (over {MAX_RULE_FILE} bytes)")
    return data.decode("utf-8")

def _compose_data_file(path: Path) -> Any:
    """A data file beside the rules (taxonomy, secrets), read like a rule file: one-line errors."""
    from llmtriage.ruleset.yamlpos import YamlSyntaxError, compose

    try:
        data, _ = compose(read_rule_text(path))
    except YamlSyntaxError as exc:
        raise RuleLoadError([f"{path}:{exc.line}:{exc.col}: {exc.problem}"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleLoadError([f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"]) from None
    return data


def load_taxonomy(path: Path) -> dict[str, str]:
    data = _compose_data_file(path)
    cats = data.get("categories") if isinstance(data, dict) else None
    if not isinstance(cats, dict) or not cats:
        raise RuleLoadError([f"{path}:1:1: taxonomy: expected a mapping 'categories:' of name -> description"])
    return {str(k): str(v) for k, v in cats.items()}


def validate_dirs(dirs: list[Path], *, builtin: bool = True, probe_shipped: bool = True) -> RuleSet:
    """Validate every rule and locale file of `dirs`. `probe_shipped=False` (the triage path on a
    cache miss) skips the timed regex probes for the shipped rules, which CI runs with them."""
    taxonomy = load_taxonomy(_taxonomy_path([builtin_rules_dir()]))
    shipped = builtin_rules_dir().resolve() if builtin and not probe_shipped else None
    problems: list[str] = []
    rules: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for d in dirs:
        for path in _rule_files(d):
            rule, probs = validate_rule_file(path, d, taxonomy, probe=shipped is None or d.resolve() != shipped)
            problems += probs
            if rule is None:
                continue
            where = f"{path}:1:1"
            if rule["id"] in seen:
                problems.append(f"{where}: [{rule['id']}] id: duplicate rule id, also defined in {seen[rule['id']]}")
                continue
            seen[rule["id"]] = str(path)
            rules.append(rule)
    ids = {r["id"] for r in rules}
    aliases = {a: r["id"] for r in rules for a in r["aliases"]}
    for a, rid in aliases.items():
        if a in ids:
            problems.append(f"{seen[rid]}:1:1: [{rid}] aliases: '{a}' is also the id of a rule")
    locales: dict[str, dict[str, dict[str, Any]]] = {}
    for d in dirs:
        for lang, path in _locale_files(d):
            over, probs = validate_locale_file(path, {r["id"]: r for r in rules})
            problems += probs
            if over is not None:
                locales.setdefault(lang, {})[over["id"]] = over
    if problems:
        raise RuleLoadError(problems)
    rules.sort(key=lambda r: r["id"])
    return RuleSet(rules=rules, locales=locales, taxonomy=taxonomy, dirs=tuple(str(d) for d in dirs),
                   verified=load_verified(builtin_rules_dir() / VERIFIED_FILE),
                   data=load_data_files(builtin_rules_dir()) if builtin else {},
                   secrets=load_secrets(builtin_rules_dir() / SECRETS_FILE))


def load_data_files(root: Path) -> dict[str, Any]:
    """DATA_FILES of `root` parsed with yaml.safe_load (name -> data), for the rule cache."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return {n: yaml.load((root / n).read_text(encoding="utf-8"), Loader=loader)
            for n in DATA_FILES if (root / n).exists()}


def load_secrets(path: Path) -> list[dict[str, Any]]:
    """The credential catalogue, rules/secrets.yaml (a list under `secrets:`), checked entry by entry."""
    from llmtriage.report.redact import check_entry

    data = _compose_data_file(path)
    entries = data.get("secrets") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise RuleLoadError([f"{path}:1:1: expected a list 'secrets:' of credential patterns"])
    problems = [f"{path}: secrets[{i}]: {err}" for i, e in enumerate(entries) for err in [check_entry(e)] if err]
    if problems:
        raise RuleLoadError(problems)
    return [dict(e) for e in entries]


def load_verified(path: Path) -> dict[str, Any]:
    """The "fixes" table of rules/verified.json (written only by `llmtriage verify --record`)."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    fixes = data.get("fixes") if isinstance(data, dict) else None
    return fixes if isinstance(fixes, dict) else {}


def best_verification(entry: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The run to show for one verified.json entry: a verified device first (GPU before CPU)."""
    if not isinstance(entry, dict):
        return None
    runs = entry.get("devices") or {}
    best = None
    for dev in sorted(runs, key=lambda d: (d == "cpu", d)):
        rec = dict(runs[dev], device=dev)
        if rec.get("verified") is True:
            return rec
        best = best or rec
    return best


def _fmt(path: Path, line: int, col: int, rid: Optional[str], key: str, problem: str) -> str:
    tag = f" [{rid}]" if rid else ""
    key = f" {key}:" if key else ""
    return f"{path}:{line}:{col}:{tag}{key} {problem}"


def _loc_str(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _pydantic_problems(exc: Any, path: Path, node: Any, rid: Optional[str]) -> list[str]:
    from llmtriage.ruleset.yamlpos import key_node, locate

    out = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        typ = err["type"]
        if typ == "extra_forbidden":
            k = key_node(node, loc)
            line, col = (k.start_mark.line + 1, k.start_mark.column + 1) if k is not None else locate(node, loc)
            msg = "unknown key (not in the rule schema, see rules/schema.json)"
        elif typ == "missing":
            line, col = locate(node, loc[:-1])
            msg = "required key is missing"
            if loc[-2:] in (("examples", "match"), ("examples", "no_match")):
                msg = (f"at least one {'near-miss ' if loc[-1] == 'no_match' else ''}example is required "
                       "(every rule carries examples that are run through the engine)")
        else:
            line, col = locate(node, loc)
            msg = err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            if typ.endswith("_type") and "input" in err:
                msg += f" (got {type(err['input']).__name__})"
        out.append(_fmt(path, line, col, rid, _loc_str(loc), msg))
    return out


def template_names(template: str) -> tuple[set[str], set[str]]:
    """(placeholders outside [..] segments, placeholders inside segments)."""
    inside: set[str] = set()
    for seg in _SEGMENT.findall(template):
        inside |= set(_PLACEHOLDER.findall(seg))
    outside = set(_PLACEHOLDER.findall(_SEGMENT.sub("", template)))
    return outside, inside


def validate_rule_file(path: Path, root: Path, taxonomy: dict[str, str], probe: bool = True
                       ) -> tuple[Optional[dict[str, Any]], list[str]]:
    from pydantic import ValidationError

    from llmtriage.ruleset.model import Rule
    from llmtriage.ruleset.regexcheck import check_regex, group_names
    from llmtriage.ruleset.yamlpos import YamlSyntaxError, compose, locate, scalar_style

    try:
        text = read_rule_text(path)
    except UnicodeDecodeError as exc:
        return None, [_fmt(path, 1, 1, None, "", f"not UTF-8 ({exc.reason} at byte {exc.start})")]
    except OSError as exc:
        return None, [_fmt(path, 1, 1, None, "", f"cannot read: {exc.strerror}")]
    try:
        data, node = compose(text)
    except YamlSyntaxError as exc:
        return None, [_fmt(path, exc.line, exc.col, None, "", exc.problem)]
    if not isinstance(data, dict):
        return None, [_fmt(path, 1, 1, None, "", "a rule file must be a YAML mapping")]
    rid = data.get("id") if isinstance(data.get("id"), str) else None
    try:
        rule = Rule.model_validate(data)
    except ValidationError as exc:
        return None, _pydantic_problems(exc, path, node, rid)
    problems: list[str] = []

    def add(loc: tuple[Any, ...], msg: str) -> None:
        line, col = locate(node, loc)
        problems.append(_fmt(path, line, col, rule.id, _loc_str(loc), msg))

    if rule.id != path.stem:
        add(("id",), f"id must equal the file name '{path.stem}'")
    if rule.category not in taxonomy:
        import difflib

        near = [c for c in taxonomy if c.startswith(rule.category)][:1] or difflib.get_close_matches(
            rule.category, list(taxonomy), n=1, cutoff=0.5)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        add(("category",), f"'{rule.category}' is not in rules/taxonomy.yaml{hint}")
    elif rule.category == "unknown":
        add(("category",), "'unknown' is produced by the engine, not by rules")
    rel = path.relative_to(root).parts
    if len(rel) > 1 and rel[-2] != rule.category:
        add(("category",), f"rule file must live in a folder named after its category ('{rule.category}/'), not '{rel[-2]}/'")

    kinds = (("any", rule.match.any), ("not", rule.match.not_), ("requires", rule.match.requires),
             ("unless", rule.match.unless))
    groups_per_any: list[set[str]] = []
    req_groups: set[str] = set()        # a required line always matched, so its groups may be used too
    for kind, pats in kinds:
        for i, pat in enumerate(pats):
            loc = ("match", kind, i, "regex")
            if scalar_style(node, loc) == '"':
                add(loc, "write regexes as single-quoted YAML scalars: double quotes interpret backslashes")
            err = check_regex(pat.regex, probe)
            if err:
                add(loc, err)
                continue
            if kind == "any":
                groups_per_any.append(group_names(pat.regex))
            elif kind == "requires":
                req_groups |= group_names(pat.regex)
    if groups_per_any and len(groups_per_any) == len(rule.match.any):
        outside, inside = template_names(rule.message)
        groups_per_any = [g | req_groups for g in groups_per_any]
        for i, groups in enumerate(groups_per_any):
            for name in sorted(outside - groups):
                pname = rule.match.any[i].name or f"#{i}"
                add(("message",), f"placeholder {{{name}}} is not a named group of match.any[{i}] ('{pname}'); "
                                  "put it inside a [..] segment to make it optional")
        for name in sorted(inside - set().union(*groups_per_any)):
            add(("message",), f"placeholder {{{name}}} is not a named group of any match.any pattern")
    if rule.message.count("[") != rule.message.count("]"):
        add(("message",), "unbalanced [..] segment")
    for i, ex in enumerate(rule.examples.match):
        if not any(k.lower() in ex.log.lower() for k in rule.keywords):
            add(("examples", "match", i, "log"), f"contains none of the keywords {rule.keywords}")
    if problems:
        return None, problems
    d = rule.model_dump(by_alias=False)
    d["match"]["not"] = d["match"].pop("not_")
    d["file"] = str(path)
    return d, []


def validate_locale_file(path: Path, rules: dict[str, dict[str, Any]]) -> tuple[Optional[dict[str, Any]], list[str]]:
    from pydantic import ValidationError

    from llmtriage.ruleset.model import LocaleOverlay
    from llmtriage.ruleset.yamlpos import YamlSyntaxError, compose, locate

    try:
        data, node = compose(read_rule_text(path))
    except YamlSyntaxError as exc:
        return None, [_fmt(path, exc.line, exc.col, None, "", exc.problem)]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [_fmt(path, 1, 1, None, "", f"cannot read: {getattr(exc, 'strerror', None) or exc}")]
    rid = data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
    if not isinstance(data, dict):
        return None, [_fmt(path, 1, 1, None, "", "a locale file must be a YAML mapping")]
    try:
        over = LocaleOverlay.model_validate(data)
    except ValidationError as exc:
        return None, _pydantic_problems(exc, path, node, rid)
    problems: list[str] = []

    def add(loc: tuple[Any, ...], msg: str) -> None:
        line, col = locate(node, loc)
        problems.append(_fmt(path, line, col, over.id, _loc_str(loc), msg))

    rule = rules.get(over.id)
    if over.id != path.stem:
        add(("id",), f"id must equal the file name '{path.stem}'")
    if rule is None:
        add(("id",), f"no rule with id '{over.id}' to translate")
        return None, problems
    if len(over.fixes) != len(rule["fixes"]):
        add(("fixes",), f"has {len(over.fixes)} fixes but the rule has {len(rule['fixes'])} (same order required)")
    if template_names(over.message) != template_names(rule["message"]):
        o, i = template_names(rule["message"])
        add(("message",), f"placeholders/segments differ from the rule's message (expected {sorted(o)} outside and "
                          f"{sorted(i)} inside [..])")
    if problems:
        return None, problems
    return over.model_dump(), []
