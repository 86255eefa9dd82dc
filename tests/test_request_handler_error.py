"""vLLM's front end catching one request's exception (serving_chat.py / serving_completion.py ERROR
lines, rules/verdict.yaml marker `request-handler-error`): survived when later requests are served."""
from __future__ import annotations

import llmtriage

HEAD = (
    "INFO:     Application startup complete.\n"
    'INFO:     10.0.0.2:40100 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    "ERROR 04-24 15:10:19 [serving_chat.py:200] Error in preprocessing prompt inputs\n"
    "ERROR 04-24 15:10:19 [serving_chat.py:200] Traceback (most recent call last):\n"
    "ERROR 04-24 15:10:19 [serving_chat.py:200]   File \"/venv/vllm/entrypoints/chat_utils.py\", line 1104, in apply_hf_chat_template\n"
    "ERROR 04-24 15:10:19 [serving_chat.py:200]     return tokenizer.apply_chat_template(\n"
    "ERROR 04-24 15:10:19 [serving_chat.py:200] jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...\n"
    'INFO:     10.0.0.2:40104 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error\n'
)


def errors(text: str):
    return [f for f in llmtriage.analyze(text).findings if f.severity == "error"]


def test_a_request_error_followed_by_served_requests_is_survived():
    text = HEAD + 'INFO:     10.0.0.2:40108 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    assert errors(text) == []


def test_a_request_error_with_nothing_served_after_stays_the_error():
    found = errors(HEAD)
    assert found and found[0].rule_id == "chat-template-role-order-rejected"


def test_the_same_error_raised_by_a_training_script_is_not_a_handled_request():
    text = ("Traceback (most recent call last):\n"
            '  File "train.py", line 40, in <module>\n'
            "jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...\n"
            "{'loss': 1.2, 'grad_norm': 0.8, 'learning_rate': 1e-05, 'epoch': 0.1}\n")
    assert any(f.rule_id == "chat-template-role-order-rejected" for f in errors(text))
