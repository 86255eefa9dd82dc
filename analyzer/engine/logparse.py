"""Reading and normalising raw logs (layer 0: knows nothing about rules).

- `iter_blocks` streams binary input in ~64 KiB blocks cut at a newline, forcing a cut at
  MAX_LINE so memory stays O(block + MAX_LINE) whatever the input.
- `match_view` gives the bytes the matcher scans: ANSI escapes removed and `\\r` turned into
  `\\n` (each tqdm redraw becomes its own segment); line numbers are counted on the same bytes
  before the `\\r` translation, so they always point at the original input's lines.
- `decode_line` never fails (UTF-8, then GB18030, then UTF-8 with replacement).
- `split_prefix` recognises rank / host / timestamp prefixes.
- `TracebackParser` extracts Python tracebacks (chained, rank-interleaved, with C++ frames).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator, Optional

from llmtriage.engine.quoted import mask as mask_quoted
from llmtriage.findings import ExceptionInfo, Frame

BLOCK = 64 * 1024
MAX_LINE = 1024 * 1024
EVIDENCE_CAP = 16 * 1024

# An OSC sequence (`ESC ] ... BEL`) never spans a newline: eating one would shift every line number after it.
_ANSI_B = re.compile(rb"\x1b(?:\[[0-9;?<=>]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_ANSI_S = re.compile(r"\x1b(?:\[[0-9;?<=>]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def iter_blocks(fh: BinaryIO, block: int = BLOCK, max_line: int = MAX_LINE) -> Iterator[tuple[bytes, bool]]:
    """Yield (chunk, forced) where chunk ends at a newline unless forced (a line longer than
    max_line was cut) or it is the end of input."""
    # The unfinished tail is kept as a list of pieces joined once (linear on a 200 MB line), and a
    # block that already ends at a newline is yielded as read, without a copy.
    pend: list[bytes] = []
    plen = 0
    read = fh.read
    while True:
        data = read(block)
        if not data:
            break
        cut = data.rfind(b"\n")
        if cut < 0:
            pend.append(data)
            plen += len(data)
            if plen >= max_line:
                yield b"".join(pend), True
                pend = []
                plen = 0
            continue
        cut += 1
        if pend:
            pend.append(data[:cut])
            yield b"".join(pend), False
        else:
            yield (data if cut == len(data) else data[:cut]), False
        if cut < len(data):
            pend = [data[cut:]]
            plen = len(data) - cut
        else:
            pend = []
            plen = 0
    if pend:
        yield b"".join(pend), False


def strip_ansi_bytes(chunk: bytes) -> bytes:
    return _ANSI_B.sub(b"", chunk) if b"\x1b" in chunk else chunk


# Full-width ASCII forms (U+FF01-U+FF5E) and the ideographic space (U+3000), as zh_CN/ja locales print them
# ("第 41 行： 2183377 已杀死", "段错误（核心已转储）", "RuntimeError："), folded to ASCII so that one pattern
# with ':' or '(' matches both; never a newline, so line numbers stay.
_FULLWIDTH_B = re.compile(rb"\xef\xbc[\x81-\xbf]|\xef\xbd[\x80-\x9e]|\xe3\x80\x80")
_FULLWIDTH_MAP = {chr(cp).encode(): (chr(cp - 0xFEE0) if cp != 0x3000 else " ").encode()
                  for cp in [*range(0xFF01, 0xFF5F), 0x3000]}


def fold_fullwidth(chunk: bytes) -> bytes:
    """`chunk` with full-width punctuation, digits and letters turned into their ASCII forms."""
    if b"\xef\xbc" in chunk or b"\xef\xbd" in chunk or b"\xe3\x80\x80" in chunk:
        return _FULLWIDTH_B.sub(lambda m: _FULLWIDTH_MAP[m.group()], chunk)
    return chunk


def match_view(chunk: bytes) -> tuple[bytes, bytes]:
    """(lines, view): `lines` has ANSI removed and full-width forms folded to ASCII (newlines intact,
    used for line numbers); `view` is the same length with every `\\r` turned into `\\n` (used for
    matching). Training samples and rollouts the job printed are blanked in both (see engine.quoted)."""
    lines = fold_fullwidth(mask_quoted(strip_ansi_bytes(chunk)))
    view = lines.replace(b"\r", b"\n") if b"\r" in lines else lines
    return lines, view


def decode_line(raw: bytes) -> tuple[str, str]:
    """(text, encoding) — never raises."""
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("gb18030"), "gb18030"
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), "utf-8-replace"


def normalise_text(text: str) -> str:
    """ANSI stripped, `\\r` bars reduced to their last non-empty state, trailing space removed."""
    if "\x1b" in text:
        text = _ANSI_S.sub("", text)
    if "\r" in text:
        parts = [p for p in text.split("\r") if p.strip()]
        text = parts[-1] if parts else ""
    return text.rstrip()


# Prefixes a launcher or logger puts before the message. Applied repeatedly (host, then rank, then time).
_PREFIX = re.compile(
    r"""^\s*(?:
        \[(?:rank|RANK|Rank)\s*(?P<rank>\d{1,6})\]\s*:?\s*                 # torchrun --tee / torch 2.x "[rank3]:"
      | \[default(?P<local>\d{1,4})\]\s*:\s*                               # torchrun --tee "[default0]:"
      | (?P<srun>\d{1,6}):\s(?=\S|\s{1,11}\S)                               # srun -l "0: ", "0:   File ..." (indent kept)
      | (?P<host>[A-Za-z][A-Za-z0-9_.]*-[A-Za-z0-9_.-]*\d|[a-z][a-z_]*\d+):\s(?=\s{0,11}\S)   # pdsh/deepspeed "node-12: "
      | \[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?\s*(?:\|\s*)?   # ISO time
      | \[\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s*                                   # [12:01:02]
      | (?P<xip>\d{1,3}(?:\.\d{1,3}){3})\s\[(?P<xord>\d{1,4})\]\s(?=\s{0,11}\S)   # torch_xla xla_dist "10.128.0.33 [3] " (after its time)
      | \d{1,3}\.\d\d\.\d{3}\.\d{3}\s[DIWE]\s+(?:\[\d+\]\s)?                 # llama.cpp "0.44.011.931 I [49457] "
      | (?P<svc>[A-Za-z][\w.-]*[-_]\d{1,3})\s+\|\s?                            # docker compose "sglang-gemma-1  | "
      | [IWEF]\d{4}\s\d\d:\d\d:\d\d\.\d+\s+\d+\s[\w.]+:\d+\]\s*             # glog "I0501 12:00:00.123 123 x.cc:12]"
      | (?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s\d\d:\d\d:\d\d(?:\.\d+)?\s+\[?[\w./-]+:\d+\]\s?
                                                                           # vLLM "ERROR 06-02 08:03:44 [core.py:200] " (older: no "[")
      | \((?:[A-Za-z_][\w.-]*,?\s+)?(?:(?:rank|tp_rank|local_rank)=(?P<prank>\d{1,6}),?\s+)?pid=\d+(?:,\s*ip=[\w.:-]+)?\)\s?
                                                                           # Ray / vLLM process "(VllmWorker rank=0 pid=12, ip=10.0.0.3) ",
                                                                           # SkyPilot "(head, rank=0, pid=4773) "
    )""",
    re.VERBOSE,
)


@dataclass
class Prefix:
    rank: Optional[int] = None
    host: Optional[str] = None
    text: str = ""          # the line without its prefixes


def split_prefix(line: str) -> Prefix:
    out = Prefix()
    rest = line
    for _ in range(6):
        m = _PREFIX.match(rest)
        if not m or m.end() == 0:
            break
        g = m.groupdict()
        if g["rank"] is not None and out.rank is None:
            out.rank = int(g["rank"])
        elif g["local"] is not None and out.rank is None:
            out.rank = int(g["local"])
        elif g["srun"] is not None and out.rank is None:
            out.rank = int(g["srun"])
        elif g["prank"] is not None and out.rank is None:
            out.rank = int(g["prank"])
        elif g["host"] is not None and out.host is None:
            out.host = g["host"]
        elif g["xip"] is not None and out.host is None:
            out.host, out.rank = g["xip"], int(g["xord"]) if out.rank is None else out.rank
        elif g["svc"] is not None and out.host is None:
            out.host = g["svc"]
        rest = rest[m.end():]
    out.text = rest
    return out


# ------------------------------------------------------------------------ tracebacks

_TB_START = "Traceback (most recent call last)"
_IGNORED = "Exception ignored in"
_THREAD = "Exception in thread "      # threading's excepthook: a background thread died, the process goes on
# Ray's wrapper of a remote task's or actor's failure ("RayActorError: The actor died because of an error raised in
# its creation task, ray::LLMRayActor.__init__() (pid=42301, ip=...)"): the remote traceback's frames and its own
# exception follow with no "Traceback" header of their own
_RAY_REMOTE = re.compile(r"\bray::[\w.<>]+\(\) \(pid=\d+")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?')
# IPython / Jupyter frames: "File ~/env/lib/python3.11/site-packages/x/save.py:824, in f(a, b)",
# "Cell In[12], line 1"; its source lines are numbered, the current one behind an arrow ("--> 824 ...")
_IPY_FRAME = re.compile(r"^(?:File (?P<file>[^\s\"][^,]*?):(?P<line>\d+), in (?P<func>[\w.<>]+)|Cell In ?\[\d*\], line (?P<cell>\d+))")
# IPython 7 frames (Colab, Kaggle): "/usr/local/lib/python3.11/dist-packages/x/save.py in f(a, b)",
# "/tmp/ipykernel_36/2291774410.py in <cell line: 0>()", "<ipython-input-5-1a2b> in <module>"; no line number
_IPY7_FRAME = re.compile(r"^(?P<file>(?:/|~|[A-Za-z]:\\)[^\s\"]*?\.py|<ipython-input-[\w-]+>) in (?P<func>[\w.]+|<[\w :]+>)(?:\(|\s*$)")
_IPY_SOURCE = re.compile(r"^-*> ?\d+ ")
# rich's traceback panel (typer / lighteval / accelerate CLIs): frames "│ /x/site-packages/y.py:144 in f   │" (a long
# function name wraps to the next row), source rows "│ ❱ 144 │   code   │", borders "╭─ Traceback ... ─╮" / "╰──╯"
_RICH_FRAME = re.compile(r"^│ (?P<file>(?:/|~|[A-Za-z]:\\|\.{1,2}[/\\])[^\s\"│]*?\.py):(?P<line>\d+) in ?(?P<func>[\w.<>]*)\s*│?\s*$")
_RICH_SOURCE = re.compile(r"^│\s*❱\s*\d+\s*(?P<code>.*?)\s*│?\s*$")
# pytest's report of a failed test or collection error: a section header "____ test_x ____" ("____ ERROR collecting
# tests/x.py ____"), frames "tests/x.py:34: in test_x" (--tb=short) or a location line "tests/x.py:34: " /
# "pkg/y.py:12: RuntimeError" under the source (--tb=long), and the exception on a line that starts with "E   "
_PYTEST_HEAD = re.compile(r"^_{3,} (?:ERROR (?:collecting|at setup of|at teardown of) )?[\w./\\:\[\]<>()-][^\n]{0,300}? _{3,}$")
_PYTEST_FRAME = re.compile(r"^(?P<file>[^\s:\"'<>|]+\.py):(?P<line>\d+): in (?P<func>[\w.<>]+)\s*$")
_PYTEST_LOC = re.compile(r"^(?P<file>[^\s:\"'<>|]+\.py):(?P<line>\d+):(?: (?P<type>[A-Za-z_][\w.]*))?\s*$")
_PYTEST_E = re.compile(r"^E {1,12}(?=\S)")
_CHAIN = re.compile(r"During handling of the above exception|The above exception was the direct cause")
_EXC = re.compile(r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Warning|Failure|Fault|Timeout|Iteration)\w*|[A-Z]\w*Error\w*|Exception)(?::\s?(?P<msg>.*))?$")
# a frameless "traceback" ends in `Type: message` (a word and a colon alone, `Extracted:`, is output, not an exception)
# after a frameless "Traceback" header: an exception's name is a class (CamelCase) or dotted
# (socket.timeout), never a logger's lower-case prefix ("wandb: View run ...")
_EXC_BARE = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+): \S")
# a printed or quoted "Traceback (most recent call last)" (`print("Traceback ...")`, a sample) starts nothing
_QUOTED_TB = re.compile(r"""["'`“「]\s*$|\bprint\(\s*$""")
# Exception classes named otherwise, after the frames of a traceback: `pyarrow.lib.ArrowInvalid`,
# `ArrowInvalid`, `cv2.error`, `socket.timeout`; not a logger's `INFO:`, `wandb:` or `x.api: [WARNING]`.
_EXC_OTHER = re.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z][a-z0-9]+[A-Z]\w*|(?:[A-Za-z_]\w*\.)+[A-Z][a-z]\w*"
                        r"|(?:[A-Za-z_]\w*\.)+(?:error|timeout|gaierror|herror))(?::\s?(?P<msg>(?!\[[A-Z]+\]).*))?$")
