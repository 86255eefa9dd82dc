#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris) of the reader, normaliser, traceback parser and engine.

    pip install atheris
    python benchmarks/fuzz_logparse.py -max_total_time=120          # time-boxed run
    python benchmarks/fuzz_logparse.py -runs=20000 -max_len=8192     # bounded by iterations
    python benchmarks/fuzz_logparse.py --engine -max_total_time=60   # also the whole engine (slower)
    python benchmarks/fuzz_logparse.py --differential SEEDS/ -max_total_time=60

Invariants checked on every input (a failure crashes with the input saved as crash-*):
- the block reader returns exactly the input, cut at newlines or at max_line;
- ANSI stripping neither loses nor invents a newline (line numbers stay those of the input);
- decoding, normalising, prefix splitting and the traceback parser never raise;
- (--engine) a scan never raises except InputError (empty / binary input), and every finding's line
  is inside the input.
- (--differential) the default engine, the literal Set that stands in for a thrashing RE2 Set, and
  the literal-gated stdlib path all find exactly what the per-pattern reference path finds. Seed it
  with real log lines (a corpus dir of fixture excerpts) so that mutations keep hitting rules.
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
    from llmtriage.engine.logparse import (TracebackParser, decode_line, iter_blocks, match_view, normalise_text,
                                    split_prefix)

ENGINE = None
OTHERS: list = []      # (name, engine) compared with ENGINE under --differential


def _key(rep):
    return [(f.rule_id, f.line, f.count, f.last_line, sorted(f.captures.items())) for f in rep.findings]


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
        for name, other in OTHERS:
            if _key(scan_source(other, raw, name="fuzz")) != _key(rep):
                raise AssertionError(f"the {name} engine disagrees with the reference path")


def main() -> None:
    global ENGINE
    argv = [a for a in sys.argv if a not in ("--engine", "--differential")]
    if "--engine" in sys.argv or "--differential" in sys.argv:
        from llmtriage import get_engine

        ENGINE = get_engine()
    if "--differential" in sys.argv:
        from llmtriage import load_rules
        from llmtriage.engine.re2set import LiteralSet

        rules = load_rules()
        ENGINE = get_engine(rules, mode="reference")
        default, literal = get_engine(rules), get_engine(rules)
        literal.set = LiteralSet(literal.patterns, literal.literal_index())     # the thrash fallback answers every block
        literal.inexact = set(range(len(literal.patterns)))
        OTHERS.extend([("default", default), ("literal-set", literal), ("python", get_engine(rules, mode="python"))])
    atheris.Setup(argv, _check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
