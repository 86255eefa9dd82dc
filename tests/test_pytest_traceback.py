"""pytest's failure reports are tracebacks too: section header, `path:line: in func` frames, `E   XError:` line."""
from __future__ import annotations

import llmtriage

SHORT = (
    "============================= test session starts ==============================\n"
    "collected 0 items / 1 error\n"
    "\n"
    "==================================== ERRORS ====================================\n"
    "_____________ ERROR collecting tests/models/test_backbone.py _______________\n"
    "tests/models/test_backbone.py:21: in <module>\n"
    "    model = Backbone.from_config(cfg)\n"
    "mypkg/backbone.py:88: in from_config\n"
    "    return cls(**cfg.kwargs)\n"
    "/opt/conda/lib/python3.11/site-packages/somelib/core.py:412: in __init__\n"
    "    self.proj = build_proj(kind)\n"
    "E   KeyError: 'rotary_v3'\n"
    "=========================== short test summary info ============================\n"
    "ERROR tests/models/test_backbone.py - KeyError: 'rotary_v3'\n"
    "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
    "=============================== 1 error in 4.12s ===============================\n"
)

LONG = (
    "=================================== FAILURES ===================================\n"
    "________________________________ test_forward _________________________________\n"
    "\n"
    "    def test_forward():\n"
    ">       run_forward(batch=4)\n"
    "\n"
    "tests/test_model.py:12: \n"
    "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
    "\n"
    "    def run_forward(batch):\n"
    ">       raise ValueError(f\"bad batch {batch}\")\n"
    "E       ValueError: bad batch 4\n"
    "\n"
    "mypkg/model.py:40: ValueError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_model.py::test_forward - ValueError: bad batch 4\n"
    "============================== 1 failed in 0.31s ===============================\n"
)


def test_short_style_report_gives_the_exception_its_frames():
    rep = llmtriage.analyze(SHORT)
    exc = rep.exception
    assert exc is not None and exc.type == "KeyError" and exc.line == 12
    assert [f.line for f in exc.frames] == [21, 88, 412]
    assert exc.user_frame is not None and exc.user_frame.file == "mypkg/backbone.py"
    assert rep.extra["status"] == "crashed"


def test_long_style_report_reads_the_location_after_the_e_line():
    rep = llmtriage.analyze(LONG)
    exc = rep.exception
    assert exc is not None and exc.type == "ValueError" and exc.message == "bad batch 4"
    assert exc.frames and exc.frames[-1].file == "mypkg/model.py" and exc.frames[-1].line == 40


def test_underscore_rules_and_a_header_without_an_e_line_are_no_traceback():
    text = ("_________________________________________________________________\n"
            "Layer (type)                 Output Shape              Param #\n"
            "_____ test_speed _____\n"
            "tests/test_speed.py:3: in test_speed\n"
            "    assert elapsed < 1.0\n"
            "all good, 3 passed in 1.20s\n")
    rep = llmtriage.analyze(text)
    assert rep.exception is None
