"""Category and action from what else the log holds: the c10d connect timeout beside an NCCL watchdog
timeout (analyzer/detect/beside.py, rules/verdict.yaml `category_beside`), and an IB port error from one
host or from several (marker `ib-port-error-many-hosts`, actions.yaml `ib-port-flap-across-nodes`)."""
from llmtriage import analyze

CONNECT = ("[E108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out after 900s while trying "
           "to connect to (33.145.124.128, 29500).\n"
           "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
           "(33.145.124.128, 29500).\n")
WATCHDOG = ("[rank3]:[E108 20:31:02.118 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=3856, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800268 "
            "milliseconds before timing out.\n")


def _top(text):
    rep = analyze(text)
    errors = [f for f in rep.findings if f.severity == "error"]
    return errors[0], rep


def test_a_connect_timeout_alone_is_a_rendezvous_failure():
    top, rep = _top(CONNECT)
    assert top.rule_id == "c10d-store-connect-timeout" and top.category == "nccl-error"
    assert rep.extra["action"] == "fix" and top.judgement is None


def test_a_connect_timeout_beside_a_watchdog_timeout_is_a_collective_timeout():
    top, rep = _top(WATCHDOG + CONNECT)
    assert top.category == "nccl-timeout", [(f.rule_id, f.category) for f in rep.findings]
    connect = next(f for f in rep.findings if f.rule_id == "c10d-store-connect-timeout")
    assert connect.category == "nccl-timeout" and connect.judgement["category_was"] == "nccl-error"


PORT = "{host}:3405{n}:3412{n} [{n}] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error\n"
COMPLETION = ("node-51:73076:73185 [4] transport/net_ib.cc:1238 NCCL WARN NET/IB : Got completion from peer "
              "node-48<37948> with error 12, opcode 2, len 1, vendor err 129\n")


def test_an_ib_port_error_on_one_node_replaces_that_node():
    log = "".join(PORT.format(host="node-48", n=n) for n in range(4)) + COMPLETION
    top, rep = _top(log)
    assert top.rule_id == "nccl-ib-fabric-error" and rep.extra["action"] == "replace-node"


def test_ib_port_errors_from_several_nodes_are_a_fabric_flap_to_retry():
    log = "".join(PORT.format(host=h, n=n) for n, h in enumerate(["node-48", "node-48", "node-51", "node-63"])) + COMPLETION
    top, rep = _top(log)
    assert top.rule_id == "nccl-ib-fabric-error" and rep.extra["action"] == "retry"
    assert "several nodes" in rep.extra["action_reason"]


OVERFLOW = "INFO     colossalai - colossalai - INFO: Found overflow. Skip step\n"
BAR = "Epoch 0:   0%|          | {n}/3235 [00:{n:02d}<4:53:24,  5.45s/it, loss=nan]\n"


def test_a_nan_loss_covered_by_overflow_skips_is_fp16_overflow():
    log = "".join(OVERFLOW + BAR.format(n=n) for n in range(1, 9))
    top, rep = _top(log)
    assert top.rule_id == "trainer-loss-nan" and top.category == "fp16-overflow", [(f.rule_id, f.category) for f in rep.findings]
    assert top.judgement["category_was"] == "nan-loss"


def test_a_nan_loss_long_after_one_calibration_overflow_stays_nan_loss():
    log = OVERFLOW + "".join(BAR.format(n=n) for n in range(1, 9))
    top, rep = _top(log)
    assert top.rule_id == "trainer-loss-nan" and top.category == "nan-loss", [(f.rule_id, f.category) for f in rep.findings]


PIP_NONE = ("$ pip install decord\n"
            "ERROR: Could not find a version that satisfies the requirement {pkg} (from versions: none)\n"
            "ERROR: No matching distribution found for {pkg}\n")
NO_MODULE = ("$ python sample_video.py\nTraceback (most recent call last):\n"
             "  File \"/w/video_reader.py\", line 5, in <module>\n    import decord\n"
             "ModuleNotFoundError: No module named 'decord'\n")


def test_pip_finding_no_wheel_for_the_package_the_run_misses_is_a_missing_package():
    top, rep = _top(PIP_NONE.format(pkg="decord") + NO_MODULE)
    assert top.category == "missing-dependency", [(f.rule_id, f.category) for f in rep.findings]
    pip = next(f for f in rep.findings if f.rule_id == "pip-resolution-impossible")
    assert pip.category == "missing-dependency" and pip.judgement["category_was"] == "dependency-mismatch"


def test_pip_failing_for_another_package_keeps_its_category():
    _, rep = _top(PIP_NONE.format(pkg="flash-attn==2.5.8") + NO_MODULE)
    pip = next(f for f in rep.findings if f.rule_id == "pip-resolution-impossible")
    assert pip.category == "dependency-mismatch" and pip.judgement is None


PEER_ERR = ("node-51:7307{n}:7318{n} [{n}] transport/net_ib.cc:1238 NCCL WARN NET/IB : Got completion from peer "
            "{peer}<3794{n}> with error 12, opcode 2, len 1, vendor err 129\n")
STEPS = "".join(f"{{'loss': {2.0 - 0.1 * i:.2f}, 'learning_rate': 1e-05, 'epoch': {0.1 * i:.2f}}}\n" for i in range(1, 6))


def test_ib_completion_errors_of_several_processes_toward_one_peer_replace_that_node():
    log = STEPS + "".join(PEER_ERR.format(n=n, peer="10.1.0.48") for n in (0, 2, 5))
    top, rep = _top(log)
    assert top.rule_id == "nccl-ib-fabric-error" and rep.extra["action"] == "replace-node"
    assert "same peer address" in rep.extra["action_reason"]


def test_ib_completion_errors_toward_two_peers_or_from_one_process_stay_retry():
    two_peers = STEPS + "".join(PEER_ERR.format(n=n, peer=p) for n, p in ((0, "10.1.0.48"), (2, "10.1.0.48"),
                                                                        (5, "10.1.0.48"), (6, "10.1.0.63")))
    top, rep = _top(two_peers)
    assert top.rule_id == "nccl-ib-fabric-error" and rep.extra["action"] == "retry"
    one_proc = STEPS + PEER_ERR.format(n=3, peer="10.1.0.48") * 4
    top, rep = _top(one_proc)
    assert top.rule_id == "nccl-ib-fabric-error" and rep.extra["action"] == "retry"


def test_a_watchdog_at_the_default_timeout_when_a_longer_one_was_asked_for_is_a_fix():
    cmd = "torchrun --nproc_per_node 8 train.py --deepspeed ds_z3.json --ddp_timeout {t} --bf16 --do_train\n"
    top, rep = _top(cmd.format(t=18000) + STEPS + WATCHDOG)
    assert top.rule_id == "nccl-watchdog-timeout" and rep.extra["action"] == "fix"
    assert "default timeout" in rep.extra["action_reason"]
    for log in (cmd.format(t=1800) + STEPS + WATCHDOG, STEPS + WATCHDOG,
                cmd.format(t=18000) + STEPS + WATCHDOG.replace("1800000)", "18000000)")):
        top, rep = _top(log)
        assert top.rule_id == "nccl-watchdog-timeout" and "default timeout" not in rep.extra["action_reason"]
