"""Validate rule files and locale overlays (layer 1): schema, ids, categories, templates, patterns.

Every problem is one line, `path:line:col: [id] key: problem`, pinned by tests/test_rule_file_errors.py.
Imports yaml, pydantic and `regex`: only a cache miss (`loader`) and `rules validate` load this module.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from llmtriage.errors import RuleLoadError
from llmtriage.ruleset.files import (SECRETS_FILE, builtin_rules_dir, load_data_files, load_taxonomy, locale_files,
                                     read_rule_text, rule_files, taxonomy_path, verified_path)
from llmtriage.ruleset.verified import fix_table, read_record
from llmtriage.ruleset.model import LocaleOverlay, Rule
from llmtriage.ruleset.regexcheck import check_regex, group_names
from llmtriage.templates import CHECK_RE
from llmtriage.ruleset.rules import RuleSet
from llmtriage.ruleset.secrets import load_secrets
from llmtriage.ruleset.yamlpos import YamlSyntaxError, compose, key_node, locate, scalar_style
from llmtriage.templates import template_names


def validate_dirs(dirs: list[Path], *, builtin: bool = True, probe_shipped: bool = True) -> RuleSet:
    """Validate every rule and locale file of `dirs`. `probe_shipped=False` (the triage path on a
    cache miss) skips the timed regex probes for the shipped rules, which CI runs with them."""
    taxonomy = load_taxonomy(taxonomy_path([builtin_rules_dir()]))
    shipped = builtin_rules_dir().resolve() if builtin and not probe_shipped else None
    problems: list[str] = []
    rules: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for d in dirs:
        for path in rule_files(d):
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
        for lang, path in locale_files(d):
            over, probs = validate_locale_file(path, {r["id"]: r for r in rules})
            problems += probs
            if over is not None:
                locales.setdefault(lang, {})[over["id"]] = over
    if problems:
        raise RuleLoadError(problems)
    rules.sort(key=lambda r: r["id"])
    return RuleSet(rules=rules, locales=locales, taxonomy=taxonomy, dirs=tuple(str(d) for d in dirs),
                   verified=fix_table(read_record(verified_path())),
                   data=load_data_files(builtin_rules_dir()) if builtin else {},
                   secrets=load_secrets(builtin_rules_dir() / SECRETS_FILE))




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


def validate_rule_file(path: Path, root: Path, taxonomy: dict[str, str], probe: bool = True
                       ) -> tuple[Optional[dict[str, Any]], list[str]]:
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
    if groups_per_any and rule.match.checks:
        known = set().union(*groups_per_any) | req_groups
        for i, c in enumerate(rule.match.checks):
            m = CHECK_RE.match(c)     # the model already refused a check this does not parse
            for name in (m.group(1), m.group(3)) if m else ():
                if name[0].isalpha() or name[0] == "_":
                    if name not in known:
                        add(("match", "checks", i), f"check {c!r} names '{name}', not a named group of the rule's patterns")
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
