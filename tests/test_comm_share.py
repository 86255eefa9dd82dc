"""metric-allreduce-dominates-step (analyzer/detect/comm_share.py): DeepSpeed wall-clock breakdowns whose gradient
all-reduce takes most of each step, against breakdowns of a compute-bound run."""
from llmtriage import analyze
from llmtriage.detect.comm_share import CommShareTracker

MICRO = ("[2023-10-09 14:24:10,975] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: {f} | "
         "bwd_microstep: {b} | bwd_inner_microstep: {i} | bwd_allreduce_microstep: {a} | step_microstep: {s}\n")
OLD = ("[Rank 0] rank=0 time (ms) | forward: {f} | backward: {b} | backward_inner: {i} | backward_allreduce: {a} | "
       "step: {s}\n")
LOSS = "iteration {n:6d}/ 50000 | loss {l:.4f} | elapsed time per iteration (s): 30.40\n"


def _track(text):
    t = CommShareTracker()
    t.feed(text.encode(), 1)
    return t.detect()


def test_an_all_reduce_taking_most_of_each_step_is_a_network_bound_run():
    rows = "".join(MICRO.format(f=2200.0, b=26900.0 + 10 * n, i=2400.0, a=24500.0 + 10 * n, s=650.0) for n in range(6))
    [a] = _track(rows)
    assert a.kind == "comm_bound" and a.category == "throughput-low" and a.severity == "error"
    assert 80 <= int(a.numbers["comm_pct"]) <= 85 and a.numbers["breakdowns"] == 5
    # older spelling, per optimizer step; timers that do not nest (all-reduce beside a short backward) count once
    rows = "".join(OLD.format(f=400.0, b=700.0, i=500.0, a=2500.0, s=20.0) for _ in range(5))
    [a] = _track(rows)
    assert int(a.numbers["comm_pct"]) >= 70


def test_a_compute_bound_or_tiny_breakdown_is_left_alone():
    assert _track("".join(MICRO.format(f=2200.0, b=4400.0, i=3600.0, a=800.0, s=650.0) for _ in range(8))) == []
    assert _track("".join(MICRO.format(f=0.5, b=0.9, i=0.2, a=0.7, s=0.1) for _ in range(8))) == []    # ms-scale toy run
    assert _track("".join(MICRO.format(f=2200.0, b=26900.0, i=2400.0, a=24500.0, s=650.0) for _ in range(3))) == []


def test_the_finding_names_the_run_slow_in_a_full_log():
    log = "".join(MICRO.format(f=2200.0, b=26900.0, i=2400.0, a=24500.0, s=650.0) + LOSS.format(n=10 * (n + 1), l=6.0 - 0.1 * n)
                  for n in range(8))
    rep = analyze(log)
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.rule_id == "metric-allreduce-dominates-step" and top.category == "throughput-low"
