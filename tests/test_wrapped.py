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


def test_another_programs_output_quoted_with_escaped_newlines():
    inner = ("INFO:convert:Loading model: m\\nTraceback (most recent call last):\\n  File \\\"convert.py\\\", line 9, "
             "in <module>\\n    main()\\nModuleNotFoundError: No module named \\'sentencepiece\\'\\n")
    log = ("Traceback (most recent call last):\n  File \"app.py\", line 40, in process\n"
           "    raise Exception(f\"Error converting to fp16: {result.stderr}\")\n"
           f"Exception: Error converting to fp16: b'{inner}'\n")
    errors = _errors(log)
    assert errors[0].category == "missing-dependency" and errors[0].line == 4
    assert "sentencepiece" in errors[0].message


def test_a_few_escaped_newlines_in_a_message_are_left_alone():
    log = "ValueError: bad prompt template 'a\\nb'\n"
    assert all(f.line != 1 or f.rule_id == "unknown" for f in analyze(log).findings)


def test_a_rule_the_whole_log_vetoes_stays_out_of_the_joined_message():
    # the joined "device-side assert triggered ... asynchronously reported" line alone matches the index
    # rule, but the log names the assertion (the sampler's NaN check): the rule's `unless` holds there too
    log = ("kernel.cu:110: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion "
           "`probability tensor contains either `inf`, `nan` or element < 0` failed.\n"
           "Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"
           "torch.AcceleratorError: CUDA error: device-side assert triggered\n"
           "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
           "below might be incorrect.\n")
    errors = _errors(log)
    assert errors[0].rule_id == "sampling-probability-nan"
    assert not any(f.rule_id == "cuda-device-side-assert-index" for f in errors)


def test_a_traceback_escaped_into_one_json_record_is_read_as_the_log_it_was():
    """TGI's --json-output puts the shard's whole traceback into one record's `fields.message` (newlines and
    quotes escaped): a rule that needs the quotes back (`message="Allocation Failure"`) matches on the record."""
    msg = ('Shard complete standard error output:\\n\\nTraceback (most recent call last):\\n\\n  File \\"/opt/conda/bin/'
           'text-generation-server\\", line 8, in <module>\\n    sys.exit(app())\\n\\nRuntimeError: nrt_tensor_allocate '
           'status=4 message=\\"Allocation Failure\\"\\n')
    log = ('{"timestamp":"2024-01-02T03:04:05Z","level":"INFO","fields":{"message":"Starting shard"},"target":"tgi"}\n'
           '{"timestamp":"2024-01-02T03:04:09Z","level":"ERROR","fields":{"message":"' + msg + '"},"target":"tgi"}\n'
           "Error: ShardCannotStart\n")
    errors = _errors(log)
    assert (errors[0].rule_id, errors[0].category, errors[0].line) == ("neuron-device-memory-alloc-failed", "cuda-oom", 2)
