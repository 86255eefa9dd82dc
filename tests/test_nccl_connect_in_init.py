"""An NCCL connection that failed while the communicator was being set up (rules/verdict.yaml marker
`nccl-connect-failed-in-init`, actions.yaml `nccl-connect-failed-in-init`): fix before any step, retry
once the job has trained; and Ray's fixed component ports count as a port the user chose."""
from llmtriage import analyze

WARN = ("host-b:866:1213 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.0.6<40631> failed : "
        "Software caused connection abort\n")
INIT = ("host-b:866:1213 [0] proxy.cc:1523 NCCL WARN [Service thread] Error encountered progressing operation=Connect, "
        "res=3, closing connection\n"
        "host-b:866:1204 [0] NCCL INFO init.cc:1316 -> 3\n")
STEPS = "".join(f"{{'loss': {2.0 - n / 100:.4f}, 'learning_rate': 1e-05, 'epoch': {n / 100:.2f}}}\n" for n in range(1, 30))


def _action(text):
    return analyze(text).extra["action"]


def test_a_connect_failure_inside_communicator_init_before_any_step_is_fixed_not_retried():
    assert _action(WARN + INIT) == "fix"


def test_the_same_failure_after_training_progress_stays_retry():
    assert _action(STEPS + WARN) == "retry"


def test_a_grpc_bind_failure_on_a_ray_port_fixed_by_the_command_is_fixed():
    log = ("+ ray start --head --port 6379 --node-manager-port 43001 --object-manager-port 43002\n"
           "[2021-10-13 00:02:42,664 C 77129 77998] grpc_server.cc:82:  Check failed: server_ Failed to start the grpc "
           "server. The specified port is 43001. This means that Ray's core components will not be able to function "
           "correctly.\n")
    rep = analyze(log)
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.rule_id == "grpc-server-bind-address-in-use" and rep.extra["action"] == "fix"
