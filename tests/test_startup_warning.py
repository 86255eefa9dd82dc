"""An unexplained start-up exception saying something is unsupported, after a warning of the same start-up that
the GPU lacks a capability, is in the cuda-version-mismatch family (detect/startup_warning.py, rules/verdict.yaml
`unknown.family.startup_warning`); without the warning, with progress between, or with other words, it is not.
A survived "warning:" signature yields to a loss that is 0 from the first record (detect/corroborate.py
metric_outranks_warning)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import llmtriage

RULES = Path(__file__).resolve().parents[1] / "rules"

_WARN = ("2024-03-02T10:00:04.120000Z  WARN text_generation_launcher: Unable to use Flash Attention V2: "
         "GPU with CUDA capability 7 5 is not supported for Flash Attention V2")
_RAISE = [
    "2024-03-02T10:00:05.000000Z ERROR text_generation_launcher: Error when initializing model",
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/server.py", line 196, in serve_inner',
    "    model = get_model(",
    '  File "/opt/conda/lib/python3.10/site-packages/text_generation_server/models/__init__.py", line 472, in get_model',
    '    raise NotImplementedError("gptq quantization is not supported for AutoModel")',
    "NotImplementedError: gptq quantization is not supported for AutoModel",
]


def _top(lines: list[str]):
    rep = llmtriage.analyze(("\n".join(lines) + "\n").encode())
    errs = [f for f in rep.findings if f.severity == "error"]
    return errs[0] if errs else None


def test_unsupported_after_a_capability_warning_is_the_gpu_architecture():
    top = _top([_WARN, "2024-03-02T10:00:04.500000Z  WARN text_generation_launcher: Could not import Mamba", *_RAISE])
    assert top is not None and top.rule_id == "unknown" and top.category == "cuda-version-mismatch"
    assert top.captures["family_words"] == "start-up warned that the GPU lacks a capability"


def test_without_the_warning_or_with_other_words_no_family():
    assert _top(_RAISE).category != "cuda-version-mismatch"
    other = _RAISE[:-1] + ["KeyError: 'lm_head.weight'"]
    assert _top([_WARN, *other]).category != "cuda-version-mismatch"


def test_progress_between_the_warning_and_the_error_is_another_story():
    served = '2024-03-02T10:00:04.800000Z  INFO text_generation_router::server: "POST /generate HTTP/1.1" 200'
    steps = [f"{{'loss': 1.{i}, 'learning_rate': 2e-05, 'epoch': 0.{i}}}" for i in range(1, 6)]
    assert _top([_WARN, served, *steps, *_RAISE]).category != "cuda-version-mismatch"


def test_startup_warning_patterns_are_re2_safe():
    spec = yaml.safe_load((RULES / "verdict.yaml").read_text(encoding="utf-8"))["unknown"]["family"]["startup_warning"]
    cats = set(yaml.safe_load((RULES / "taxonomy.yaml").read_text(encoding="utf-8"))["categories"])
    assert spec["family"] in cats
    re2 = pytest.importorskip("re2")
    for k in ("warning", "cue", "link"):
        re2.compile(spec[k])


def _internvl(warn: bool) -> list[str]:
    out = ["[INFO|trainer.py:2078] 2024-06-07 15:21:02,771 >> ***** Running training *****"]
    for i in range(1, 25):
        if warn and i % 3 == 0:
            out.append("warning: The size of tensor a (9216) must match the size of tensor b (52736) at non-singleton "
                       "dimension 0, input_embeds[selected].shape=torch.Size([9216, 2048]), "
                       "vit_embeds.shape=torch.Size([52736, 2048])")
        out.append(f"{{'loss': 0.0, 'learning_rate': {i * 4.4e-08:.3e}, 'epoch': 0.0}}")
        out.append(f"  0%|          | {i}/30191 [00:{i:02d}:00<256:42:12, 30.79s/it]")
    return out


def test_a_survived_warning_line_yields_to_a_loss_of_zero_from_the_start():
    rep = llmtriage.analyze(("\n".join(_internvl(True)) + "\n").encode())
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs and errs[0].rule_id.startswith("metric-loss-zero")
    sig = next(f for f in rep.findings if f.rule_id == "multimodal-tokens-truncated")
    assert sig.severity == "warning" and sig.judgement["context"] == "outranked-by-metric"


def test_the_same_warning_with_a_healthy_loss_stays_the_error():
    lines = [ln.replace("'loss': 0.0", "'loss': 1.25") for ln in _internvl(True)]
    top = _top(lines)
    assert top is not None and top.rule_id == "multimodal-tokens-truncated"