_RANK_BEFORE_TB = re.compile(r"\[rank\s*\d+\]:?\s*$", re.IGNORECASE)
_CPP = re.compile(r"^(?:Exception raised from |frame #\d+:)")
# Library frames: never "your code". Cython modules (.pyx) and frozen/built-in modules are libraries too.
_LIBRARY = re.compile(r"(?:site-packages|dist-packages|/lib(?:64)?/python\d|<frozen |<built-in|\\lib\\|/usr/lib/"
                      r"|\.(?:pyx|pxi|pxd|so)$)")
BENIGN_EXC = {"KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopIteration"}
# torchrun's agent turns the user's Ctrl-C into "SignalException: Process N got signal: 2": the same interrupt
_SIGINT_EXC = re.compile(r"got signal: (?:2|SIGINT)\s*$")


def is_benign(exc: "ExceptionInfo") -> bool:
    """An exit that is no failure of its own: Ctrl-C (KeyboardInterrupt, or torchrun's SignalException for
    SIGINT), SystemExit, a generator or iterator ending."""
    short = exc.type.rsplit(".", 1)[-1]
    return short in BENIGN_EXC or (short == "SignalException" and bool(_SIGINT_EXC.search(exc.message)))


@dataclass
class _TB:
    start: int
    frames: list[Frame] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    last_frame_line: int = 0
    chain_omitted: int = 0
    ignored: bool = False       # after "Exception ignored in: ...": Python reported it and went on
    thread: bool = False        # after "Exception in thread X:": raised in a background thread
    remote: bool = False        # the remote part of a Ray wrapper's message: only frames may open it
    pytest: bool = False        # a pytest failure section: its frames and "E   XError: ..." line
    # links a handler raised anew after: (line, the link's frames); a link whose frames hold this
    # traceback's innermost frame is a wrapper re-raising in its own except block, not a fallback
    handled: list[tuple[int, frozenset[tuple[str, str]]]] = field(default_factory=list)


