"""Wrapper headlines: an exception re-raised with another's headline ("RuntimeError: TypeError: ...") is
read as the inner exception, and a front end's "see the stack trace" death yields to the engine's own error."""
from __future__ import annotations

import llmtriage
from llmtriage.detect.inner_exception import inner_exception, inner_type
from llmtriage.findings import ExceptionInfo, Frame

INNER_TB = (
    "Traceback (most recent call last):\n"
    '  File "/app/tool/train.py", line 203, in <module>\n'
    "    trainer.load_model()\n"
    '  File "/usr/lib/python3.12/site-packages/somelib/loader.py", line 88, in load_model\n'
    "    build_adapter(cfg, lora_scale=1.0)\n"
    "TypeError: build_adapter() got an unexpected keyword argument 'lora_scale'\n"
)
REraise_TB = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 322, in <module>\n'
    '  File "/app/tool/launcher.py", line 7345, in launch\n'
    "    raise launch_error\n"
    "RuntimeError: TypeError: build_adapter() got an unexpected keyword argument 'lora_scale'\n"
    "2026-06-20 09:41:31,530 [ERROR] (tool) Job lora-int8 failed (exit code 1)\n"
)


def test_inner_type_reads_only_an_exception_headline():
    def exc(msg: str) -> ExceptionInfo:
        return ExceptionInfo(type="RuntimeError", message=msg, line=9)
    assert inner_type(exc("TypeError: quant_type must be an AOBaseConfig instance, got str")) == "TypeError"
    assert inner_type(exc("torch.OutOfMemoryError: CUDA out of memory.")) == "OutOfMemoryError"
    assert inner_type(exc("CUDA error: an illegal memory access was encountered")) is None
    assert inner_type(exc("Error: no such model")) is None
    assert inner_type(exc("Engine process failed to start. See stack trace for the root cause.")) is None


def test_inner_exception_prefers_the_printed_inner_traceback():
    frames = [Frame(file="/usr/lib/python3.12/site-packages/somelib/loader.py", line=88, function="load_model")]
    first = ExceptionInfo(type="TypeError", message="f() got an unexpected keyword argument 'x'", line=5, frames=frames)
    outer = ExceptionInfo(type="RuntimeError", message="TypeError: f() got an unexpected keyword argument 'x'", line=12)
    assert inner_exception(outer, [first, outer]) is first
    alone = inner_exception(outer, [outer])
    assert (alone.type, alone.message, alone.frames) == ("TypeError", "f() got an unexpected keyword argument 'x'", [])
    plain = ExceptionInfo(type="ValueError", message="bad value", line=3)
    assert inner_exception(plain, [plain]) is plain


def test_reraised_headline_is_named_by_the_inner_exception():
    rep = llmtriage.analyze(INNER_TB + REraise_TB)
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.rule_id == "unknown"
    assert top.captures["type"] == "TypeError" and top.captures["reraised_as"] == "RuntimeError"
    assert top.category == "dependency-mismatch"        # the inner TypeError's call-signature shape


def test_reraise_without_the_inner_traceback_still_uses_the_inner_type():
    rep = llmtriage.analyze(REraise_TB)
    top = next(f for f in rep.findings if f.severity == "error")
    assert top.captures["type"] == "TypeError"
    assert top.category == "dependency-mismatch"


V0_ENGINE = (
    "INFO 07-15 08:07:44 [api_server.py:1395] vLLM API server version 0.9.2\n"
    "ERROR 07-15 08:09:04 [engine.py:458] The profiler's dummy audio has 3000 frames, the encoder budget is 1500.\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/engine.py", line 446, in run_mp_engine\n'
    "    engine = MQLLMEngine.from_vllm_config(\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/custom_omni.py", line 257, in profile\n'
    "    raise ValueError(msg)\n"
    "ValueError: The profiler's dummy audio has 3000 frames, the encoder budget is 1500.\n"
    "INFO 07-15 08:09:05 [multiproc_worker_utils.py:124] Killing local vLLM worker processes\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/bin/vllm", line 8, in <module>\n'
    "    sys.exit(main())\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", line 1495, in run_server\n'
    "    async with build_async_engine_client(args) as engine_client:\n"
    "RuntimeError: Engine process failed to start. See stack trace for the root cause.\n"
)


def test_v0_engine_process_death_yields_to_the_engine_exception():
    rep = llmtriage.analyze(V0_ENGINE)
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs[0].rule_id == "unknown" and errs[0].captures["type"] == "ValueError"
    assert errs[0].line == 8
    assert all(f.line != 15 for f in errs)          # the front end's RuntimeError is not a second root cause


def test_bare_engine_process_failed_to_start_also_yields():
    """vLLM 0.5-0.6 printed the bare "Engine process failed to start" (no "See stack trace" pointer)."""
    rep = llmtriage.analyze(V0_ENGINE.replace(". See stack trace for the root cause.", ""))
    errs = [f for f in rep.findings if f.severity == "error"]
    assert errs[0].rule_id == "unknown" and errs[0].captures["type"] == "ValueError"
    assert all(f.line != 15 for f in errs)
