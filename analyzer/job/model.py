"""What `llmtriage job` reports: one `RankInfo` per rank and the `JobResult` of the whole job."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from llmtriage.findings import JSON_VERSION, Finding, Report


@dataclass
class RankInfo:
    rank: Optional[int]
    source: str
    status: str                      # cause | cascade | warning | ok
    top: Optional[Finding] = None
    time: Optional[float] = None
    time_kind: Optional[str] = None
    time_text: str = ""
    phase: Optional[str] = None
    step: Optional[int] = None
    report_index: Optional[int] = None
    ranks: list[int] = field(default_factory=list)    # several ranks share the failing line (interleaved)

    def to_dict(self) -> dict[str, Any]:
        t = self.top
        return {
            "rank": self.rank, "source": self.source, "status": self.status,
            "category": t.category if t else None, "rule_id": t.rule_id if t else None,
            "severity": t.severity if t else None, "line": t.line if t else None,
            "message": t.message if t else None, "time": self.time_text or None,
            "phase": self.phase, "step": self.step,
        }


@dataclass
class JobResult:
    mode: str                                  # per-file | interleaved | flight-recorder
    ranks: list[RankInfo]
    reports: list[Report]
    first: Optional[RankInfo] = None
    root: Optional[Finding] = None
    cascade: str = ""
    silent_ranks: list[int] = field(default_factory=list)
    world_size: Optional[int] = None
    phase: Optional[str] = None
    step: Optional[int] = None
    flight_recorder: Optional[dict[str, Any]] = None     # detect.flight_recorder.FRResult.to_dict()
    fr_sentence: str = ""
    stall: Optional[dict[str, Any]] = None               # job.stall.job_stall()

    def to_dict(self) -> dict[str, Any]:
        root = self.root.to_dict() if self.root else None
        first = self.first
        job = {
            "mode": self.mode, "world_size": self.world_size,
            "first_rank": first.rank if first else None,
            "first_ranks": (list(first.ranks) or ([first.rank] if first.rank is not None else [])) if first else [],
            "first_source": first.source if first else None,
            "category": self.root.category if self.root else None,
            "root_cause": root, "phase": self.phase, "step": self.step,
            "time": (first.time_text or None) if first else None,
            "cascade": self.cascade, "silent_ranks": list(self.silent_ranks),
            "ranks": [r.to_dict() for r in self.ranks],
            "flight_recorder": self.flight_recorder, "stall": self.stall,
        }
        return {"version": JSON_VERSION, "job": job, "reports": [r.to_dict() for r in self.reports]}

    @property
    def failed(self) -> bool:
        return (any(f.severity == "error" for r in self.reports for f in r.findings)
                or bool(self.flight_recorder and self.flight_recorder.get("suspect_ranks")))


__all__ = ["RankInfo", "JobResult"]
