"""Pydantic models of a rule file and of a locale overlay.

Imported only when rules are (re)validated: the triage hot path works on the
plain data the loader caches, never on these models.
"""
from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

from llmtriage.templates import CHECK_RE

_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Pattern(_Strict):
    """One regular expression. Named groups become captures."""

    regex: StrictStr = Field(description="RE2-compatible regular expression (single-quoted YAML).")
    name: Optional[StrictStr] = Field(default=None, description="Short name of this wording variant.")


class Match(_Strict):
    """How a rule recognises its signature in a log."""

    any: list[Pattern] = Field(min_length=1, description="The rule hits a line when one of these matches it.")
    not_: list[Pattern] = Field(
        default_factory=list,
        alias="not",
        description="A hit is vetoed when one of these matches the same line.",
    )
    requires: list[Pattern] = Field(
        default_factory=list,
        description="Each of these must also match somewhere in the same log for the rule to fire.",
    )
    unless: list[Pattern] = Field(
        default_factory=list,
        description="The rule does not fire when one of these matches anywhere in the same log.",
    )
    checks: list[StrictStr] = Field(
        default_factory=list,
        description="Comparisons of the hit's numeric captures ('tokens < features', 'count >= 2'); the rule "
                    "does not fire when one is false (a capture that is absent or not a number passes).",
    )

    min_count: StrictInt = Field(
        default=1, ge=1,
        description="The rule fires only when it hit at least this many lines (a warning that matters when it repeats).",
    )

    @field_validator("checks")
    @classmethod
    def _checks_parse(cls, v: list[str]) -> list[str]:
        for c in v:
            if not CHECK_RE.match(c):
                raise ValueError(f"check {c!r} is not 'capture OP capture-or-number [* + - number]' (OP one of < <= > >= == !=)")
        return v

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class Explain(_Strict):
    what: StrictStr = Field(description="What the error means.")
    why: StrictStr = Field(description="Why it happens in LLM training or inference.")


class Fix(_Strict):
    title: StrictStr = Field(max_length=120)
    detail: StrictStr
    snippet: Optional[StrictStr] = None
    when: Optional[StrictStr] = Field(default=None, description="Condition under which this fix applies.")
    verified_by: Optional[StrictStr] = Field(
        default=None,
        description="Reproducer scenario variant ('scenario:variant') whose run verifies this fix.",
    )


class MatchExample(_Strict):
    log: StrictStr
    name: Optional[StrictStr] = None
    source: Optional[StrictStr] = None
    expect: dict[StrictStr, StrictStr] = Field(default_factory=dict, description="Expected captures.")


class NoMatchExample(_Strict):
    log: StrictStr
    why: StrictStr = Field(min_length=3)
    expect_rule: Optional[StrictStr] = None


class Examples(_Strict):
    match: list[MatchExample] = Field(min_length=1)
    no_match: list[NoMatchExample] = Field(min_length=1)
    todo_match: list[MatchExample] = Field(default_factory=list)
    todo_no_match: list[NoMatchExample] = Field(default_factory=list)


class Reproducer(_Strict):
    scenario: StrictStr
    needs: list[Literal["torch", "transformers", "cuda"]] = Field(default_factory=list)


class Rule(_Strict):
    """One rule file: an error signature mapped to a cause and its fixes."""

    id: StrictStr = Field(description="Stable kebab-case id naming the signature; equals the file stem.")
    category: StrictStr = Field(description="A key of rules/taxonomy.yaml; equals the parent folder.")
    title: StrictStr = Field(max_length=90)
    status: Literal["preview", "stable", "deprecated"] = "stable"
    role: Literal["cause", "symptom"]
    severity: Literal["error", "warning", "info"]
    confidence: Literal["high", "medium", "low"] = "high"
    priority: StrictInt = Field(default=50, ge=0, le=100)
    keywords: list[StrictStr] = Field(min_length=1)
    match: Match
    message: StrictStr
    explain: Explain
    fixes: list[Fix] = Field(min_length=1)
    references: list[StrictStr] = Field(default_factory=list)
    tags: list[StrictStr] = Field(default_factory=list, description="Search terms (English or Chinese) for kb search.")
    reproducer: Optional[Reproducer] = None
    aliases: list[StrictStr] = Field(default_factory=list)
    action: Optional[Literal["retry", "fix", "replace-node", "none"]] = Field(
        default=None,
        description="Next action when this rule is the root cause; default: its category's in rules/actions.yaml.")
    warns: bool = Field(
        default=False,
        description="The library states this failure only through a Python warning (warnings.warn, e.g. a "
                    "UserWarning): the warning line is the signature itself, not an error quoted in one, so "
                    "verdict contexts with `except_warns` (quoted-in-warning) do not demote it.")
    examples: Examples

    @field_validator("id")
    @classmethod
    def _kebab(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError(f"'{v}' is not kebab-case (a-z, 0-9, single dashes)")
        return v

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, v: list[str]) -> list[str]:
        for k in v:
            if len(k.strip()) < 3:
                raise ValueError(f"keyword {k!r} is shorter than 3 characters")
        return v


class LocaleFix(_Strict):
    title: StrictStr
    detail: StrictStr
    when: Optional[StrictStr] = None


class LocaleExplain(_Strict):
    what: StrictStr
    why: StrictStr


class LocaleOverlay(_Strict):
    """rules/locales/<lang>/<id>.yaml: the user-facing text of one rule, translated."""

    id: StrictStr
    title: StrictStr
    message: StrictStr
    explain: LocaleExplain
    fixes: list[LocaleFix] = Field(min_length=1)
    tags: list[StrictStr] = Field(default_factory=list)
