"""A client's quote of a request the server rejected (rules/verdict.yaml `rejection_echo`).

A serving log often carries two sides of one rejected request: the server's own line (a traceback
and "400 Bad Request", TGI's validation error, llama-server's `log_server_r ... 400`) and, pasted
below it, the client's echo of the response (`openai.BadRequestError: Error code: 400 - {...}`,
`huggingface_hub.errors.ValidationError: Input validation error: ...`, a JSON error body it logged).
The echo usually comes after the server's last progress line only because the client's log was
pasted after the server's. When the server went on serving after the rejection and the client went
on after its echo (its own lines follow, no death), the echo is a handled request: neither the
job's death nor the end of the signature's span.
"""
from __future__ import annotations


from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import compiled as _rx, verdict_spec



def echo_handled(line: int, scanner: Scanner) -> bool:
    """Line `line` (1-based) quotes a client error response (HTTP 4xx) the server answered while it
    kept serving: a rejection marker before it with served progress after that marker, and the
    client's own lines after the quote with no death among them."""
    spec = verdict_spec().get("rejection_echo")
    if not spec or line <= 0:
        return False
    text = scanner.line_text(line)
    if not text or not _rx(spec["regex"]).search(text):
        return False
    names = set(spec["rejections"])
    served = scanner.last_progress if scanner.last_progress_name in spec["served"] else 0
    if not any(h[0] < line and h[0] < served for h in scanner.hits.get("recovery", ()) if h[1] in names):
        return False
    if any(d[0] > line for d in scanner.hits.get("death", ())):
        return False
    stop, not_output = _rx(spec["stop"]), _rx(spec["not_output"])
    own, need = 0, int(spec["min_after"])
    for n, raw in scanner.rows(line + 1):
        text = raw.decode("utf-8", "replace").rsplit("\r", 1)[-1]
        if n <= line or not text.strip():
            continue
        if stop.search(text):
            break
        own += 0 if not_output.search(text) else 1
        if own >= need:   # enough of the client's own lines: stop reading (the log may go on for gigabytes)
            return True
    return False
