"""Quoted data in a log (layer 2): training samples and rollouts the job printed, not what it did.

Fine-tuning frameworks print a tokenised example before training (LLaMA-Factory "training example:
inputs: <|im_start|>user ..."), RL trainers print prompts and responses, and evaluation scripts print
generations. Their text is the dataset's or the model's: a code-help sample holding "CUDA out of
memory" or a whole traceback is not the job running out of memory, and must neither fire a rule,
nor feed the traceback parser, nor count as the death of the job.

A sample is recognised by the chat template's turn markers: from a line that opens a turn
(`<|im_start|>user`, `<|start_header_id|>assistant`, `[INST] `, `<start_of_turn>model`, ...) to the
line that closes the last turn (`<|im_end|>`, `<|eot_id|>`, `</s>`, ...), when that close comes
within MAX_LINES lines of the same block. A sample whose turn never closes in the block is left as
it is (a log line is never hidden on a guess). A bare header (`labels:`, `chosen_labels:`) printed
just after a closed turn opens the next piece of the same sample (the labels repeat the answer
without its opening marker).

Interactive chat sessions are quoted data too: in a block that shows a chat REPL's own banner
(`ollama run`, `>>> /bye`, llama.cpp's "== Running in interactive mode. =="), a prompt line (`>>> `,
`> `) and the model's answer below it, up to the next prompt, a timing line or a blank line, are
the user's question and the model's text. Lines the tool itself prints there (`Error: ...`,
`ggml-cuda.cu:75: CUDA error`, `llama_...` log lines) are kept: they are the session failing.

So are the transcripts a chat demo prints (Qwen's `web_demo.py`, ChatGLM's `cli_demo.py`, a gradio
app echoing its turns): in a block holding both a user's turn (`User:`, `用户：`, `Human:`) and a model's
turn (`Assistant:`, `助手：`, `Qwen-Chat:`, `ChatGLM-6B：`), each turn line and the lines that continue
it, up to a blank line or the next turn, are the conversation. A continuation line that looks like the
program's own output (a traceback, a log-level or time-stamped line) is kept.

So are a user's own notes in a paste: a comment line (`# ...`, `// ...`) that names an exception
("# 之前报 NotImplementedError: ..., 加了 empty_init=False 之后变成下面这个错误") tells what happened
before or elsewhere. In a block that also holds a traceback of the job itself, those lines are blanked:
the traceback is what this run did. Without one the note is kept (it may be the only evidence).
A numbered C frame (`#0  0x7f... in raise ()`) is not a comment.

`mask(lines)` blanks those lines (every byte but the newline becomes a space), so line numbers and
offsets stay, and everything downstream (Set, tracebacks, observers, verdict) sees nothing there.
"""
from __future__ import annotations

import re
from functools import lru_cache
from types import SimpleNamespace

MAX_LINES = 400          # a turn must close within this many lines of the same block
HEADER_WINDOW = 8        # a `labels:` header counts within this many lines after a closed turn

# any of these bytes in a block is needed before a line is examined (cheap memmem gate)
_GATE = (b"<|", b"[INST]", b"<start_of_turn>", "<｜".encode())


@lru_cache(maxsize=1)
def _rx() -> SimpleNamespace:
    """The patterns, compiled on the first block that passes the gate (start-up pays nothing)."""
    return SimpleNamespace(
        # a turn opens: the marker, then a role or text (never a quote: `'<|im_start|>' + role` is a template)
        open=re.compile(
            rb"(?:^|[\s>\]:])(?:<\|im_start\|>(?:system|user|assistant|tool|human|gpt)\b"
            rb"|(?:<\|begin_of_text\|>)?<\|start_header_id\|>(?:system|user|assistant|ipython|tool)<\|end_header_id\|>"
            rb"|<start_of_turn>(?:user|model|system)\b"
            rb"|(?:<s>\s*)?\[INST\](?=\s*[^\s'\"\]])"
            rb"|<\|(?:user|system|assistant)\|>(?=\s*$|\s*[^\s'\"])"
            + "|<｜(?:User|Assistant)｜>(?=[^'\"])".encode() + rb")"),
        close=re.compile(
            rb"<\|im_end\|>|<\|eot_id\|>|<\|eom_id\|>|<\|end\|>|<end_of_turn>|</s>|<\|endoftext\|>|<\|end_of_text\|>"
            + "|<｜end▁of▁sentence｜>".encode()),
        # the text before an opening marker: a short label or prefix, never an error line quoting a template
        not_before=re.compile(rb"Error|Exception|Traceback|Warning|WARN"),
        header=re.compile(rb"^\s*(?:\[[^\]]{1,40}\]:?\s*)?(?:\w+_)?(?:labels?|inputs?|outputs?|response|completion"
                          rb"|prompt|chosen|rejected)\s*:\s*$"),
    )


