"""Output data model: Finding and Report with a stable JSON shape (layer 0).

JSON contract (read by ../shared/tools/score.py; extend, never break):
{"version": 1, "reports": [{"source": ..., "findings": [FINDING, ...]}]} where FINDING has at least
rule_id, category, severity, title, message, line, evidence, rank, count, captures, cause, fixes,
action, action_reason, judgement; a report also carries status, death, action and action_reason
(see README "JSON output").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

JSON_VERSION = 1
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass
class Frame:
    file: str
    line: int
    function: str
    code: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}


@dataclass
class ExceptionInfo:
    """The final exception of a (possibly chained) Python traceback."""

    type: str
    message: str
    line: int                     # 1-based line of the exception line in the input
    rank: Optional[int] = None
    frames: list[Frame] = field(default_factory=list)
    user_frame: Optional[Frame] = None
    chain: list[str] = field(default_factory=list)      # earlier exceptions in the chain ("Type: msg")
    cpp_frames: list[str] = field(default_factory=list)
    chain_omitted: int = 0        # chained exceptions left out of `chain` (it keeps the first and last few)
    thread: bool = False          # raised in a background thread ("Exception in thread X:"): not the process's death
    handled: list[int] = field(default_factory=list)   # lines of earlier links whose handler raised this one
                                  # ("During handling of the above exception"; not "direct cause"), last few

    @property
    def headline(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": self.message,
            "line": self.line,
            "rank": self.rank,
            "frames": [f.to_dict() for f in self.frames],
            "user_frame": self.user_frame.to_dict() if self.user_frame else None,
            "chain": list(self.chain),
            "cpp_frames": list(self.cpp_frames),
            "chain_omitted": self.chain_omitted,
        }


@dataclass
class Finding:
    rule_id: str
    category: str
    severity: str
    title: str
    message: str
    line: int
    evidence: str
    rank: Optional[int] = None
    count: int = 1
    captures: dict[str, str] = field(default_factory=dict)
    cause: str = ""
    fixes: list[dict[str, Any]] = field(default_factory=list)
    role: str = "cause"
    confidence: str = "high"
    priority: int = 50
    last_line: Optional[int] = None
    ranks: list[int] = field(default_factory=list)
    explanation: str = ""
    location: Optional[Frame] = None
    references: list[str] = field(default_factory=list)
    source: str = ""
    action: str = ""              # retry | fix | replace-node | none (analyzer/verdict.py)
    action_reason: str = ""
    judgement: Optional[dict[str, Any]] = None   # {context, severity_was, reason} when context changed severity

    def same_process(self, other: "Finding") -> bool:
        """Whether the two findings may come from one process: either has no rank, or their ranks meet."""
        return (self.rank is None or other.rank is None or self.rank == other.rank or other.rank in self.ranks
                or self.rank in other.ranks)

    def sort_key(self) -> tuple:
        # errors first: by the time findings are ranked, the verdict has promoted any warning that
        # explains a death to an error, so a warning left is never the root cause of an error beside it
        return (
            SEVERITY_ORDER.get(self.severity, 3),
            0 if self.role == "cause" else 1,
            -self.priority,
            self.line,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "category": self.category,
            "severity": self.severity,
            "title": self.title,
            "message": self.message,
            "line": self.line,
            "last_line": self.last_line if self.last_line is not None else self.line,
            "evidence": self.evidence,
            "rank": self.rank,
            "ranks": list(self.ranks),
            "count": self.count,
            "captures": dict(self.captures),
            "role": self.role,
            "confidence": self.confidence,
            "cause": self.cause,
            "explanation": self.explanation,
            "fixes": [dict(f) for f in self.fixes],
            "location": self.location.to_dict() if self.location else None,
            "references": list(self.references),
            "action": self.action,
            "action_reason": self.action_reason,
            "judgement": dict(self.judgement) if self.judgement else None,
        }


@dataclass
class Report:
    source: str
    findings: list[Finding] = field(default_factory=list)
    exception: Optional[ExceptionInfo] = None
    lines: int = 0
    bytes: int = 0
    encoding: str = "utf-8"
    long_lines: int = 0          # lines longer than the matching cap (matched in pieces)
    extra: dict[str, Any] = field(default_factory=dict)   # phase, step, ranks... added by later stages
    # ids of the rules whose `match.unless` hit somewhere in the log (not serialised): a rescan of one
    # line (detect/wrapped.py) must not bring back a rule the whole log vetoed
    unless_rules: frozenset[str] = field(default_factory=frozenset)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def top(self) -> Optional[Finding]:
        return self.findings[0] if self.findings else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source,
            "findings": [f.to_dict() for f in self.findings],
            "exception": self.exception.to_dict() if self.exception else None,
            "lines": self.lines,
            "bytes": self.bytes,
            "encoding": self.encoding,
            "long_lines": self.long_lines,
        }
        d.update(self.extra)
        return d


def reports_to_dict(reports: list[Report]) -> dict[str, Any]:
    return {"version": JSON_VERSION, "reports": [r.to_dict() for r in reports]}
