"""A package an error calls missing that the same log shows installed (rules/verdict.yaml `installed_yet_missing`).

transformers' `check_imports` (a model's remote code) and its availability checks report a package that
fails to import as "not found in your environment": flash_attn built against another torch (an undefined
symbol), transformers_stream_generator importing a name the installed transformers dropped. When the log
shows that very package installed before the error - pip's "Requirement already satisfied: X" or
"Successfully installed X-1.2", torch's collect_env "[pip3] X==1.2", `pip show X`, or a one-line
`import X; print(X.__version__)` that printed a version, "X version: 2.3.0", a traceback frame in
site-packages/X/ - the package is there and its import fails against the installed stack: a version
mismatch, not a missing package. For "No module named 'X.sub'" only a submodule counts: the installed X
lacks it (a release older or newer than the code that imports it). Markers of kind `installed` record those
lines (detect/scanner.py); every package the finding names must be among them (after the error only pip's
"Requirement already satisfied": an install that succeeds afterwards means the package was missing).
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.scanner import Scanner
from llmtriage.detect.spec import tr
from llmtriage.findings import Finding

_NAME = re.compile(r"(?:Requirement already satisfied: |\[(?:pip3?|conda)\]\s+|^Name: |(?:site|dist)-packages/)([A-Za-z][\w.-]*)"
                   r"|\b([A-Za-z][\w.-]*) [Vv]ersion:?\s+v?\d+\.\d+"
                   r"|-c [\x22']import ([A-Za-z]\w*)\b[^\n]*__version__")
_VERSION = re.compile(r"^\s*v?\d+\.\d+")


def norm(name: str) -> str:
    """A distribution or import name folded for comparison: case, `-`/`_`/`.`; "flash-attn" == "flash_attn"."""
    return re.sub(r"[-_.]+", "_", name.strip().lower())


def _installed_names(hit: tuple[int, str, str], scanner: Scanner) -> set[str]:
    line, _, text = hit
    m = re.search(r"Successfully installed (.+)", text)
    if m:   # "Successfully installed einops-0.8.0 flash-attn-2.5.9.post1": names without their versions
        return {norm(re.sub(r"-\d[\w.+!-]*$", "", tok)) for tok in m.group(1).split()}
    names = set()
    for m in _NAME.finditer(text):
        if m.group(1) or m.group(2):
            names.add(norm((m.group(1) or m.group(2)).split("==")[0]))
        elif _VERSION.match(scanner.line_text(line + 1)):      # the command printed a version: it imported
            names.add(norm(m.group(3)))
    return names


def installed_yet_missing(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                          lang: Optional[str]) -> None:
    hits = scanner.hits.get("installed", ())
    if not spec or not hits:
        return
    for f in findings:
        how = spec["rules"].get(f.rule_id)
        pkg = f.captures.get(how["capture"], "") if how else ""
        if not pkg or f.severity != "error" or f.category == spec["category"]:
            continue
        if how.get("submodule") and f"{pkg}." not in f.evidence:
            continue        # (only a submodule the installed package lacks: the package itself may be another env's)
        wanted = {norm(p) for p in re.split(r"[,\s]+", pkg) if p}
        # before the error any sign counts; after it only pip's "already satisfied" (an install that
        # succeeds after the error means the package was missing then)
        shown = [h for h in hits if h[0] < f.line or "already satisfied" in h[2]]
        installed = set().union(*(_installed_names(h, scanner) for h in shown)) if shown else set()
        if wanted and wanted <= installed:
            line = min(h[0] for h in shown if _installed_names(h, scanner) & wanted)
            f.judgement = {"context": "installed-yet-missing", "severity_was": f.severity, "category_was": f.category,
                           "reason": tr(spec["reason"], lang, package=pkg, line=line)}
            f.category = spec["category"]