_BEFORE_MAX = 60
# a chat REPL session: its banner must be in the block before its prompts count
_REPL_GATE = (b"== Running in interactive mode", b">>> /bye", b"ollama run ", b"Send a message (/? for help)")
_REPL_MAX = 100          # an answer is at most this many lines


# the line prefixes a launcher or collector puts before a session's lines ([rank3]:, (pid=1) , host: ,
# 3: , an RFC 3339 time, a syslog/journal head `Sep 28 08:46:05 host ollama[2563639]: `): the REPL's own marks follow them
_PREFIX = (rb"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,60} [\w./-]{1,60}(?:\[\d+\])?:\s+)?"
           rb"(?:\[[^\]\n]{1,60}\]:?\s*|\([^)\n]{1,60}\)\s*|[\w.-]{1,40}:\s+|\d[\d:.,TZ+-]{5,40}\s+){0,3}")


@lru_cache(maxsize=1)
def _repl_rx() -> SimpleNamespace:
    return SimpleNamespace(
        prompt=re.compile(_PREFIX + rb"(?:>>>|>) "),
        # where an answer ends: the next prompt, the tool's timing lines, a blank line
        end=re.compile(_PREFIX + rb"(?:(?:>>>|>)(?: |$)|llama_perf_|llama_print_timings|total duration:|eval rate:|\s*$)"
                       rb"|^(?:\([\w.-]+\) )?[\w.-]+@[\w.-]+:[^\n]*[$#](?: |$)"),    # or the shell's prompt: the session is over
        # what the tool itself prints inside a session: kept
        tool=re.compile(_PREFIX + rb"(?:Error\b|error:|ERROR\b|CUDA error|ggml_|llama_|\[GIN\]|time=|\S+\.(?:cu|cpp|cc|c|h|go):\d+)"),
    )


def repl_spans(rows: list[bytes]) -> list[tuple[int, int]]:
    """(first, last) row indexes of a chat REPL's prompts and answers (see the module doc)."""
    rx = _repl_rx()
    out: list[tuple[int, int]] = []
    i, n = 0, len(rows)
    while i < n:
        if not rx.prompt.match(rows[i]):
            i += 1
            continue
        out.append((i, i))                      # the user's question
        j = i + 1
        while j < n and j - i <= _REPL_MAX and not rx.end.match(rows[j]):
            if not rx.tool.match(rows[j]):
                out.append((j, j))
            j += 1
        i = j
    return out


# a chat demo's transcript: both kinds of turn must be in the block. The gate runs on every block of
# every log, so it is the commonest user labels only ("User:", "用户：", "问："): each literal costs a
# memmem pass over the block (a few % of a scan's time); the other labels count once a gate passed.
_DEMO_GATE = (b"User:", "户：".encode(), "问：".encode())
_DEMO_MAX = 100          # a turn continues over at most this many lines


@lru_cache(maxsize=1)
def _demo_rx() -> SimpleNamespace:
    return SimpleNamespace(
        user=re.compile(_PREFIX + "(?:User|USER|Human|用户|问)\\s*[:：]".encode()),
        model=re.compile(_PREFIX + "(?:Assistant|ASSISTANT|AI|Bot|助手|答|模型"
                         "|[A-Z][\\w.-]{0,30}-(?:Chat|chat|Instruct|Bot)|(?:ChatGLM|Qwen|Baichuan|InternLM|Yi|DeepSeek)"
                         "[\\w.-]{0,20})\\s*[:：]".encode()),
        # the user closing the session with the demo's exit command ("用户：stop", "User: exit"): the session's
        # own end (a finish marker of rules/verdict.yaml), not conversation: kept
        bye=re.compile(_PREFIX + "(?:User|USER|Human|用户)\\s*(?::|：)\\s*:?(?:exit|quit|stop|q)\\s*$".encode()),
        # the program's own lines inside a turn: kept
        own=re.compile(_PREFIX + rb"(?:Traceback \(most recent|\s*File \"|[\w.]*(?:Error|Exception)\b"
                       rb"|\[?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b|\d{4}-\d\d-\d\d|\s*$)"),
    )


