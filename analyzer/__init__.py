"""llmtriage: name the root cause of a crashed LLM training or inference job from its log.

Public, stable API::

    import llmtriage
    report = llmtriage.analyze("crash.log")          # or a Path, bytes, log text, a binary file object
    report.findings[0].category, report.findings[0].message, report.to_dict()

`triage` is the same function. Nothing here imports torch or transformers.
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Optional, Union

from llmtriage.errors import EmptyInputError, InputError, LlmtriageError, RuleLoadError
from llmtriage.findings import ExceptionInfo, Finding, Frame, Report, reports_to_dict

if TYPE_CHECKING:
    from llmtriage.engine.matcher import Engine   # deferred: the engine loads with the first scan

from llmtriage.version import __version__
__all__ = ["analyze", "triage", "scan_source", "get_engine", "default_observers", "load_rules", "Report", "Finding", "ExceptionInfo", "Frame", "Engine",
           "LlmtriageError", "InputError", "RuleLoadError", "reports_to_dict", "__version__"]

Source = Union[str, bytes, os.PathLike, BinaryIO]
# engines by configuration, the most recently used last; bounded: each holds its compiled patterns and literal
# index (~10 MB), and a caller that varies `disabled` per call (leave-one-rule-out: one engine per rule) must not
# keep hundreds of them alive
_ENGINES: dict[tuple, Any] = {}
_MAX_ENGINES = 8
_SNIFF = 8192


def load_rules(extra_dirs: Iterable[Union[str, os.PathLike]] = (), *, use_cache: bool = True, details: bool = True):
    """The built-in rules plus `extra_dirs`, validated (raises RuleLoadError listing every problem).
    `details=False` (the engines made by `get_engine`): each rule's `examples` and the `locales` stay
    unparsed in the rule cache until `RuleSet.load_details()` or the first use of `locales`."""
    from llmtriage.ruleset.loader import load_ruleset   # deferred: `import llmtriage` stays light (pre-commit start-up)

    rs = load_ruleset(tuple(extra_dirs), use_cache=use_cache)
    return rs.load_details() if details else rs


def default_observers() -> list[Callable[[Any], Any]]:
    """The block observers every engine made here gets: metric, phase and throughput detectors and
    thread dumps (`llmtriage.detect.observers.FACTORIES`); the verdict is added after them."""
    from llmtriage.detect.observers import FACTORIES   # deferred: the detectors load with the first engine

    return list(FACTORIES)


def get_engine(rules: Any = None, *, lang: Optional[str] = None, mode: str = "auto",
               disabled: Iterable[str] = (), observers: Iterable[Callable[[Any], Any]] = (),
               **tuning: Any) -> "Engine":
    """An engine wired with the detectors: `default_observers()`, then `observers`, then the verdict.
    `rules`: None or a list of extra rule folders (engines cached per process), or a RuleSet.
    `tuning`: Engine options (set_mem, thrash_hits) for tests and benchmarks."""
    if rules is None or isinstance(rules, (list, tuple)):
        extra = tuple(str(d) for d in (rules or ()))
        key: tuple = ("dirs", extra, lang, mode, tuple(sorted(disabled)), tuple(observers), tuple(sorted(tuning.items())))
        eng = _ENGINES.pop(key, None)
        if eng is None:
            eng = _wired(load_rules(extra, details=False), lang, mode, disabled, observers, tuning)
            while len(_ENGINES) >= _MAX_ENGINES:
                del _ENGINES[next(iter(_ENGINES))]      # the least recently used
        _ENGINES[key] = eng
        return eng
    return _wired(rules, lang, mode, disabled, observers, tuning)


def _wired(ruleset: Any, lang: Optional[str], mode: str, disabled: Iterable[str],
           observers: Iterable[Callable[[Any], Any]], tuning: dict[str, Any]) -> "Engine":
    from llmtriage.detect.observers import VerdictObserver   # deferred: as above
    from llmtriage.engine.matcher import Engine   # deferred: the engine loads with the first scan
    from llmtriage.engine import redact   # deferred: as above

    if getattr(ruleset, "secrets", None):
        redact.install(ruleset.secrets)      # the credential catalogue every renderer masks with
    return Engine(ruleset, lang=lang, mode=mode, disabled=frozenset(disabled),
                  observers=[*default_observers(), *observers, VerdictObserver], **tuning)


class _Prepend(io.RawIOBase):
    """A binary stream that replays `head` before reading the rest of `fh`."""

    def __init__(self, head: bytes, fh: BinaryIO):
        self._head = head
        self._fh = fh

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._head:
            if n < 0 or n >= len(self._head):
                out, self._head = self._head, b""
                if n < 0:
                    return out + self._fh.read()
                return out
            out, self._head = self._head[:n], self._head[n:]
            return out
        return self._fh.read(n)


def looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head:
        return True
    ctrl = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    if ctrl > len(head) * 0.05:
        return True
    try:
        head.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        if exc.start > len(head) - 4:
            return False
    try:
        head.decode("gb18030")
        return False
    except UnicodeDecodeError:
        pass
    bad = head.decode("utf-8", errors="replace").count("\ufffd")
    return bad > len(head) * 0.1


_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def _texty(ch: str) -> bool:
    o = ord(ch)
    return (ch in "\t\n\r" or 0x20 <= o < 0x7F or 0xA0 <= o < 0x530 or 0x2000 <= o < 0x2070
            or 0x2190 <= o < 0x2800 or 0x2E80 <= o < 0xA000 or 0xAC00 <= o < 0xD7B0 or 0xFF00 <= o < 0xFFF0)


def _plausible(head: bytes, enc: str) -> bool:
    """`head` decodes in `enc` to text a log would hold (90% ASCII, Latin, CJK, box drawing..., and
    at least a fifth ASCII, newlines included): random bytes that happen to start with a BOM, or
    ASCII read two bytes at a time (CJK-looking code points, never ASCII), do not."""
    unit = 4 if "32" in enc else 2
    try:
        text = head[:len(head) - len(head) % unit].decode(enc)
    except UnicodeDecodeError:
        return False
    text = text.lstrip("\ufeff")
    return (bool(text) and sum(map(_texty, text)) >= 0.9 * len(text)
            and sum(ch < "\x80" for ch in text) >= 0.2 * len(text))


def wide_encoding(head: bytes) -> Optional[str]:
    """"utf-16-le/be" or "utf-32-le/be" when `head` is such text (PowerShell's `>` writes UTF-16LE
    with a BOM; other tools without one), else None. Without a BOM: the NUL bytes of ASCII-range
    characters sit at fixed positions, and the head must decode."""
    for bom, enc in _BOMS:
        if head.startswith(bom) and _plausible(head, enc):
            return enc
    n = len(head) - len(head) % 4
    if n < 8:
        return None
    zeros = [0, 0, 0, 0]
    for i in range(n):
        if head[i] == 0:
            zeros[i % 4] += 1
    q = n / 4
    cands = []
    if zeros[0] < q * 0.05 and min(zeros[1:]) > q * 0.6:
        cands.append("utf-32-le")
    if zeros[3] < q * 0.05 and min(zeros[:3]) > q * 0.6:
        cands.append("utf-32-be")
    if zeros[0] + zeros[2] < q * 0.1 and zeros[1] + zeros[3] > q * 0.8:
        cands.append("utf-16-le")
    if zeros[1] + zeros[3] < q * 0.1 and zeros[0] + zeros[2] > q * 0.8:
        cands.append("utf-16-be")
    for enc in cands:
        if _plausible(head[:n], enc):
            return enc
    return None


class _Transcode(io.RawIOBase):
    """A binary stream of UTF-8 decoded incrementally from `fh` in a wide encoding."""

    def __init__(self, fh: Any, encoding: str):
        import codecs   # deferred: only for UTF-16/32 input

        self._fh = fh
        self._dec = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._buf = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        while not self._eof and (n < 0 or len(self._buf) < n):
            chunk = self._fh.read(1 << 16)
            text = self._dec.decode(chunk or b"", final=not chunk)
            self._buf += text.lstrip("\ufeff").encode("utf-8", "surrogateescape") if text else b""
            self._eof = not chunk
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


def checked_stream(fh: BinaryIO, name: str) -> BinaryIO:
    """Wrap `fh` after checking its first bytes: raises InputError on empty or binary input.

    UTF-16/UTF-32 logs are transcoded to UTF-8 (the returned stream's `source_encoding` says
    which), and a run of NUL bytes at the start (a preallocated or truncated file) is skipped, so
    the sniff looks at the text beyond it."""
    head = fh.read(_SNIFF)
    if not head:
        raise EmptyInputError(f"{name}: empty input (no log lines to triage)")
    wide = wide_encoding(head)
    if wide is not None:
        stream: Any = _Transcode(_Prepend(head, fh), wide)
        stream.source_encoding = wide
        head = stream.read(_SNIFF)
        if not head:
            raise EmptyInputError(f"{name}: empty input (no log lines to triage)")
        fh = stream
    elif head[:1] == b"\x00":
        head = head.lstrip(b"\x00")
        while not head:
            chunk = fh.read(1 << 16)
            if not chunk:
                raise InputError(f"{name}: looks like a binary file, not a text log (only NUL bytes)")
            head = chunk.lstrip(b"\x00")
        if len(head) < _SNIFF:
            head += fh.read(_SNIFF - len(head))
    if looks_binary(head):
        raise InputError(f"{name}: looks like a binary file, not a text log (NUL or control bytes at the start)")
    out = _Prepend(head, fh)
    out.source_encoding = wide      # type: ignore[attr-defined]
    return out  # type: ignore[return-value]


def _scan(engine: Any, fh: BinaryIO, label: str) -> Report:
    stream = checked_stream(fh, label)
    report = engine.scan(stream, label)
    enc = getattr(stream, "source_encoding", None)
    if enc:
        report.encoding = enc
    return report


def analyze(source: Source, *, rules: Any = None, lang: Optional[str] = None, name: Optional[str] = None,
            mode: str = "auto", disabled: Iterable[str] = ()) -> Report:
    """Triage one log. `source`: a path (str without newline that exists, or PathLike), log text (str),
    bytes, or a binary file object. `rules`: a RuleSet, or a list of extra rule folders.
    Raises InputError for an unreadable, empty or binary input and RuleLoadError for bad rules."""
    engine = get_engine(rules, lang=lang, mode=mode, disabled=disabled)
    return scan_source(engine, source, name=name)


def scan_source(engine: Any, source: Source, *, name: Optional[str] = None) -> Report:
    """Run a compiled engine over one source (see `analyze` for the accepted kinds)."""
    if isinstance(source, (bytes, bytearray)):
        return _scan(engine, io.BytesIO(bytes(source)), name or "-")
    if isinstance(source, str) and ("\n" in source or not source or not os.path.isfile(source)):
        if source and "\n" not in source and (os.sep in source or source.endswith((".log", ".txt", ".out", ".err"))):
            raise InputError(f"{source}: no such file")
        return _scan(engine, io.BytesIO(source.encode("utf-8", "surrogateescape")), name or "-")
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        label = name or str(source)
        try:
            fh = open(path, "rb")
        except IsADirectoryError:
            raise InputError(f"{label}: is a directory, not a log file") from None
        except OSError as exc:
            raise InputError(f"{label}: cannot open: {exc.strerror}") from None
        with fh:
            return _scan(engine, fh, label)
    return _scan(engine, source, name or "-")


triage = analyze


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from llmtriage.engine.matcher import Engine   # deferred: the engine loads with the first scan

        return Engine
    raise AttributeError(name)
