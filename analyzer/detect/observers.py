"""Block observers the API gives the engine (`llmtriage.get_engine`): metric detectors, phase and
step, thread dumps, and the verdict.

Each factory takes the Scan (engine/scan.py: `lang`, `ruleset`, `exceptions`) and returns an object
with `feed(lines, view, line_base)` (once per ~64 KiB block) and `finish(report, findings)`; the
verdict's `finish` returns the judged findings, which replace the list (it runs last).

Importing this module costs nothing measurable: `metrics`, `throughput` and `phase` are imported when
the first observer is made, and their patterns are compiled on the first block they see.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from llmtriage.detect.scanner import Scanner
from llmtriage.detect.verdict import judge
from llmtriage.ruleset.datafiles import use_data


class TrainingObserver:
    """Metric series, step time / GPU use, anomaly findings, phase and last step, in one observer (one
    pass, shared state)."""

    def __init__(self, engine: Any = None):
        from llmtriage.detect.metrics import MetricTracker   # deferred: each detector loads when a scan first asks for it
        from llmtriage.detect.phase import PhaseTracker   # deferred: as above
        from llmtriage.detect.throughput import ThroughputTracker   # deferred: as above
        from llmtriage.detect.xla_compile import XlaCompileTracker   # deferred: as above
        from llmtriage.detect.step_breakdown import StepBreakdownTracker   # deferred: as above
        from llmtriage.detect.comm_share import CommShareTracker   # deferred: as above
        from llmtriage.detect.step_waits import StepWaitTracker   # deferred: as above
        from llmtriage.detect.throughput_scaling import ScalingTracker   # deferred: as above
        from llmtriage.detect.mfu import MfuTracker   # deferred: as above
        from llmtriage.detect.metric_resume import ResumeMarks   # deferred: as above
        from llmtriage.detect.metric_eval_summary import EvalSummaries   # deferred: as above
        from llmtriage.detect.alloc_retries import AllocRetries   # deferred: as above
        from llmtriage.detect.bar_decay import BarRates   # deferred: as above
        from llmtriage.detect.caught_repeat import CaughtExceptions   # deferred: as above
        from llmtriage.detect.throughput_stated import StatedSpeeds   # deferred: as above
        from llmtriage.detect.decode_bound import DecodeBound   # deferred: as above

        self.lang = getattr(engine, "lang", None)
        self.metrics = MetricTracker()
        self.phase = PhaseTracker()
        self.throughput = ThroughputTracker()
        self.xla = XlaCompileTracker()
        self.breakdown = StepBreakdownTracker()
        self.comm = CommShareTracker()
        self.waits = StepWaitTracker()
        self.scaling = ScalingTracker()
        self.mfu = MfuTracker()
        self.resumes = ResumeMarks()
        self.eval_summaries = EvalSummaries()
        self.alloc_retries = AllocRetries()
        self.bar_rates = BarRates()
        self.caught = CaughtExceptions()
        self.stated = StatedSpeeds()
        self.bound = DecodeBound()
        self._ends_nl = True
        from llmtriage.detect.head_cues import HeadCues   # deferred: as above
        self.head = HeadCues()
        self._feed_metrics = self.metrics.feed_block
        self._feed_phase = self.phase.feed

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        self._ends_nl = lines.endswith(b"\n")
        self._feed_metrics(lines, view, line_base)
        self._feed_phase(lines, view, line_base)
        self.throughput.feed(lines, view, line_base)
        self.xla.feed(lines, line_base)
        self.breakdown.feed(lines, line_base)
        self.comm.feed(lines, line_base)
        self.waits.feed(lines, line_base)
        self.scaling.feed(lines, line_base)
        self.mfu.feed(lines, line_base)
        self.resumes.feed(lines, line_base)
        self.eval_summaries.feed(lines, line_base)
        self.alloc_retries.feed(lines, line_base)
        self.bar_rates.feed(lines, line_base)
        self.caught.feed(lines, line_base)
        self.stated.feed(lines, line_base)
        self.bound.feed(lines, line_base)
        self.head.feed(view, line_base)

    def finish(self, report: Any, findings: list[Any]) -> None:
        from llmtriage.detect.metric_detect import detect   # deferred: only when metrics were seen
        from llmtriage.detect.metric_findings import to_findings   # deferred: as above
        from llmtriage.detect.metric_lr import lr_dead   # deferred: as above
        from llmtriage.detect.metric_lr_tiny import lr_tiny   # deferred: as above
        from llmtriage.detect.metric_flat_exact import exact_flat   # deferred: as above
        from llmtriage.detect.metric_epoch_repeat import epoch_repeat   # deferred: as above
        from llmtriage.detect.metric_task import task_worsens   # deferred: as above
        from llmtriage.detect.metric_drift import first_update_jump, grad_climb, grad_runaway   # deferred: as above
        from llmtriage.detect.metric_zero import exact_zero   # deferred: as above
        from llmtriage.detect.metric_guard import guard_skips   # deferred: as above
        from llmtriage.detect.metric_val_leak import validation_perfect   # deferred: as above
        from llmtriage.detect.metric_creep import graded_creep, loss_creep, pass_creep   # deferred: as above
        from llmtriage.detect.metric_gap import train_eval_gap   # deferred: as above
        from llmtriage.detect.metric_overfit import eval_rising   # deferred: as above
        from llmtriage.detect.metric_chance import eval_at_chance   # deferred: as above
        from llmtriage.detect.metric_resume import resume_drop, resume_reset, resumed_low_start   # deferred: as above
        from llmtriage.detect.metric_eval_summary import eval_perfect_early, eval_summary_frozen   # deferred: as above
        from llmtriage.detect.throughput_starved import starved_gpus   # deferred: as above
        from llmtriage.detect.alloc_retries import alloc_thrash   # deferred: as above
        from llmtriage.detect.bar_decay import bar_decay   # deferred: as above
        from llmtriage.detect.untrained import untrained_start   # deferred: as above
        from llmtriage.detect.loss_above_uniform import loss_above_uniform   # deferred: as above
        from llmtriage.detect.metric_uniform import loss_at_uniform   # deferred: as above
        from llmtriage.detect.world_shortfall import world_shortfall   # deferred: as above
        from llmtriage.detect.metric_epoch_base import ordinal_epochs   # deferred: as above

        # deferred line numbers of the last block: the line after it
        end = report.lines + (1 if self._ends_nl else 0)
        self.metrics.flush(end)
        self.phase.flush(end)
        ordinal_epochs(self.metrics.records())     # 1-based epoch labels read as epochs completed
        anomalies = detect(self.metrics)
        resumed_low_start(self.resumes.lines, anomalies)
        exact_flat(self.metrics, anomalies)
        exact_zero(self.metrics, anomalies)
        task_worsens(self.metrics, anomalies)
        anomalies += epoch_repeat(self.metrics, anomalies)
        anomalies += lr_dead(self.metrics, anomalies)
        anomalies += lr_tiny(self.metrics, anomalies)
        anomalies += grad_climb(self.metrics, anomalies)
        anomalies += grad_runaway(self.metrics, anomalies)
        anomalies += first_update_jump(self.metrics, anomalies)
        anomalies += guard_skips(self.metrics, anomalies)
        anomalies += validation_perfect(self.metrics, anomalies)
        anomalies += loss_creep(self.metrics, anomalies)
        anomalies += graded_creep(self.metrics, anomalies)
        anomalies += pass_creep(self.metrics, anomalies)
        anomalies += train_eval_gap(self.metrics, anomalies)
        anomalies += eval_rising(self.metrics, anomalies)
        anomalies += eval_at_chance(self.metrics, anomalies)
        anomalies += resume_drop(self.metrics, self.resumes.lines, anomalies)
        anomalies += resume_reset(self.metrics, self.resumes.lines, anomalies)
        anomalies += eval_summary_frozen(self.eval_summaries, self.metrics.records(), anomalies)
        anomalies += eval_perfect_early(self.eval_summaries, self.metrics.records(), anomalies)
        recs = self.metrics.head
        anomalies += self.throughput.detect(recs[0].line if recs else None)
        from llmtriage.detect.decode_bound import decode_bound   # deferred: as above
        decode_bound(self.bound, self.throughput.decode, self.throughput.decode_lines, anomalies)
        anomalies += starved_gpus(self.throughput, self.metrics.records(), anomalies)
        anomalies += alloc_thrash(self.alloc_retries, anomalies)
        anomalies += bar_decay(self.bar_rates, anomalies)
        anomalies += self.xla.detect()
        anomalies += self.breakdown.detect()
        if not any(a.category == "throughput-low" and a.severity == "error" for a in anomalies):
            anomalies += self.comm.detect()   # (a slowdown already named says it)
        if not any(a.category == "throughput-low" and a.severity == "error" for a in anomalies):
            anomalies += self.waits.detect(recs[0].line if recs else None)   # (a slowdown already named says it)
        if not any(a.category == "throughput-low" and a.severity == "error" for a in anomalies):
            anomalies += self.scaling.detect()
        if not any(a.category == "throughput-low" and a.severity == "error" for a in anomalies):
            anomalies += self.mfu.detect()
        if not any(a.category == "throughput-low" and a.severity == "error" for a in anomalies):
            anomalies += self.stated.detect()
        if not any(f.severity == "error" for f in findings):
            from llmtriage.detect.caught_repeat import caught_repeats   # deferred: as above
            anomalies += caught_repeats(self.caught, self.metrics.records(), anomalies)
        findings.extend(to_findings(anomalies, findings, self.lang))
        from llmtriage.detect.new_keys_trained import new_keys_trained   # deferred: as above
        new_keys_trained(findings, self.metrics.records(), self.head.number("vocab"), self.lang)
        from llmtriage.detect.scaler_settled import scaler_settled   # deferred: as above
        scaler_settled(findings, self.metrics.ds_trace, self.metrics.ds_skips, self.lang)
        # start-up cues (detect/head_cues.py), each only when no error finding (an earlier one's included) explains the run
        records = self.metrics.records()
        for judge_head in (lambda: untrained_start(self.head, records, findings, self.lang),
                           lambda: loss_above_uniform(self.head, records, findings, self.lang),
                           lambda: loss_at_uniform(self.head, records, findings, self.lang),
                           lambda: world_shortfall(self.head, findings, self.lang)):
            found = judge_head()
            if found is not None:
                findings.append(found)
        self.phase.finish(report, findings, self.metrics.last_step, self.metrics.records())
        if self.metrics.count or self.metrics.overflows:
            report.extra["metrics"] = self.metrics.summary()
        speed = self.throughput.summary()
        if speed:
            report.extra["throughput"] = speed


def thread_dumps(engine: Any = None) -> Any:
    """faulthandler / py-spy thread dumps: the frame the main thread was stuck in (analyzer/stalls.py)."""
    from llmtriage.detect.threaddump import ThreadDumpObserver   # deferred: each detector loads when a scan first asks for it

    return ThreadDumpObserver(engine)


def rl_divergence(engine: Any = None) -> Any:
    """RL records whose KL to the reference ran away while the rewards collapsed (detect/rl_divergence.py)."""
    from llmtriage.detect.rl_divergence import RlKlTracker   # deferred: each detector loads when a scan first asks for it

    return RlKlTracker(engine)


def rl_logprob_gap(engine: Any = None) -> Any:
    """RL records whose rollout engine's log-probs stay far from the trainer's (detect/rl_logprob_gap.py)."""
    from llmtriage.detect.rl_logprob_gap import RlLogprobGapTracker   # deferred: loads when a scan first asks for it

    return RlLogprobGapTracker(engine)


def rl_grad_blowup(engine: Any = None) -> Any:
    """RL records whose gradient norm exploded once and whose reward stayed down after (detect/rl_grad_blowup.py)."""
    from llmtriage.detect.rl_grad_blowup import RlGradBlowupTracker   # deferred: loads when a scan first asks for it

    return RlGradBlowupTracker(engine)


def rl_length_cap(engine: Any = None) -> Any:
    """RL records whose completions grew into the length cap while a reward fell (detect/rl_length_cap.py)."""
    from llmtriage.detect.rl_length_cap import RlLengthCapTracker   # deferred: loads when a scan first asks for it

    return RlLengthCapTracker(engine)


def rl_reward_trend(engine: Any = None) -> Any:
    """RL records whose reward never rose while the KL grew, or whose accuracy reward hit 1 as the completions
    shrank (detect/rl_reward_trend.py)."""
    from llmtriage.detect.rl_reward_trend import RlRewardTrendTracker   # deferred: loads when a scan first asks for it

    return RlRewardTrendTracker(engine)


def rl_rollout_garbage(engine: Any = None) -> Any:
    """RL records whose rollouts all hit the length cap with ~0 reward from one step to the next
    (detect/rl_rollout_garbage.py)."""
    from llmtriage.detect.rl_rollout_garbage import RlRolloutGarbageTracker   # deferred: loads when first asked for

    return RlRolloutGarbageTracker(engine)


def eval_no_metrics(engine: Any = None) -> Any:
    """HF Trainer evaluations that printed only their runtime, never a loss or a metric (detect/eval_no_metrics.py)."""
    from llmtriage.detect.eval_no_metrics import EvalNoMetricsTracker   # deferred: loads when a scan first asks for it

    return EvalNoMetricsTracker(engine)


def head_reload(engine: Any = None) -> Any:
    """A task head "newly initialized" again when the model is reloaded after training, then scores far below the
    training-time evaluation (detect/head_reload.py)."""
    from llmtriage.detect.head_reload import HeadReloadTracker   # deferred: loads when a scan first asks for it

    return HeadReloadTracker(engine)


def version_watch(engine: Any = None) -> Any:
    """Package versions the log prints (pip show / list, banners, pins), read after the verdict by
    detect/version_gate.py: a failure only an outdated release raises, or an unexplained error in the code
    of two packages shown at releases that do not work together, is a version mismatch."""
    from llmtriage.detect.version_gate import VersionWatch   # deferred: loads when a scan first asks for it

    return VersionWatch(engine)


def decode_speed_gap(engine: Any = None) -> Any:
    """Benchmark runs of one log where the run that warned of a slow fallback kernel generates far slower than a
    sibling run (detect/decode_speed_gap.py)."""
    from llmtriage.detect.decode_speed_gap import DecodeSpeedGapTracker   # deferred: loads when a scan first asks for it

    return DecodeSpeedGapTracker(engine)


class VerdictObserver:
    """Status evidence block by block (verdict.Scanner); at the end the verdict (verdict.judge): status,
    survived signatures, the unknown finding, ranking and actions."""

    def __init__(self, scan: Any):
        self.scan = scan
        use_data(getattr(scan.ruleset, "data", None) or {})
        self.scanner = Scanner()
        self.feed = self.scanner.feed

    def finish(self, report: Any, findings: list[Any]) -> Optional[list[Any]]:
        scan = self.scan
        metrics = next((o.metrics for o in scan.observers if isinstance(o, TrainingObserver)), None)
        judged = judge(report, findings, scan.exceptions, report.exception, self.scanner, scan.lang, scan.ruleset.by_id,
                       getattr(scan.ruleset, "taxonomy", None), scan.engine, metrics)
        # installed versions the log printed that make a judged failure a version mismatch (detect/version_gate.py)
        watch = next((o for o in scan.observers if getattr(o, "is_version_watch", False)), None)
        if watch is not None:
            watch.apply(judged, scan.exceptions, scan.lang)
        return judged


# (rl_rollout_garbage before rl_length_cap: a collapse from one record to the next is a broken weight sync; the
# length-cap reading, which steps aside when an error is found already, is for completions that grew into the cap)
FACTORIES: list[Callable[[Any], Any]] = [TrainingObserver, thread_dumps, rl_divergence, rl_logprob_gap,
                                         rl_grad_blowup, rl_rollout_garbage, rl_length_cap, rl_reward_trend, eval_no_metrics,
                                         decode_speed_gap, head_reload, version_watch]
"""Observers run before the verdict; `VerdictObserver` always comes last (see llmtriage.get_engine)."""
