"""A progress bar that ran about as long as the collective timeout just above it (analyzer/detect/bar_timeout.py,
rules/verdict.yaml `bar_outlasts_timeout`, actions.yaml `collective-timeout-behind-a-long-progress-bar`)."""
from llmtriage import analyze

TIMEOUT = ("(ActorModelRayActor pid=118637) [rank4]:[E408 12:13:02.540812611 ProcessGroupNCCL.cpp:616] [Rank 4] Watchdog "
           "caught collective operation timeout: WorkNCCL(SeqNum=9612, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
           "Timeout(ms)=1800000) ran for 1800072 milliseconds before timing out.\n")
BAR = ("(LLMRayActor pid=188559) Processed prompts:  94%|█████████▍| 30/32 [{elapsed}<04:10, 125.50s/it, "
       "est. speed input: 18.22 toks/s, output: 189.07 toks/s]\n")


def _top(text):
    rep = analyze(text)
    return next(f for f in rep.findings if f.severity == "error"), rep


def test_a_generation_bar_as_long_as_the_timeout_makes_the_timeout_a_fix():
    top, rep = _top(BAR.format(elapsed="28:41") + TIMEOUT)
    assert top.category == "nccl-timeout" and top.action == "fix", top.action_reason
    assert "progress bar" in top.action_reason


def test_a_short_bar_leaves_the_timeout_alone():
    top, rep = _top(BAR.format(elapsed="03:12") + TIMEOUT)
    assert top.category == "nccl-timeout" and "progress bar" not in top.action_reason


def test_a_bar_far_longer_than_the_timeout_is_the_trainers_own_and_leaves_it_alone():
    top, rep = _top(BAR.format(elapsed="5:41:20") + TIMEOUT)
    assert top.category == "nccl-timeout" and "progress bar" not in top.action_reason
