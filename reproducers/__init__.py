"""Reproducers: regenerate LLM training/inference failures for real and verify their fixes.

Each module declares ``SCENARIOS`` (a failing variant and one variant per fix) and holds the
variant functions, which run only in a child interpreter started by
:func:`llmtriage.reproducers._harness.run_variant`. Importing this package never imports
torch or transformers.
"""
from __future__ import annotations

from importlib import import_module

from ._harness import RunResult, Scenario, Variant, checks, run_variant

__all__ = ["MODULES", "all_scenarios", "get", "Scenario", "Variant", "RunResult", "checks", "run_variant"]

MODULES = (
    "host_oom",
    "seq_too_long",
    "checkpoint_corrupt",
    "weights_not_found",
    "nan_loss",
    "no_grad",
    "shape_mismatch",
    "tokenizer_vocab",
    "dtype_device",
    "autograd_misuse",
    "environment",
    "loss_suspicious",
    "data_corrupt",
    "infra",
    "gpu_kernels",
)

_CACHE: list = []


def all_scenarios() -> list:
    """Every declared scenario, in a stable order."""
    if not _CACHE:
        seen = set()
        for mod in MODULES:
            for sc in import_module(f"{__name__}.{mod}").SCENARIOS:
                if sc.name in seen:
                    raise ValueError(f"duplicate reproducer scenario name: {sc.name}")
                seen.add(sc.name)
                _CACHE.append(sc)
    return list(_CACHE)


def get(name: str) -> Scenario:
    for sc in all_scenarios():
        if sc.name == name:
            return sc
    raise KeyError(name)
