"""throughput-low, the judgement: what a ThroughputTracker (throughput.py) read, turned into one finding.

Split from throughput.py (which reads the lines); the detections and their severity are described there and in
docs/METRICS.md ("When a slowdown is an error"). `self` is the tracker: its series, snapshots and context.
"""
from __future__ import annotations

from typing import Any, Optional

from llmtriage.detect.metric_anomaly import Anomaly, fmt, median as _median
from llmtriage.detect.throughput_util import periodic, underused, util_bound
from llmtriage.detect.throughput_sources import Series, climb, short_rise
from llmtriage.detect.throughput_columns import early_drop


def judge(self: Any, train_start: Optional[int]) -> list[Anomaly]:
    """The throughput finding of a tracker (ThroughputTracker.detect): see throughput.py's docstring."""
    th = self.th
    nums: dict[str, Any] = {}
    first_line = last_line = 0
    strong = False
    # the main step-time series: the source with most samples
    src, series = max(self.steps.items(), key=lambda kv: kv[1].n, default=("", None))
    if series is None and self.stop is not None and self.gen_open:
        # no training steps: a generation run (vLLM's `Processed prompts` bar) stopped from outside before it
        # finished, its time per prompt read as the step time (a bar that finishes slows down at its long tail)
        src, series = "bar-gen", self.gen_bar
    rate = src == "rate"    # read as a rate (samples or tokens per second): shown as one, not as seconds
    if series is not None and (series.n >= th.rise_min_samples or short_rise(series.values(), th.rise_error)):
        vals = series.values()
        k = max(4, len(vals) // 4)
        early, late = [v for _, v in vals[:k]], [v for _, v in vals[-k:]]
        e, lt = _median(early), _median(late)
        e = (early_drop(vals, th.rise_factor) if not src.startswith("bar") else None) or e   # slower from an early step on
        if e > 0 and lt > th.rise_factor * e and vals[-k][0] >= vals[k - 1][0]:   # (\r redraws share a line)
            # still slowing as the log ends (the late quarter's second half slower than its
            # first): its median understates where the run is now, the last third of it tells
            h = k // 2
            now = _median(late[-max(3, k // 3):])
            if _median(late[h:]) > _median(late[:h]) and now > lt:
                lt = now
            if rate:
                nums.update(rate_from=fmt(1 / e), rate_to=fmt(1 / lt), rise=f"{lt / e:.1f}")
            else:
                pre = "gen_" if src == "bar-gen" else ""
                nums.update({pre + "early": fmt(e), pre + "late": fmt(lt), "rise": f"{lt / e:.1f}"})
            first_line, last_line = vals[-k][0], vals[-1][0]
            # or a timer (not a tqdm rate, smoothed: any step change decays into a monotone run) slower at
            # nearly every sample to the end (a leak, a loader re-reading a growing file): no plateau
            ups = [b > a for (_, a), (_, b) in zip(vals, vals[1:])] if not src.startswith("bar") else []
            strong = lt >= th.rise_error * e or (len(ups) >= 8 and sum(ups) >= 0.8 * len(ups) and all(ups[-3:]))
            if self.reruns:
                nums["runs"] = str(self.reruns + 1)
        cl = None if rate or "rise" in nums else climb(vals, th.climb_factor)
        if cl is not None:
            i, j, med = cl
            nums.update(climb_from=fmt(vals[i][1]), climb_to=fmt(vals[j][1]), climb_n=j - i + 1,
                        climb=f"{vals[j][1] / med:.1f}")
            first_line, last_line = vals[i][0], vals[j][0]
            # still climbing at the last record: the run is degrading as the log ends
            strong = j == len(vals) - 1 and vals[j][1] >= th.rise_error * med
        per = periodic(vals, self.saves, self.th)
        if per is not None:
            if rate:
                nums.update(period=per[0], rate_low=fmt(1 / per[1]), rate_med=fmt(1 / per[2]), pipeline=True)
            else:
                nums.update(period=per[0], long=fmt(per[1]), median=fmt(per[2]), pipeline=True)
            first_line = first_line or vals[0][0]
            last_line = last_line or vals[-1][0]
            # the stalls take as long as all the steps between them (the bar of checkpoint saves, save_error)
            strong = strong or per[1] >= th.save_error * (per[1] + (per[0] - 1) * per[2])
    # nvidia-smi snapshots taken while training ran (after its first record or step sample, before it finished)
    train_start = train_start if train_start is not None else min((s.head[0][0] for s in self.steps.values() if s.head), default=None)
    snaps = [s for s in self.snaps if s and train_start is not None and s[0][3] > train_start
             and not (self.finished_line and s[0][3] > self.finished_line)]
    def n_idle(s: list[tuple[int, Optional[int], Optional[int], int]]) -> int:
        return sum(1 for r in s if r[0] <= th.idle_util)

    idle = [s for s in snaps if n_idle(s) >= th.idle_gpus * len(s)]
    if snaps and len(idle) * 2 >= len(snaps):
        worst = max(idle, key=n_idle)
        nums.update(idle=len(idle), snaps=len(snaps), idle_gpus=f"{n_idle(worst)}/{len(worst)}",
                    idle_util=f"{th.idle_util:g}")
        first_line = first_line or idle[0][0][3]
        last_line = max(last_line, idle[-1][-1][3])
    elif low := underused(snaps, th, sum(1 for ln, _ in (series.values() if series else []) if snaps and ln < snaps[-1][0][3])):
        # every GPU busy only a small share of the time, snapshot after snapshot: starved, not idle
        nums.update(low=len(low), snaps=len(snaps), low_util=f"{util_bound(low, th):g}")
        first_line = first_line or low[0][0][3]
        last_line = max(last_line, low[-1][-1][3])
    elif idle and len(snaps) >= 3 and len(idle) * 5 >= len(snaps):
        # busy snapshots with idle ones in between: utilisation drops to 0% periodically (input pipeline);
        # one dip among many busy readings (`-l 1` sampling a step boundary) is not a pattern
        nums.update(pipeline=True, idle_some=len(idle), snaps=len(snaps))
    full = [s for s in snaps if all(r[2] for r in s)]
    if full and all(r[1] < th.mem_low * r[2] and r[0] < 90 for s in full for r in s):   # type: ignore[operator]
        used = max(r[1] for s in full for r in s)
        total = max(r[2] for s in full for r in s)   # type: ignore[type-var]
        nums.update(mem_pct=f"{100 * used / total:.0f}", mem_total=total)
        first_line = first_line or full[0][0][3]
    # checkpoint saves whose time is a large share of the whole run's (verl's timing_s/save_checkpoint): each save
    # step is slow by design, but together they can make the run several times slower than its training steps
    saved, total, s_first, s_last = self.save_time
    if total > 0 and saved >= th.save_share * total:
        nums.update(save_pct=f"{100 * saved / total:.0f}", save_s=f"{saved:.0f}", total_s=f"{total:.0f}")
        first_line, last_line = first_line or s_first, max(last_line, s_last)
        strong = strong or saved >= th.save_error * total
    gen_pct = gen_share(self, series)
    if gen_pct is not None:
        nums.update(gen_pct=f"{100 * gen_pct[0]:.0f}", gen=fmt(gen_pct[1]), step=fmt(gen_pct[2]))
    if self.decode:
        d = _median([x for x, _ in self.decode])
        if d < th.decode_min:
            nums.update(decode=fmt(d), reqs=max(r for _, r in self.decode))
        if len(self.decode) >= th.rise_min_samples:
            # decoding per running request fell and stayed down (KV-cache pressure, retraction, swapping), and the
            # engine's total rate with it: batching more requests divides each one's rate, not the engine's
            rates, tot = [x for x, _ in self.decode], [x * n for x, n in self.decode]
            e, lt = _median(rates[:(k := max(4, len(rates) // 4))]), _median(rates[-k:])
            if lt > 0 and e > th.rise_factor * lt and _median(tot[-k:]) < _median(tot[:k]):
                nums.update(decode_from=fmt(e), decode_to=fmt(lt), drop=f"{e / lt:.1f}")
                strong = strong or e >= th.rise_error * lt
        if "decode" in nums or "drop" in nums:     # the decode lines are the evidence
            first_line = first_line or self.decode_lines[0]
            last_line = max(last_line, self.decode_lines[1])
    if st := self.serve.detect():      # a server stalled or collapsed with requests waiting
        nums.update(st[0])
        first_line, last_line, strong = first_line or st[1], max(last_line, st[2]), strong or st[3]
    if not nums:
        return []
    if self.eager:
        nums["eager"] = True
    idle_err = "idle" in nums or "low" in nums
    # decoding slower than any GPU or NPU decodes an LLM, read more than once: the service is unusable
    # (0 tokens/s with requests running is a stall, not slowness: what hung the engine is the cause)
    crawl = "decode" in nums and len(self.decode) >= 2 and 0 < _median([x for x, _ in self.decode]) < th.decode_error
    if self.stop is not None:
        nums["stop"] = self.stop[0]
        last_line = max(last_line, self.stop[1])
    if self.gen:
        nums["rollout"] = True      # the run generates rollouts: idle GPUs wait for generation
        nums.pop("pipeline", None)
    elif idle_err:
        nums["pipeline"] = True
    # a slowdown by rise_factor that a second, independent reading confirms (GPUs idle in some snapshots, or
    # periodic long steps: the input pipeline stalls) is as strong as one by rise_error
    strong = strong or ("rise" in nums and ("idle_some" in nums or "period" in nums))
    # a strong slowdown in a run that did not finish: the job is degrading as the log ends
    sev = "error" if (idle_err or crawl or self.stop is not None or (strong and not self.finished_line)) else "warning"
    line = first_line or last_line or self.last_entry_line or 1    # (a generation share has no line of its own)
    # stopped from outside while slow: the slowdown explains why the time ran out, so it ranks above
    # the scheduler's cancellation (priority 22) but below signature causes
    prio = 40 if self.stop is not None else None
    return [Anomaly("throughput", "throughput-low", sev, line, max(line, last_line), None, 1, nums, prio)]

def gen_share(self: Any, series: Optional[Series]) -> Optional[tuple[float, float, float]]:
    if self.gen_step:
        g, s = _median(list(self.gen)[-len(self.gen_step):]), _median(list(self.gen_step))
    elif self.gen and series is not None and series.n:
        g, s = _median(self.gen), _median([v for _, v in series.values()])
    else:
        return None
    if s <= 0 or not self.th.gen_share <= g / s <= 1.5:   # (far longer than a step: a phase's total, not a step's share)
        return None
    return min(g / s, 1.0), g, s
