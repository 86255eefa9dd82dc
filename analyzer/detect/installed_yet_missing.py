"""A package an error calls missing that the same log shows installed (rules/verdict.yaml `installed_yet_missing`).

transformers' `check_imports` (a model's remote code) and its availability checks report a package that
fails to import as "not found in your environment": flash_attn built against another torch (an undefined
symbol), transformers_stream_generator importing a name the installed transformers dropped. When the log
shows that very package installed before the error - pip's "Requirement already satisfied: X" or
"Successfully installed X-1.2", torch's collect_env "[pip3] X==1.2", `pip show X`, or a one-line
`import X; print(X.__version__)` that printed a version, "X version: 2.3.0", or a frame of a traceback
(parsed already) in site-packages/X/ - the package is there and its import fails against the installed stack: a version
mismatch, not a missing package. For "No module named 'X.sub'" only a submodule counts: the installed X
lacks it (a release older or newer than the code that imports it). Markers of kind `installed` record those
lines (detect/scanner.py); every package the finding names must be among them (after the error only pip's
"Requirement already satisfied": an install that succeeds afterwards means the package was missing).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.scanner import Scanner, markers
from llmtriage.detect.spec import tr
from llmtriage.findings import ExceptionInfo, Finding

_VERSION = re.compile(r"^\s*v?\d+\.\d+")
_FRAME_PKG = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z]\w*)[/\\]")
_VERSIONED = re.compile(r"-\d[\w.+!-]*$")
# a pin or a list row on a line that names what is wanted (a pip command, a requirement, a resolver
# complaint), not what is installed
_WANTED_LINE = re.compile(r"(?i)install|requirement|requires|required|satisf|could not find|no matching|conflict|depend|collect|download|build|error|fail")
_SPECIFIER = re.compile(r"[<>=!~\[;(]")


def norm(name: str) -> str:
    """A distribution or import name folded for comparison: case, `-`/`_`/`.`; "flash-attn" == "flash_attn"."""
    return re.sub(r"[-_.]+", "_", name.strip().lower())


def _installed_names(hit: tuple[int, str, str], scanner: Scanner, rx: Any) -> set[str]:
    """The packages one `installed` marker line shows, read with the marker's own named groups."""
    line, _, text = hit
    names = set()
    for m in rx.finditer(text.encode("utf-8", "replace")):
        g = {k: v.decode("utf-8", "replace") for k, v in m.groupdict().items() if v}
        if "pkgs" in g:     # "Successfully installed einops-0.8.0 flash-attn-2.5.9.post1": names without versions
            names.update(norm(_VERSIONED.sub("", tok)) for tok in g["pkgs"].split())
        elif "imp" in g:
            if _VERSION.match(scanner.line_text(line + 1)):     # the command printed a version: it imported
                names.add(norm(g["imp"]))
        elif ("pin" in g or "row" in g) and _WANTED_LINE.search(text):
            continue
        else:
            names.update(norm(v.split("==")[0]) for v in g.values())
    return names


def _frame_packages(exceptions: list[ExceptionInfo], before: int) -> set[str]:
    """Packages whose files ran in a traceback printed up to line `before` (site-packages/<pkg>/...)."""
    return {norm(m.group(1)) for e in exceptions if e.line <= before
            for fr in e.frames for m in [_FRAME_PKG.search(fr.file)] if m}


def installed_yet_missing(findings: list[Finding], exceptions: list[ExceptionInfo], scanner: Scanner,
                          spec: Optional[dict[str, Any]], lang: Optional[str]) -> None:
    if not spec or not any(spec["rules"].get(f.rule_id) for f in findings):
        return
    hits = scanner.hits.get("installed", ())
    rx = next(m.regex for m in markers() if m.kind == "installed") if hits else None
    named = [(h, _installed_names(h, scanner, rx)) for h in hits]
    for f in findings:
        how = spec["rules"].get(f.rule_id)
        pkg = f.captures.get(how["capture"], "") if how else ""
        if not pkg or f.severity != "error" or f.category == spec["category"]:
            continue
        if how.get("submodule") and f"{pkg}." not in f.evidence:
            continue        # (only a submodule the installed package lacks: the package itself may be another env's)
        # ("accelerate>=0.20.1": the package a version floor names)
        wanted = {norm(_SPECIFIER.split(p)[0]) for p in re.split(r"[,\s]+", pkg) if _SPECIFIER.split(p)[0]}
        # before the error any sign counts; after it only pip's "already satisfied" (an install that
        # succeeds after the error means the package was missing then)
        shown = [(h[0], names) for h, names in named if h[0] < f.line or "already satisfied" in h[2]]
        frames = _frame_packages(exceptions, f.line)
        installed = set(frames).union(*(names for _, names in shown))
        reason, dist = spec["reason"], ""
        if wanted and not wanted <= installed and how.get("variants"):
            # a metadata lookup by the old distribution name while a renamed variant is installed
            # ("flashinfer" vs flashinfer-python, "onnxruntime" vs onnxruntime-gpu): the checker predates the rename
            alias = {w: _variant(w, installed, spec.get("variant_suffixes", ())) for w in wanted}
            if all(alias.values()):
                dist = ", ".join(sorted(alias.values()))
                wanted = set(alias.values())
                reason = spec.get("variant_reason", reason)
        if wanted and wanted <= installed and spec.get("floor_reason") and _SPECIFIER.search(pkg) and not dist:
            reason, dist = spec["floor_reason"], ", ".join(sorted(_SPECIFIER.split(p)[0] for p in re.split(r"[,\s]+", pkg) if p))
        if wanted and wanted <= installed:
            line = min((ln for ln, names in shown if names & wanted), default=f.line)
            f.judgement = {"context": "installed-yet-missing", "severity_was": f.severity, "category_was": f.category,
                           "reason": tr(reason, lang, package=pkg, line=line, dist=dist)}
            f.category = spec["category"]


def _variant(want: str, installed: set[str], suffixes: Any) -> str:
    """An installed distribution that is `want` under a variant name (want_python, want_gpu, want_cu12), or ''."""
    return next((n for n in sorted(installed) if n.startswith(want + "_")
                 and re.fullmatch(r"(?:%s)" % "|".join(suffixes), n[len(want) + 1:])), "") if suffixes else ""
