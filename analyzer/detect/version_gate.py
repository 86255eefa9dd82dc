"""Installed versions the log prints that make a failure a version mismatch (rules/versions.yaml).

A job's log often prints what is installed - `pip show`, `pip list`, "Successfully installed peft-0.4.0.dev0",
a framework banner "torch 2.0.1 | transformers 4.30.1 | accelerate 0.19.0", torch's collect_env
"[pip3] numpy==1.26.4", "Transformers version: 4.49.0". `VersionWatch` reads those lines for the packages
versions.yaml names while the log is read (the banner usually sits far above the error, out of the
verdict's window). After the verdict, `apply` uses them twice:

- rules: a recognised failure whose message only an outdated release raises (PEFT before 0.5 refusing to
  merge into any quantized base, accelerate before 0.20 refusing a quantized model spread over GPUs) is a
  version mismatch when the log shows that release; the rule id stays, the category changes, and a
  judgement records why.
- pairs: an error no rule explains (rule id `unknown`, also when a failure family or the nearest rule
  placed it), raised in or passing through the code of one of two packages the log shows at releases
  known not to work together (transformers >= 4.34 with peft < 0.5), is a version mismatch.

A line that names what is wanted rather than what is there ("requires transformers>=4.34", "pip install
peft==0.4.0", "upgrade to 4.46 or later") is skipped; the version shown last before the error counts.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.spec import tr
from llmtriage.findings import ExceptionInfo, Finding
from llmtriage.ruleset.datafiles import data_file

_FOLD = re.compile(r"[-_.]+")
_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)(.*)$")
_PRE = re.compile(r"[.-]?(?:dev|a|alpha|b|beta|c|rc|pre|preview)\d*")
_POST = re.compile(r"[.-]?(?:post|rev|r)\d")
# what a line wants rather than what is installed (before the name, on the same line)
_WANTED_BEFORE = re.compile(rb"(?i)requir|upgrad|downgrad|\binstall(?!ed)|\bpip\b[^\n]*\bdownload|at least|minimum|"
                            rb"\bsupport|\bneeds?\b|\bexpect|\bprefer|\brecommend|\btested|\bcompatible|\bwant")
# ... or right after the version ("4.46 or later", "2.3+", ">= ... and above")
_WANTED_AFTER = re.compile(rb"(?i)^[)\]'\"`]*\s*(?:or (?:later|newer|higher|above|greater)|and (?:above|later|newer|up)|\+(?!\w)|"
                           rb"is (?:required|needed|recommended)|required|needed|or above)")
_FRAME_PKG = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z]\w*)[/\\]")
_CAP = 4000     # version lines kept per log (a pip freeze printed in a loop)
_WORDISH = {bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyz0123456789_-./\\"}   # a name inside a path or a longer word


def norm(name: str) -> str:
    """A distribution name folded for comparison: case and `-`/`_`/`.` ("Flash-Attn" == "flash_attn")."""
    return _FOLD.sub("_", name.strip().lower())


def parse_version(text: str) -> Optional[tuple[int, ...]]:
    """A comparable key for a version string: the release padded to five parts, then -1 for a pre-release
    or dev build (before its release), 1 for a post release, 0 otherwise; a local tag ("+cu121") is
    ignored. None when it does not start with a number."""
    m = _RELEASE.match(text.strip().lower().split("+")[0])
    if not m:
        return None
    release = [int(p) for p in m.group(1).split(".")[:5]]
    rest = m.group(2)
    tag = -1 if _PRE.match(rest) else 1 if _POST.match(rest) else 0
    return (*release, *([0] * (5 - len(release))), tag)


def in_range(version: str, cond: dict[str, Any]) -> bool:
    """Whether `version` satisfies `cond` ({below: "0.5.0"} and/or {from: "4.34.0"})."""
    key = parse_version(version)
    if key is None:
        return False
    low, high = cond.get("from"), cond.get("below")
    if low is not None and key < (parse_version(str(low)) or ()):
        return False
    return not (high is not None and key >= (parse_version(str(high)) or ()))


def _spec() -> dict[str, Any]:
    return data_file("versions.yaml") or {}


def _name_pattern(spec: dict[str, Any]) -> bytes:
    names = {norm(p) for p in spec.get("packages", ())} | {norm(a) for a in (spec.get("aliases") or {})}
    alts = sorted((re.escape(n).replace("_", "[-_.]?") for n in names), key=len, reverse=True)
    return "|".join(alts).encode()


class VersionWatch:
    """The versions of versions.yaml's packages the log prints, with their lines (an observer: feed per block)."""

    is_version_watch = True

    def __init__(self, engine: Any = None) -> None:
        self.lang = getattr(engine, "lang", None)
        spec = _spec()
        self.aliases = {norm(k): norm(v) for k, v in (spec.get("aliases") or {}).items()}
        names = _name_pattern(spec)
        # "<name> 1.2", "<name>==1.2", "<name>: 1.2", "<name> version: 1.2", "<name>-1.2" (pip's installed list),
        # tried only where a name occurs (bytes.find on the lower-cased block: a traceback full of torch frames
        # costs one failed anchored match per frame)
        self._inline = re.compile(rb"(" + names + rb")[`'\"]?(?:\s*==\s*|\s*[:=]\s*|\s+version\s*[:=]?\s*|\s+v?(?=\d)|-(?=\d))"
                                  rb"v?(\d+\.\d+[\w.+!]*)")
        # pip show: "Name: peft" then "Version: 0.4.0"
        self._show = re.compile(rb"(?im)^\s*Name:\s*([\w.-]+)\s*\n\s*Version:\s*v?(\d+\.\d+[\w.+!]*)")
        spelled = {norm(p) for p in spec.get("packages", ())} | set(self.aliases)
        self._lits = sorted({v.encode() for n in spelled for v in (n, n.replace("_", "-"))})
        self.seen: dict[str, list[tuple[int, str]]] = {}
        self._kept = 0

    def _add(self, name: bytes, version: bytes, line: int) -> None:
        pkg = norm(name.decode("ascii", "replace"))
        pkg = self.aliases.get(pkg, pkg)
        if self._kept < _CAP:
            self.seen.setdefault(pkg, []).append((line, version.decode("ascii", "replace")))
            self._kept += 1

    def feed(self, lines: bytes, view: bytes, line_base: int) -> None:
        low = view.lower()
        done: set[int] = set()
        for lit in self._lits:
            pos = low.find(lit)
            while pos >= 0:
                if pos not in done and (pos == 0 or low[pos - 1:pos] not in _WORDISH):
                    done.add(pos)
                    m = self._inline.match(low, pos)
                    if m is not None:
                        self._take(view, m, line_base)
                pos = low.find(lit, pos + 1)
        if b"Version:" in view:
            for m in self._show.finditer(view):
                self._add(m.group(1), m.group(2), line_base + view.count(b"\n", 0, m.start(2)))

    def _take(self, view: bytes, m: "re.Match[bytes]", line_base: int) -> None:
        start = view.rfind(b"\n", 0, m.start()) + 1
        end = view.find(b"\n", m.end())
        if _WANTED_BEFORE.search(view, start, m.start()) or _WANTED_AFTER.match(view[m.end():end if end >= 0 else len(view)]):
            return
        self._add(m.group(1), m.group(2), line_base + view.count(b"\n", 0, m.start()))

    def finish(self, report: Any, findings: list[Finding]) -> None:
        return None

    def shown(self, pkg: str, before: int) -> Optional[tuple[int, str]]:
        """(line, version) of `pkg` shown last before line `before`, else the first shown after it, else None."""
        rows = self.seen.get(norm(pkg), ())
        earlier = [r for r in rows if r[0] < before]
        return earlier[-1] if earlier else (rows[0] if rows else None)

    def apply(self, findings: list[Finding], exceptions: list[ExceptionInfo], lang: Optional[str]) -> None:
        """Turn the findings the versions explain into dependency-mismatch (see the module's doc)."""
        if not self.seen:
            return
        spec = _spec()
        category = spec.get("category", "dependency-mismatch")
        for f in findings:
            # (an unknown its words already place in this category, detect/family.py, still takes the versions as its reason)
            if (f.severity != "error" or f.category == category and f.rule_id != "unknown"
                    or f.judgement and f.judgement.get("context") == "version-gate"):
                continue
            why = self._rule_gate(f, spec, lang) if f.rule_id != "unknown" else self._pair_gate(f, exceptions, spec, lang)
            if why:
                f.judgement = {"context": "version-gate", "severity_was": f.severity, "category_was": f.category,
                               "reason": why}
                f.category = category

    def _rule_gate(self, f: Finding, spec: dict[str, Any], lang: Optional[str]) -> str:
        for gate in (spec.get("rules") or {}).get(f.rule_id, ()):
            got = self.shown(gate["package"], f.line)
            if got is not None and in_range(got[1], gate):
                return tr(gate["reason"], lang, version=got[1], line=got[0], package=gate["package"])
        return ""

    def _pair_gate(self, f: Finding, exceptions: list[ExceptionInfo], spec: dict[str, Any], lang: Optional[str]) -> str:
        if f.role != "cause" or (f.confidence or "low") not in ("low", "medium"):
            return ""
        exc = next((e for e in exceptions if e.line == f.line), None)
        if exc is None:
            return ""
        # the packages whose code the error passed through, and those its words name
        ran = {norm(m.group(1)) for fr in exc.frames for m in [_FRAME_PKG.search(fr.file)] if m}
        ran = {self.aliases.get(p, p) for p in ran}
        words = f"{exc.type} {exc.message}".lower()
        for pair in spec.get("pairs", ()):
            a, b = pair["a"], pair["b"]
            if not ({norm(a["package"]), norm(b["package"])} & ran
                    or any(re.search(r"\b%s\b" % re.escape(p["package"]), words) for p in (a, b))):
                continue
            got_a, got_b = self.shown(a["package"], f.line), self.shown(b["package"], f.line)
            if got_a and got_b and in_range(got_a[1], a) and in_range(got_b[1], b):
                return tr(spec["pair_reason"], lang, a=a["package"], a_version=got_a[1], a_line=got_a[0],
                          b=b["package"], b_version=got_b[1], b_line=got_b[0])
        return ""
