"""Credential masking and terminal-safe text: the one choke point every renderer goes through.

`safe_reports(reports, terminal=...)` returns copies of the reports in which every string that
came from a log (finding message, evidence, captures, location; exception type, message, frames,
chain; the report's extra data and source) has its credentials masked, and, for output read on a
terminal or by the GitHub runner (human, github), its control characters neutralised.
`render.get_renderer` wraps every renderer with it, so no format can forget.

The catalogue of secret forms is data, `rules/secrets.yaml` (modelled on gitleaks' rule list and
detect-secrets' plugins), carried in the rule cache (`RuleSet.secrets`). Each entry is tried only
on text holding one of its keywords, in RE2 when available (linear time), and masks its `secret*`
groups (or the whole match). Mask first, cut after: `clip(text, n)`.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable

try:  # linear-time matching of the catalogue when google-re2 is installed
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

MASK = "***"
_CATALOGUE: list["_Entry"] = []
# C0 controls but \t and \n, DEL, C1 controls (8-bit CSI/OSC...), and the ESC that starts a sequence.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class _Entry:
    __slots__ = ("id", "regex", "keywords", "partial", "keep", "_rx")

    def __init__(self, spec: dict[str, Any]):
        self.id = spec["id"]
        self.regex = spec["regex"]
        self.keywords = tuple(k.lower() for k in spec.get("keywords") or ())
        self.partial = bool(spec.get("partial"))
        self.keep = int(spec.get("keep") or 0)
        self._rx: Any = None

    def compiled(self) -> Any:
        if self._rx is None:
            if _re2 is not None:
                opts = _re2.Options()
                opts.log_errors = False
                self._rx = _re2.compile(self.regex, opts)
            else:
                self._rx = re.compile(self.regex)
        return self._rx


def install(specs: Iterable[dict[str, Any]]) -> None:
    """Use `specs` (the entries of rules/secrets.yaml) as the catalogue."""
    _CATALOGUE[:] = [_Entry(s) for s in specs]


def _catalogue() -> list[_Entry]:
    if not _CATALOGUE:
        from llmtriage.ruleset.loader import load_ruleset   # deferred: the engine installs it; this is for a bare renderer

        install(load_ruleset().secrets)
    return _CATALOGUE


def _spans(entry: _Entry, text: str) -> list[tuple[int, int]]:
    out = []
    rx = entry.compiled()
    for m in rx.finditer(text):
        groups = [i for g, i in rx.groupindex.items() if g.startswith("secret")]
        spans = [m.span(g) for g in groups if m.group(g) is not None] if groups else [m.span()]
        out += [(a + min(entry.keep, b - a - 1) if b - a > entry.keep else a, b) for a, b in spans if b > a]
    return out


def redact(text: str, *, cut: bool = False) -> str:
    """`text` with every credential of the catalogue masked. `cut`: the text was truncated before
    we saw it, so what a cut secret leaves at its end is masked too."""
    if not text or not isinstance(text, str):
        return text
    low = text.lower()
    spans: list[tuple[int, int]] = []
    for e in _catalogue():
        if e.partial and not cut:
            continue
        if e.keywords and not any(k in low for k in e.keywords):
            continue
        spans += _spans(e, text)
    if not spans:
        return text
    spans.sort()
    out, pos = [], 0
    for a, b in spans:
        if b <= pos:
            continue
        a = max(a, pos)
        out.append(text[pos:a])
        out.append(MASK)
        pos = b
    out.append(text[pos:])
    return "".join(out)


def clip(text: str, n: int) -> str:
    """Mask, then cut to `n` characters (a secret is never cut in half and left readable)."""
    return redact(text)[:n]


def neutralise(text: str) -> str:
    """Control and escape sequences made visible and inert (ESC c, SI/SO charset switches, 8-bit
    CSI/OSC, BEL, backspace, carriage return): `\\x1b` is written as the four characters `\\x1b`."""
    if not isinstance(text, str) or not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


# Fields that carry text from the log, per output class (rule prose, ids and numbers are ours).
_LOG_FIELDS = {
    "Report": ("source", "findings", "exception", "extra"),
    "Finding": ("message", "evidence", "captures", "location", "source"),
    "ExceptionInfo": ("type", "message", "frames", "user_frame", "chain", "cpp_frames"),
    "Frame": ("file", "function", "code"),
}


def printable(text: str) -> str:
    """`text` writable as UTF-8: a lone surrogate (a file name that is not UTF-8, read with
    surrogateescape) becomes the escape `\\udce9` instead of failing the whole output."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clean(value: Any, terminal: bool) -> Any:
    if isinstance(value, str):
        value = printable(redact(value))
        return neutralise(value) if terminal else value
    if isinstance(value, list):
        return [_clean(v, terminal) for v in value]
    if isinstance(value, tuple):
        return tuple(_clean(v, terminal) for v in value)
    if isinstance(value, dict):
        return {k: _clean(v, terminal) for k, v in value.items()}
    names = _LOG_FIELDS.get(type(value).__name__)
    if names is not None and dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{n: _clean(getattr(value, n), terminal) for n in names})
    return value


def safe_reports(reports: list[Any], *, terminal: bool) -> list[Any]:
    """Copies of `reports` fit to print: credentials masked in every field that holds log text, and
    with `terminal` (human and GitHub output) control characters neutralised."""
    return [_clean(r, terminal) for r in reports]


def safe_data(obj: Any, *, terminal: bool = False) -> Any:
    """A JSON-like object (or report dataclasses) with the same treatment as `safe_reports`."""
    return _clean(obj, terminal)


_SGR = re.compile("\x1b\\[[0-9;]{0,32}m")


class SafeWriter:
    """A text stream for renderers that write log text directly (job, diff): each write has its
    credentials masked, its control characters neutralised except colour (SGR) codes, and lone
    surrogates escaped."""

    def __init__(self, out: Any):
        self._out = out

    def write(self, text: str) -> int:
        parts = _SGR.split(text)
        codes = _SGR.findall(text)
        safe = neutralise(redact(parts[0]))
        for code, part in zip(codes, parts[1:]):
            safe += code + neutralise(redact(part))
        return self._out.write(printable(safe))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


def catalogue_ids() -> list[str]:
    return [e.id for e in _catalogue()]
