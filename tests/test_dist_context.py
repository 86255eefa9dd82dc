"""Distributed-run context: a retried store connection that the death repeats, a near-zero loss right after a resume."""
from __future__ import annotations

import llmtriage


def report(text: str) -> llmtriage.Report:
    return llmtriage.analyze(text)


STORE = (
    "[W1118 09:31:02.410211113 socket.cpp:767] [c10d] The client socket has timed out after 60000ms while trying to "
    "connect to (node0, 29400).\n"
    "[W1118 09:31:02.410377004 TCPStore.cpp:343] [c10d] TCP client failed to connect/validate to host node0:29400 - "
    "retrying (try=0, timeout=60000ms, delay=1721ms): The client socket has timed out after 60000ms while trying to "
    "connect to (node0, 29400).\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/lib/python3.12/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",'
    " line 159, in _create_tcp_store\n"
    "    store = TCPStore(\n"
    "torch.distributed.DistNetworkError: The client socket has timed out after 60000ms while trying to connect to "
    "(node0, 29400).\n\n"
    "The above exception was the direct cause of the following exception:\n\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/bin/torchrun", line 10, in <module>\n'
    "    sys.exit(main())\n"
    '  File "/opt/venv/lib/python3.12/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",'
    " line 183, in _create_tcp_store\n"
    "    raise RendezvousConnectionError(\n"
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. "
    "See inner exception for details.\n")


def test_a_retried_error_the_final_exception_repeats_is_the_cause_again():
    rep = report(STORE)
    top = rep.findings[0]
    assert top.rule_id == "c10d-store-connect-timeout" and top.severity == "error"
    # the `recovered` context does not demote an error that came back after its last retry: the error is one from
    # the start, with no judgement to undo (death_repeats' retried-then-died is for a demotion the death reverses)
    assert top.judgement is None
    assert rep.extra["action"] == "fix"


RESUMED = "Restored checkpoint at step 25000\n"
LOW = "".join(f"Step {s}: grad_norm=0.09{s % 7}, loss=0.008{s % 9}, param_norm=1806.1\n" for s in range(25000, 27100, 100))


def test_near_zero_loss_right_after_a_resume_is_a_warning():
    def low_start(text: str):
        return next(f for f in report(text).findings if f.rule_id == "metric-loss-near-zero-from-start")
    assert low_start(LOW).severity == "error"
    assert low_start(RESUMED + LOW).severity == "warning"


def test_nccl_socket_handshake_of_the_wrong_type_is_fixed_not_retried():
    # "socketFinalizeAccept: wrong type 3 != 4" under a ncclRemoteError: the two nodes' NCCL connections
    # disagree (verdict.yaml nccl-socket-handshake-mismatch), not a peer that died (actions.yaml)
    with open("fixtures/nccl-error/torchrun-2node-roce-nccl-socketfinalizeaccept-wrong-type.log", encoding="utf-8") as fh:
        rep = report(fh.read())
    assert rep.findings[0].category == "nccl-error" and rep.extra["action"] == "fix"
    assert "wrong type or magic" in rep.extra["action_reason"]

