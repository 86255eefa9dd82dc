"""A fallback that failed anew (analyzer/detect/fallback_chain.py, rules/verdict.yaml `fallback_chain`):
in a chain joined by "During handling of the above exception", an error finding on the handled link
yields to the cause rule that names the final exception; a "direct cause" chain keeps its first link."""
from llmtriage import analyze
from llmtriage.engine.logparse import TracebackParser

FIRST = (
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/librosa/core/audio.py", line 176, in load\n'
    "    y, sr_native = __soundfile_load(path, offset, duration, dtype)\n"
    '  File "/venv/lib/python3.11/site-packages/soundfile.py", line 1216, in _open\n'
    '    raise LibsndfileError(err, prefix="Error opening {0!r}: ".format(self.name))\n'
    "soundfile.LibsndfileError: Error opening 'clips/a/0001.mp3': File contains data in an unknown format.\n"
    "\n"
)
HANDLING = "During handling of the above exception, another exception occurred:\n\n"
DIRECT = "The above exception was the direct cause of the following exception:\n\n"
LAST = (
    "Traceback (most recent call last):\n"
    '  File "/work/asr/prepare.py", line 41, in <module>\n'
    "    wav, sr = librosa.load(path, sr=16000)\n"
    '  File "/venv/lib/python3.11/site-packages/audioread/__init__.py", line 132, in audio_open\n'
    "    raise NoBackendError()\n"
    "audioread.exceptions.NoBackendError\n"
)


def _parse(text):
    p = TracebackParser()
    for n, line in enumerate(text.splitlines(), 1):
        p.feed(n, line)
    return p.exceptions


def test_parser_records_the_handled_link_only_for_during_handling():
    (exc,) = _parse(FIRST + HANDLING + LAST)
    assert exc.type == "audioread.exceptions.NoBackendError" and exc.handled == [6]
    (exc,) = _parse(FIRST + DIRECT + LAST)
    assert exc.handled == [] and exc.chain


def test_failed_fallback_names_the_final_exception():
    rep = analyze(FIRST + HANDLING + LAST)
    errors = [f for f in rep.findings if f.severity == "error"]
    assert errors[0].rule_id == "audio-decoding-backend-missing", [(f.rule_id, f.severity) for f in rep.findings]
    decode = next(f for f in rep.findings if f.rule_id == "media-decode-error")
    assert decode.severity == "warning" and decode.judgement["context"] == "handled-fallback-failed"
    assert "audio-decoding-backend-missing" in decode.judgement["reason"]


def test_a_direct_cause_chain_keeps_its_first_link():
    rep = analyze(FIRST + DIRECT + LAST)
    decode = next(f for f in rep.findings if f.rule_id == "media-decode-error")
    assert decode.severity == "error" and decode.judgement is None


def test_the_chinese_reason():
    rep = analyze(FIRST + HANDLING + LAST, lang="zh")
    decode = next(f for f in rep.findings if f.rule_id == "media-decode-error")
    assert "备选方案" in decode.judgement["reason"]


WRAPPED = (
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/vllm/model_executor/layers/quantization/bitsandbytes.py", line 157, in __init__\n'
    '    raise ImportError("bitsandbytes version is wrong. Please "\n'
    "ImportError: bitsandbytes version is wrong. Please install bitsandbytes>=0.45.3.\n"
    "\n" + HANDLING +
    "Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 577, in run_engine_core\n'
    "    engine_core = EngineCoreProc(*args, **kwargs)\n"
    '  File "/venv/lib/python3.11/site-packages/vllm/model_executor/layers/quantization/bitsandbytes.py", line 160, in __init__\n'
    '    raise ImportError("Please install bitsandbytes>=0.45.3 via "\n'
    "ImportError: Please install bitsandbytes>=0.45.3 via `pip install bitsandbytes>=0.45.3` to use bitsandbytes quantizer.\n"
)


def test_an_except_block_that_re_raises_is_a_wrapper_not_a_fallback():
    """The handler itself raised (its innermost frame is in the first link): the first link stays the cause."""
    (exc,) = _parse(WRAPPED)
    assert exc.handled == []
    first = next(f for f in analyze(WRAPPED).findings if f.line == 4)
    assert first.severity == "error" and first.judgement is None
