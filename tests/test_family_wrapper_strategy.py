"""An unrecognised check raised by a training wrapper's own DeepSpeed / FSDP strategy layer is deepspeed-config."""
from __future__ import annotations

import llmtriage


def top(text: str):
    rep = llmtriage.analyze(text)
    return rep.findings[0]


def test_a_misconfiguration_raised_in_lightnings_fsdp_strategy_is_deepspeed_config():
    log = ("Traceback (most recent call last):\n"
           '  File "/opt/conda/lib/python3.11/site-packages/lightning/pytorch/trainer/trainer.py", line 963, in _run\n'
           "    self.strategy.setup_environment()\n"
           '  File "/opt/conda/lib/python3.11/site-packages/lightning/pytorch/strategies/fsdp.py", line 512, in setup\n'
           "    raise MisconfigurationException(\n"
           "lightning.fabric.utilities.exceptions.MisconfigurationException: The sharding plan given for "
           "layer_norm_eps conflicts with the activation offload policy.\n")
    f = top(log)
    assert f.rule_id == "unknown" and f.category == "deepspeed-config"


def test_the_same_exception_raised_in_user_code_is_not_placed_by_the_shape():
    log = ("Traceback (most recent call last):\n"
           '  File "/workspace/train.py", line 40, in main\n'
           "    raise MisconfigurationException(\n"
           "lightning.fabric.utilities.exceptions.MisconfigurationException: The sharding plan given for "
           "layer_norm_eps conflicts with the activation offload policy.\n")
    assert top(log).category != "deepspeed-config"
