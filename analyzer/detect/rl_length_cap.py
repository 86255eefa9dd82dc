"""An RL run whose completions grew into the length cap while a reward collapsed (silent failure).

GRPO/PPO trainers log the mean completion length of each step (TRL and ms-swift: `completion_length` or
`completions/mean_length` with `completions/clipped_ratio`; verl: `response_length/mean` with
`response_length/clip_ratio`) next to the rewards (the total and each reward function's, TRL's
`rewards/<name>` or `rewards/<name>/mean`; verl's `critic/score/mean`). When the policy learns to write longer
and longer answers until nearly every completion is cut at `max_completion_length` / `max_response_length`,
the answers lose their ending (the closing tag, the boxed result): the format or accuracy reward falls toward 0
and the run goes on without an error, training on truncated samples.

Judged at the end: >= `min_records` records with a length; the last `tail` records pinned at the cap (a clip
ratio >= `clip_min`, or a mean length >= `len_share` x the configured cap), the first quarter well below it
(median fill <= `early_max`), and a reward series whose median over the last `tail` records is at most
(1 - `drop`) x its first-quarter median. A run truncated from its first step is another failure (the reward
has no spread: rule grpo-every-completion-truncated). Thresholds: rules/verdict.yaml `rl_length_cap`; texts:
rules/detectors.yaml `rl_length_cap`. Only when no error finding is there already.
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

_KEEP = 2048    # records kept at each end of the run (the first ones and the last ones)

_SEP = rb"""['"]?\s*[:=]\s*"""
_LEN = re.compile(rb"""(?<![\w/])['"]?(?:completion_length|completions/mean_length|response_length/mean)""" + _SEP + NUMBER)
_CLIP = re.compile(rb"""(?:completions/clipped_ratio|response_length/clip_ratio)""" + _SEP + NUMBER)
_REWARD = re.compile(rb"""(?<![\w/])['"]?(reward|critic/score/mean|rollout/raw_reward|rewards/[\w.-]+?(?:/mean)?)"""
                     + _SEP + NUMBER)
_CAP = re.compile(rb"""(?:max_completion_length|max_response_length|rollout_max_response_len)['"]?\s*[:=]\s*([0-9]+)\b""")


class RlLengthCapTracker(EndJudged):
    """Collects (line, mean length, clip ratio, rewards) per record carrying a completion length."""

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        self.head: list[tuple[int, float, Optional[float], dict[bytes, float]]] = []
        self.tail: deque[tuple[int, float, Optional[float], dict[bytes, float]]] = deque(maxlen=_KEEP)
        self.cap: Optional[int] = None

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        if self.cap is None and (b"max_completion_length" in view or b"max_response_length" in view
                                 or b"rollout_max_response_len" in view):
            m = _CAP.search(view)
            if m is not None and int(m.group(1)) > 0:
                self.cap = int(m.group(1))
        if (b"completion_length" not in view and b"completions/mean_length" not in view
                and b"response_length/mean" not in view):
            return
        for i, line in enumerate(view.split(b"\n")):
            n = finite_number(_LEN.search(line)) if b"length" in line else None
            if n is None:
                continue
            rewards = {}
            for m in _REWARD.finditer(line):
                v = finite_number(m, 2)
                if v is not None:
                    rewards.setdefault(m.group(1), v)
            rec = (line_base + i, n, finite_number(_CLIP.search(line)), rewards)
            (self.head if len(self.head) < _KEEP else self.tail).append(rec)

    def _fill(self, rec: tuple[int, float, Optional[float], dict[bytes, float]], spec: dict[str, Any]) -> Optional[float]:
        """How full the cap is, on the clip-ratio scale: the clip ratio, or the mean length's share of the cap
        mapped so that `len_share` of it reads as `clip_min`."""
        if rec[2] is not None:
            return rec[2]
        if self.cap:
            return rec[1] / self.cap * float(spec["clip_min"]) / float(spec["len_share"])
        return None

    def finding(self, findings: list[Finding]) -> Optional[Finding]:
        spec = verdict_spec().get("rl_length_cap")
        recs = self.head + list(self.tail)
        if not spec or len(recs) < int(spec["min_records"]) or any(f.severity == "error" for f in findings):
            return None
        tail_n, q = int(spec["tail"]), max(2, len(recs) // 4)
        fills = [self._fill(r, spec) for r in recs]
        tail, early = fills[-tail_n:], [f for f in fills[:q] if f is not None]
        if not early or any(f is None or f < float(spec["clip_min"]) for f in tail):
            return None
        if median(early) > float(spec["early_max"]):
            return None
        fell = None     # (name, early median, late median) of the reward that fell the most
        for name in {k for r in recs for k in r[3]}:
            head = [r[3][name] for r in recs[:q] if name in r[3]]
            late = [r[3][name] for r in recs[-tail_n:] if name in r[3]]
            if len(head) < 2 or len(late) < tail_n:
                continue
            e, lt = median(head), median(late)
            if e > 0 and lt <= (1.0 - float(spec["drop"])) * e and (fell is None or lt / e < fell[2] / fell[1]):
                fell = (name.decode(), e, lt)
        if fell is None:
            return None
        onset = len(recs) - 1
        while onset > 0 and (fills[onset - 1] or 0.0) >= float(spec["clip_min"]):
            onset -= 1
        entry = detector_texts()["rl_length_cap"]
        text = detector_text(entry, self.lang)
        clip = recs[-1][2]
        values = {"len_early": fmt(median([r[1] for r in recs[:q]])), "len_late": fmt(recs[-1][1]),
                  "cap": str(self.cap) if self.cap else None, "clip": fmt(clip) if clip is not None else None,
                  "since": str(recs[onset][0]), "reward": fell[0], "reward_early": fmt(fell[1]),
                  "reward_late": fmt(fell[2]), "records": str(len(recs) - onset)}
        return detector_finding(entry, text, values, line=recs[onset][0], last_line=recs[-1][0],
                                count=len(recs) - onset, default_priority=52,
                                captures={k: v for k, v in values.items() if v is not None})
