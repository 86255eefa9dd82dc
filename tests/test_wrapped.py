"""An exception message folded over several lines (a rich traceback, a narrow terminal) is matched once
more as one line when no cause rule reads it (analyzer/detect/wrapped.py)."""
from llmtriage import analyze

MSG = ("ValueError: Image features and image tokens do not match: tokens:\n"
       "2117, features 2116\n")


def _errors(text):
    return [f for f in analyze(text).findings if f.severity == "error"]


def test_a_folded_message_is_matched_joined():
    errors = _errors("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n" + MSG)
    assert errors[0].rule_id == "mm-placeholders-exceed-features"
    assert errors[0].line == 3 and errors[0].last_line == 4 and errors[0].captures["tokens"] == "2117"


def test_a_new_record_is_not_joined():
    log = ("ValueError: Image features and image tokens do not match: tokens:\n"
           "[2026-11-30 14:02:31,552] [INFO] 2117, features 2116\n")
    assert not any(f.rule_id == "mm-placeholders-exceed-features" for f in _errors(log))


def test_a_message_a_rule_already_reads_is_left_alone():
    log = ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)\n"
           "of which 1.2 GiB is free\n")
    errors = _errors(log)
    assert errors[0].category == "cuda-oom" and len([f for f in errors if f.category == "cuda-oom"]) == 1
