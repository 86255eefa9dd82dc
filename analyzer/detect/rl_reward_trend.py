"""RL runs whose reward series says the training did not do what it should (silent failures, judged at the end).

Two readings of GRPO/PPO records (TRL / ms-swift dicts: `reward`, `reward_std`, `kl`, `completion_length`,
`rewards/<name>`):

- `rl_reward_stalled` (no-grad): the KL to the reference grows many times over, so the policy's weights move, but the
  mean reward does not rise by even a small share of its spread within the groups over the whole, finished run (the
  Trainer printed its `train_runtime` summary: a run still going may turn around later), and it is not held at a
  ceiling (a best value that recurs: every completion already scores the maximum). The updates do not reach the model
  that generates (an adapter never synced to the rollout engine), or the rewards do not depend on what is learned.
- `rl_reward_hacked` (loss-suspicious): an accuracy reward climbs from at most `acc_early_max` to exactly its maximum 1
  while the completions shrink to at most `len_share` of their early length: the policy found a short answer the
  checker accepts (listing every class, an empty chain of thought), not the skill.

Thresholds: rules/verdict.yaml `rl_reward_stalled` / `rl_reward_hacked`; texts: rules/detectors.yaml. Only when no
error finding is there already.
"""
from __future__ import annotations

import re
from collections import deque
from typing import Any, Optional

from llmtriage.detect.metric_anomaly import fmt, median
from llmtriage.detect.metric_findings import detector_finding, detector_text, detector_texts
from llmtriage.detect.rl_divergence import NUMBER, EndJudged, finite_number
from llmtriage.detect.spec import verdict_spec
from llmtriage.findings import Finding

_KEEP = 1024    # records kept at each end of the run

_SEP = rb"""['"]\s*:\s*"""
_KL = re.compile(rb"""['"]kl""" + _SEP + NUMBER)
_REWARD = re.compile(rb"""['"]reward""" + _SEP + NUMBER)
_STD = re.compile(rb"""['"]reward_std""" + _SEP + NUMBER)
_LEN = re.compile(rb"""['"](?:completion_length|completions/mean_length)""" + _SEP + NUMBER)
_ACC = re.compile(rb"""['"]rewards/[\w.-]*acc[\w.-]*(?:/mean)?""" + _SEP + NUMBER)

Rec = tuple[int, float, float, Optional[float], Optional[float], Optional[float]]   # line, reward, kl, std, length, acc


class RlRewardTrendTracker(EndJudged):
    """Collects (line, reward, kl, reward_std, completion length, accuracy reward) per TRL-style RL record."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.head: list[Rec] = []
        self.tail: deque[Rec] = deque(maxlen=_KEEP)
        self.count = 0
        self.finished = False   # the Trainer's end-of-run summary (`train_runtime`) was printed

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if b"train_runtime" in view:
            self.finished = True
        if b"reward" not in view or (b"'kl'" not in view and b'"kl"' not in view):
            return
        for i, line in enumerate(view.split(b"\n")):
            if b"reward" not in line:
                continue
            kl, reward = finite_number(_KL.search(line)), finite_number(_REWARD.search(line))
            if kl is None or reward is None:
                continue
            rec = (line_base + i, reward, kl, finite_number(_STD.search(line)), finite_number(_LEN.search(line)),
                   finite_number(_ACC.search(line)) if b"acc" in line else None)
            self.count += 1
            (self.head if len(self.head) < _KEEP else self.tail).append(rec)

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        if any(f.severity == "error" for f in findings):
            return None
        recs = self.head + list(self.tail)
        return self._stalled(recs) or self._hacked(recs)

    def _stalled(self, recs: list[Rec]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_reward_stalled")
        if not spec or not self.finished or len(recs) < int(spec["min_records"]):
            return None     # (a run still going may not have turned its rewards around yet)
        q = max(3, len(recs) // 4)
        early, late = recs[:q], recs[-q:]
        kl_e, kl_l = median([r[2] for r in early]), median([r[2] for r in late])
        if kl_l < float(spec["kl_min"]) or kl_l < float(spec["kl_rise"]) * max(kl_e, 0.0):
            return None
        stds = [r[3] for r in early if r[3] is not None]
        if len(stds) < q or median(stds) <= 0:
            return None     # no spread in the groups: metric-rl-rewards-no-spread reads it
        sd = median(stds)
        rw_e, rw_l = median([r[1] for r in early]), median([r[1] for r in late])
        if rw_l - rw_e > float(spec["gain"]) * sd:
            return None
        top = max(r[1] for r in recs)
        if sum(r[1] == top for r in recs) >= max(2, int(float(spec["ceiling_share"]) * len(recs))):
            return None     # held at its best value: every completion already scores the most it can
        entry = detector_texts()["rl_reward_stalled"]
        values = {"records": str(len(recs)), "kl_early": fmt(kl_e), "kl_late": fmt(kl_l), "reward_early": fmt(rw_e),
                  "reward_late": fmt(rw_l), "reward_std": fmt(sd)}
        return detector_finding(entry, detector_text(entry, self.lang), values, line=recs[0][0], last_line=recs[-1][0],
                                count=len(recs), default_priority=46, captures=values)

    def _hacked(self, recs: list[Rec]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_reward_hacked")
        if not spec or len(recs) < int(spec["min_records"]) or any(r[4] is None or r[5] is None for r in recs):
            return None
        q = max(3, len(recs) // 4)
        acc_e, acc_l = median([r[5] for r in recs[:q]]), median([r[5] for r in recs[-q:]])  # type: ignore[misc]
        len_e, len_l = median([r[4] for r in recs[:q]]), median([r[4] for r in recs[-q:]])  # type: ignore[misc]
        if acc_e > float(spec["acc_early_max"]) or acc_l < 1.0 or len_e <= 0 or len_l > float(spec["len_share"]) * len_e:
            return None
        first = next(r for r in recs if r[5] is not None and r[5] >= 1.0)
        entry = detector_texts()["rl_reward_hacked"]
        values = {"records": str(len(recs)), "acc_early": fmt(acc_e), "since": str(first[0]), "len_early": fmt(len_e),
                  "len_late": fmt(len_l), "share": str(round(100 * len_l / len_e))}
        return detector_finding(entry, detector_text(entry, self.lang), values, line=first[0], last_line=recs[-1][0],
                                count=len(recs), default_priority=46, captures=values)