CHAIN_KEEP = 8          # a chain keeps its first and last CHAIN_KEEP exceptions, and counts the rest
FRAMES_KEEP = 32        # only the most recent exceptions keep their frames (user_frame always stays)


def chain_add(chain: list[str], omitted: int, headline: str) -> tuple[list[str], int]:
    """`chain` + [headline], bounded to the first and last CHAIN_KEEP entries (O(CHAIN_KEEP) per
    exception, so 10^5 chained exceptions parse in linear time)."""
    if len(chain) < 2 * CHAIN_KEEP:
        return chain + [headline], omitted
    return chain[:CHAIN_KEEP] + chain[CHAIN_KEEP + 1:] + [headline], omitted + 1


def _fallbacks(tb: _TB) -> list[int]:
    """Lines of the handled links this traceback's exception was a fallback's failure after: it was
    raised below the handler (audioread's NoBackendError under librosa's except), not by the handler
    itself (an except block that re-raises with another message has its innermost frame in the link)."""
    if not tb.frames:
        return []
    inner = (tb.frames[-1].file, tb.frames[-1].function)
    return [line for line, frames in tb.handled if inner not in frames]


class TracebackParser:
    """Feed (line_no, text) of normalised lines; collects every final exception.

    Tracebacks are tracked per stream (rank or host) so interleaved ranks don't mix. Only lines
    inside a traceback are kept, so memory is bounded by the longest traceback (frames capped).
    """

    MAX_FRAMES = 200
    MAX_GAP = 400

    def __init__(self) -> None:
        self._open: dict[object, _TB] = {}
        self._pending_chain: dict[object, tuple[list[str], int, int, list[tuple[int, frozenset[tuple[str, str]]]]]] = {}
        self._last_exc: dict[object, ExceptionInfo] = {}
        self._ignored: dict[object, int] = {}
        self._thread: dict[object, int] = {}
        self._pytest_exc: dict[object, ExceptionInfo] = {}     # a pytest exception, its location line may follow
        self.ignored_lines: set[int] = set()      # the last lines of tracebacks Python ignored (bounded)
        self.exceptions: list[ExceptionInfo] = []

    @property
    def active(self) -> bool:
        return bool(self._open) or bool(self._last_exc)

    def feed(self, line_no: int, raw_text: str) -> None:
        pre = split_prefix(raw_text)
        if pre.rank is None and _TB_START in raw_text:
            # a progress bar with no newline before a rank's traceback ("...2/2 [00:02<00:00][rank0]: Traceback"):
            # the header belongs to the rank whose prefix stands just before it, as its frames do
            m = _RANK_BEFORE_TB.search(raw_text, 0, raw_text.find(_TB_START))
            if m is not None:
                pre = split_prefix(raw_text[m.start():])
        key = pre.rank if pre.rank is not None else pre.host
        text = pre.text
        if _IGNORED in text:
            self._ignored[key] = line_no
        if _THREAD in text:
            self._thread[key] = line_no
        if _TB_START in text and not _QUOTED_TB.search(text[:text.find(_TB_START)]):
            ign = self._ignored.pop(key, None)
            thr = self._thread.pop(key, None)
            chain: list[str] = []
            omitted = 0
            handled: list[tuple[int, frozenset[tuple[str, str]]]] = []
            pend = self._pending_chain.pop(key, None)
            if pend and line_no - pend[1] < 10:
                chain, omitted, handled = pend[0], pend[2], pend[3]
            self._open[key] = _TB(start=line_no, chain=chain, last_frame_line=line_no, chain_omitted=omitted,
                                  handled=handled,
                                  ignored=ign is not None and line_no - ign <= 2,
                                  thread=thr is not None and line_no - thr <= 2)
            self._last_exc.pop(key, None)
            return
        if key not in self._open and _PYTEST_HEAD.match(text.strip()):
            self._open[key] = _TB(start=line_no, last_frame_line=line_no, pytest=True)
            self._pytest_exc.pop(key, None)
            return
        pyexc = self._pytest_exc.get(key)
        if pyexc is not None:
            loc = _PYTEST_LOC.match(text.strip())
            if loc is not None and line_no - pyexc.line <= 8:
                # --tb=long: the innermost frame's location comes after the "E   " lines
                if not pyexc.frames or (pyexc.frames[-1].file, pyexc.frames[-1].line) != (loc["file"], int(loc["line"])):
                    pyexc.frames = [*pyexc.frames, Frame(file=loc["file"], line=int(loc["line"]), function="?")]
                    if not _LIBRARY.search(loc["file"]):
                        pyexc.user_frame = pyexc.frames[-1]
                self._pytest_exc.pop(key, None)
                return
            if line_no - pyexc.line > 8:
                self._pytest_exc.pop(key, None)
        exc_prev = self._last_exc.get(key)
        if exc_prev is not None:
            stripped = text.strip()
            if _CPP.match(stripped):
                if len(exc_prev.cpp_frames) < 64:
                    exc_prev.cpp_frames.append(stripped[:300])
                return
            if _CHAIN.search(text):
                chain, omitted = chain_add(exc_prev.chain, exc_prev.chain_omitted, exc_prev.headline[:500])
                # "During handling": the handler (a fallback) failed anew; "direct cause": a wrapper re-raised
                handled = [(n, frozenset()) for n in exc_prev.handled]
                if "During handling" in text and exc_prev.frames:
                    handled.append((exc_prev.line, frozenset((f.file, f.function) for f in exc_prev.frames)))
                self._pending_chain[key] = (chain, line_no, omitted, handled[-CHAIN_KEEP:])
                self._last_exc.pop(key, None)
                if self.exceptions and self.exceptions[-1] is exc_prev:
                    self.exceptions.pop()
                return
            if line_no - exc_prev.line > 60:
                self._last_exc.pop(key, None)
        tb = self._open.get(key)
        if tb is None:
            # idle keys expire
            return
        if line_no - tb.last_frame_line > self.MAX_GAP:
            del self._open[key]
            return
        if text[:1] in "│╭╰":       # a rich traceback panel: its frames, the current source row, borders and the rest
            rm = _RICH_FRAME.match(text)
            if rm is not None and len(tb.frames) < self.MAX_FRAMES:
                tb.frames.append(Frame(file=rm["file"], line=int(rm["line"]), function=rm["func"] or "?"))
            elif tb.frames and not tb.frames[-1].code and (sm := _RICH_SOURCE.match(text)) is not None:
                tb.frames[-1].code = sm["code"].replace("│", " ").strip()[:300]
            tb.last_frame_line = line_no
            return
        m = _FRAME.match(text) or _IPY_FRAME.match(text) or _IPY7_FRAME.match(text)
        if m is None and tb.pytest:
            m = _PYTEST_FRAME.match(text.strip())
            loc = _PYTEST_LOC.match(text.strip()) if m is None else None
            if loc is not None:       # --tb=long: the location of a frame whose source was printed above it
                tb.frames.append(Frame(file=loc["file"], line=int(loc["line"]), function="?"))
                tb.last_frame_line = line_no
                return
        if m:
            if len(tb.frames) >= self.MAX_FRAMES:
                tb.frames.pop(0)
            cell = m.groupdict().get("cell")
            tb.frames.append(Frame(file=m["file"] or "<cell>", line=int(cell or m.groupdict().get("line") or 0),
                                   function=(m["func"] or "<module>").strip()))
            tb.last_frame_line = line_no
            return
        stripped = text.strip()
        if not stripped:
            return
        if tb.remote and not tb.frames:      # a Ray wrapper with no remote frames after it: nothing more to read
            del self._open[key]
            return
        if _IPY_SOURCE.match(stripped):          # the current line of an IPython frame (its context lines came first)
            if tb.frames:
                tb.frames[-1].code = stripped.split(None, 2)[-1][:300]
            tb.last_frame_line = line_no
            return
        if text[:1] in (" ", "\t") or stripped.startswith(("^", "~", "...")) or "frames]" in stripped:
            # source line under a frame, caret markers, "[Previous line repeated N more times]"
            if tb.frames and not tb.frames[-1].code and not stripped.startswith(("^", "~")):
                tb.frames[-1].code = stripped[:300]
            return
        if tb.pytest:
            if not _PYTEST_E.match(stripped):
                if stripped.startswith((">", "_ _")):     # the failing source line, a frame separator
                    tb.last_frame_line = line_no
                elif line_no - tb.last_frame_line > 60:    # a long source listing is fine; a section with no E line ends
                    del self._open[key]
                return
            stripped = stripped[1:].strip()
        em = _EXC.match(stripped)
        if em is None and tb.frames and not stripped.endswith(":"):   # `X raised:` + the real error next
            em = _EXC_OTHER.match(stripped)
        if (em or not tb.frames) and tb.ignored:
            # an exception in __del__ / a weakref callback / at interpreter exit: Python printed it
            # and carried on, so it is neither the crash nor its headline
            if len(self.ignored_lines) < 4096:
                self.ignored_lines.add(line_no)
            del self._open[key]
            return
        if em or (not tb.frames and _EXC_BARE.match(stripped)):
            typ = em["type"] if em else stripped.split(":", 1)[0][:120]
            msg = (em["msg"] or "") if em else (stripped.split(":", 1)[1].strip() if ":" in stripped else "")
            info = ExceptionInfo(type=typ, message=msg.strip()[:2000], line=line_no, rank=pre.rank,
                                 frames=tb.frames, chain=tb.chain, chain_omitted=tb.chain_omitted, thread=tb.thread,
                                 handled=_fallbacks(tb))
            # (a `<string>` frame is code made at run time: `python -c` is the user's own (`<module>`); a function in
            # one was generated by a library, a dataclass's __init__ calling __post_init__: never "your code")
            info.user_frame = next((f for f in reversed(tb.frames) if not _LIBRARY.search(f.file)
                                    and not (f.file == "<string>" and f.function != "<module>")), None)
            self.exceptions.append(info)
            if len(self.exceptions) > FRAMES_KEEP:      # frames are kept per report, not per exception
                old = self.exceptions[-FRAMES_KEEP - 1]
                old.frames = []
                old.cpp_frames = []
            if len(self.exceptions) > 2000:
                del self.exceptions[:1000]
            self._last_exc[key] = info
            if tb.pytest:
                self._pytest_exc[key] = info
            del self._open[key]
            if _RAY_REMOTE.search(msg):
                # the remote traceback follows the wrapper: its exception (the failure) is read as the next one
                chain, omitted = chain_add(info.chain, info.chain_omitted, info.headline[:500])
                self._open[key] = _TB(start=line_no, chain=chain, last_frame_line=line_no, chain_omitted=omitted,
                                      remote=True)
            return
        if tb.frames and not tb.frames[-1].code and line_no == tb.last_frame_line + 1:
            tb.frames[-1].code = stripped[:300]     # the source line right under a frame, its indent taken by a prefix
            return
        # An unexpected line (e.g. another logger) inside a traceback: tolerate a few.
        if line_no - tb.last_frame_line > 20:
            del self._open[key]

    def headline(self) -> Optional[ExceptionInfo]:
        """The last non-benign final exception, else the last one."""
        for exc in reversed(self.exceptions):
            if not is_benign(exc):
                return exc
        return self.exceptions[-1] if self.exceptions else None
