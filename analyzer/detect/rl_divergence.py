"""An RL run whose policy drifted away from its reference until the rewards collapsed (silent failure).

GRPO/PPO log the KL between the policy and the reference model; in a healthy run it stays far below 1.
When the policy runs away (a learning rate too high for RL, reward hacking with a weak KL penalty, a
rollout engine whose log-probs no longer match the trainer's) the KL climbs by orders of magnitude and the
rewards fall to nothing: every completion of a group scores the same (reward_std 0), accuracy goes to 0.
The run does not crash; it finishes and saves the collapsed model. The rule `rl-kl-divergence` names a KL in
the hundreds on one line; this detector reads the whole series, so it also sees a KL of 5-50 that held to
the end of the log together with the rewards it destroyed.

Records: TRL's dicts ({'reward': .., 'reward_std': .., 'kl': ..}) and verl's step lines
(actor/kl_loss, critic/score/mean). Thresholds: rules/verdict.yaml `rl_kl_diverged`; texts:
rules/detectors.yaml `rl_kl_diverged`. Only when no error finding of the same category is there already.
"""
from __future__ import annotations

import math
import re
from collections import deque
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import fmt, median
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_KEEP = 512     # records kept at each end of the series

NUMBER = rb"""['"]?([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|nan|inf)"""
_TRL_KL = re.compile(rb"""['"]kl['"]\s*:\s*""" + NUMBER)
_TRL_REWARD = re.compile(rb"""['"]reward['"]\s*:\s*""" + NUMBER)
_TRL_STD = re.compile(rb"""['"]reward_std['"]\s*:\s*""" + NUMBER)
_VERL_KL = re.compile(rb"actor/kl_loss:" + NUMBER)
_VERL_REWARD = re.compile(rb"critic/score/mean:" + NUMBER)


def _threshold(spec: dict[str, Any], tail_kl: float, early: float) -> Optional[float]:
    """The KL level the tail held, or None when the KL did not diverge.

    Either an absolute KL of `kl_min` or more, `rise` times the early median; or, for estimators that stay small
    (verl's low_var_kl kl_loss is clamped at 10 and a healthy run logs 1e-3), `kl_floor` or more after a rise of
    `rise_strong` times the early median."""
    early = max(early, 0.0)
    if tail_kl >= float(spec["kl_min"]) and tail_kl >= float(spec["rise"]) * early:
        return float(spec["kl_min"])
    floor, strong = spec.get("kl_floor"), spec.get("rise_strong")
    if floor is not None and strong is not None and early > 0 and tail_kl >= float(floor) \
            and tail_kl >= float(strong) * early:
        return float(floor)
    return None


def finite_number(m: Optional[re.Match], group: int = 1) -> Optional[float]:
    """The NUMBER captured by `group` of a match as a float; None without a match or for nan/inf."""
    if m is None:
        return None
    try:
        v = float(m.group(group))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


class EndJudged:
    """An RL tracker judged once at the end of the log: `finding` returns its finding or None."""

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        raise NotImplementedError

    def finish(self, report: Any, findings: list[Finding]) -> None:
        f = self.finding(findings)
        if f is not None:
            findings.append(f)


class RlKlTracker(EndJudged):
    """Collects (line, kl, reward, reward_std) per RL record; judges the series at the end."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        # bounded on a log of millions of RL records: the first records (the early KL), the last ones (the
        # tail and the run of high KL before it), the count and the reward peak over all of them
        self.head: list[tuple[int, float, Optional[float], Optional[float]]] = []
        self.tail: deque[tuple[int, float, Optional[float], Optional[float]]] = deque(maxlen=_KEEP)
        self.count = 0
        self.peak: Optional[float] = None

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if b"kl" not in view or (b"'kl'" not in view and b'"kl"' not in view and b"actor/kl_loss:" not in view):
            return
        for i, line in enumerate(view.split(b"\n")):
            trl = _TRL_KL.search(line)
            if trl is not None:
                kl, reward, std = finite_number(trl), finite_number(_TRL_REWARD.search(line)), finite_number(_TRL_STD.search(line))
            else:
                verl = _VERL_KL.search(line)
                if verl is None:
                    continue
                kl, reward, std = finite_number(verl), finite_number(_VERL_REWARD.search(line)), None
            if kl is not None:
                rec = (line_base + i, kl, reward, std)
                self.count += 1
                if len(self.head) < _KEEP:
                    self.head.append(rec)
                self.tail.append(rec)
                if reward is not None and (self.peak is None or reward > self.peak):
                    self.peak = reward

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_kl_diverged")
        recs = list(self.tail)
        if not spec or self.count < int(spec["min_records"]):
            return None
        entry = detector_texts()["rl_kl_diverged"]
        if any(f.severity == "error" and f.category == entry["category"] for f in findings):
            return None
        tail_n = int(spec["tail"])
        early = median([r[1] for r in self.head[:max(2, self.count // 4)]])
        tail = recs[-tail_n:]
        tail_kl = min(r[1] for r in tail)
        kl_min = _threshold(spec, tail_kl, early)
        if kl_min is None:
            return None
        stds = [r[3] for r in tail]
        tail_rewards = [r[2] for r in tail if r[2] is not None]
        same = all(s is not None and abs(s) <= float(spec["zero_std"]) for s in stds)
        peak = self.peak
        fell = (peak is not None and peak > 0 and len(tail_rewards) == tail_n
                and sum(tail_rewards) / tail_n <= float(spec["reward_drop"]) * peak)
        if not (same or fell):
            return None
        onset = len(recs) - 1
        while onset > 0 and recs[onset - 1][1] >= kl_min:
            onset -= 1
        text = detector_text(entry, self.lang)
        values = {"kl_early": fmt(early), "kl_last": fmt(recs[-1][1]), "kl_min": fmt(kl_min),
                  "since": str(recs[onset][0]), "records": str(len(recs) - onset),   # (within the kept tail)
                  "peak": fmt(peak) if fell else None, "reward_last": fmt(tail_rewards[-1]) if fell and tail_rewards else None,
                  "std_zero": "0" if same else None}
        return detector_finding(entry, text, values, line=recs[onset][0], last_line=recs[-1][0],
                                count=len(recs) - onset, default_priority=50,
                                captures={k: v for k, v in values.items() if v is not None})
