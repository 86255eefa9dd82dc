#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris) of the reader, normaliser, traceback parser and engine.

    pip install atheris
    python benchmarks/fuzz_logparse.py -max_total_time=120          # time-boxed run
    python benchmarks/fuzz_logparse.py -runs=20000 -max_len=8192     # bounded by iterations
    python benchmarks/fuzz_logparse.py --engine -max_total_time=60   # also the whole engine (slower)

Invariants checked on every input (a failure crashes with the input saved as crash-*):
- the block reader returns exactly the input, cut at newlines or at max_line;
- ANSI stripping neither loses nor invents a newline (line numbers stay those of the input);
- decoding, normalising, prefix splitting and the traceback parser never raise;
- (--engine) a scan never raises except InputError (empty / binary input), and every finding's line
  is inside the input.
libFuzzer flags (-max_total_time, -runs, -max_len, corpus dirs) pass through.
"""
from __future__ import annotations

import io
import sys

try:
    import atheris
except ImportError:  # pragma: no cover
    sys.exit("atheris is not installed: pip install atheris (needs a clang/libFuzzer build on some platforms)")

with atheris.instrument_imports():
    from llmtriage import InputError, scan_source
    from llmtriage.logparse import (TracebackParser, decode_line, iter_blocks, match_view, normalise_text,
                                    split_prefix)

ENGINE = None


def _check(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    block = fdp.ConsumeIntInRange(1, 256)
    max_line = fdp.ConsumeIntInRange(1, 512)
    raw = fdp.ConsumeBytes(fdp.remaining_bytes())
    out = list(iter_blocks(io.BytesIO(raw), block=block, max_line=max_line))
    if b"".join(c for c, _ in out) != raw:
        raise AssertionError("iter_blocks lost or duplicated bytes")
    p = TracebackParser()
    n = 0
    for chunk, _forced in out:
        lines, view = match_view(chunk)
        if lines.count(b"\n") != chunk.count(b"\n") or len(view) != len(lines):
            raise AssertionError("match_view changed the line structure")
        for piece in lines.split(b"\n"):
            n += 1
            text, _ = decode_line(piece)
            norm = normalise_text(text)
            split_prefix(norm)
            p.feed(n, norm)
    for exc in p.exceptions:
        if not 1 <= exc.line <= max(n, 1):
            raise AssertionError(f"exception line {exc.line} outside 1..{n}")
    if ENGINE is not None:
        try:
            rep = scan_source(ENGINE, raw, name="fuzz")
        except InputError:
            return
        total = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
        for f in rep.findings:
            if not 1 <= f.line <= total:
                raise AssertionError(f"{f.rule_id}: line {f.line} outside 1..{total}")


def main() -> None:
    global ENGINE
    argv = [a for a in sys.argv if a != "--engine"]
    if "--engine" in sys.argv:
        from llmtriage import get_engine

        ENGINE = get_engine()
    atheris.Setup(argv, _check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