def demo_spans(rows: list[bytes]) -> list[tuple[int, int]]:
    """(first, last) row indexes of a chat demo's turns (see the module doc); none unless the block
    holds both a user's turn and a model's turn."""
    rx = _demo_rx()
    turn = [3 if rx.bye.match(r) else 1 if rx.user.match(r) else 2 if rx.model.match(r) else 0 for r in rows]
    if 1 not in turn or 2 not in turn:
        return []
    out: list[tuple[int, int]] = []
    i, n = 0, len(rows)
    while i < n:
        if turn[i] in (0, 3):
            i += 1
            continue
        j = i + 1
        while j < n and j - i <= _DEMO_MAX and not turn[j] and not rx.own.match(rows[j]):
            j += 1
        out.append((i, j - 1))
        i = j
    return out


def _opens(line: bytes) -> bool:
    rx = _rx()
    m = rx.open.search(line)
    if m is None:
        return False
    before = line[:m.start()]
    return len(before) <= _BEFORE_MAX and rx.not_before.search(before) is None


def _closes_after_last_open(line: bytes) -> bool:
    """The line leaves the sample: a close marker after the line's last opening marker."""
    rx = _rx()
    closes = [m.end() for m in rx.close.finditer(line)]
    if not closes:
        return False
    opens = [m.end() for m in rx.open.finditer(line)]
    return not opens or closes[-1] > opens[-1]


def spans(lines: bytes) -> list[tuple[int, int]]:
    """(first, last) line indexes of `lines` (split at `\\n`) that are quoted data."""
    if not any(g in lines for g in _GATE):
        return []
    rows = lines.split(b"\n")
    out: list[tuple[int, int]] = []
    i, after_close = 0, -HEADER_WINDOW - 1
    n = len(rows)
    while i < n:
        row = rows[i]
        header = i - after_close <= HEADER_WINDOW and _rx().header.match(row) is not None
        if not header and not ((b"<" in row or b"[INST]" in row) and _opens(row)):
            i += 1
            continue
        if not header and _closes_after_last_open(row):
            out.append((i, i))          # a whole sample on one line
            after_close = i
            i += 1
            continue
        end = _close_line(rows, i + 1)
        if end is None:
            i += 1
            continue
        out.append((i, end))
        after_close = end
        i = end + 1
    return out


def _close_line(rows: list[bytes], start: int) -> int | None:
    """The line where the sample opened just before `start` ends: the first line whose last marker
    is a close, within MAX_LINES."""
    for j in range(start, min(len(rows), start + MAX_LINES)):
        row = rows[j]
        if b"<" in row and _closes_after_last_open(row):
            return j
    return None


@lru_cache(maxsize=1)
def _note_rx() -> re.Pattern[bytes]:
    return re.compile(rb"^[ \t]*(?:#+|//)[ \t]+(?![\d#])[^\n]*?\b[A-Z]\w*(?:Error|Exception)\b")


def note_spans(rows: list[bytes]) -> list[tuple[int, int]]:
    """(row, row) of each comment line naming an exception (see the module doc)."""
    rx = _note_rx()
    return [(i, i) for i, r in enumerate(rows) if r[:1] in b" \t#/" and rx.match(r)]


def mask(lines: bytes) -> bytes:
    """`lines` with the quoted-data lines blanked (same length, same newlines)."""
    found = spans(lines)
    repl = any(g in lines for g in _REPL_GATE)
    demo = any(g in lines for g in _DEMO_GATE)
    # the traceback first: most blocks have none, and then the comment literals are never searched
    notes = b"Traceback (most recent call last)" in lines and (lines[:1] in b"#/" or b"\n#" in lines or b"\n//" in lines)
    if not found and not repl and not demo and not notes:
        return lines
    rows = lines.split(b"\n")
    if repl:
        found = found + repl_spans(rows)
    if demo:
        found = found + demo_spans(rows)
    if notes:
        found = found + note_spans(rows)
    if not found:
        return lines
    for a, b in found:
        for k in range(a, b + 1):
            rows[k] = b" " * len(rows[k])
    return b"\n".join(rows)
