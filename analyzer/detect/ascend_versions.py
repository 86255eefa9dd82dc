"""An Ascend driver older than the CANN toolkit the job runs (rules/verdict.yaml `ascend_versions`).

A container image or a conda env brings its own CANN toolkit, the host its driver. When the log prints both
(npu-smi's banner or the driver's version.info, and the toolkit's install info, version.cfg or an environment
report) and the driver is older than the oldest one that CANN release supports, the HCCL communicator that fails
to initialise, the ACL call or kernel launch that fails, or the exception no rule knows is that mismatch: those
findings take the category cuda-version-mismatch (driver/toolkit mismatch), with the two versions as the reason.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from llmtriage.detect.scanner import Scanner, markers
from llmtriage.detect.spec import tr
from llmtriage.findings import Finding

_NUM = re.compile(r"(\d+)\.(\d+)")


def _major_minor(text: str) -> Optional[tuple[int, int]]:
    m = _NUM.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _versions(scanner: Scanner) -> tuple[Optional[str], Optional[str]]:
    """The last driver and CANN versions the log printed."""
    hits = scanner.hits.get("ascend-version", ())
    if not hits:
        return None, None
    rx = {m.name: re.compile(m.regex.pattern.decode() if isinstance(m.regex.pattern, bytes) else m.regex.pattern, re.M)
          for m in markers() if m.kind == "ascend-version"}
    driver = cann = None
    for _, name, text in hits:
        m = rx[name].search(text) if name in rx else None
        if m is None:
            continue
        val = next((v for v in m.groups() if v), None)
        if val and name == "ascend-driver-version":
            driver = val
        elif val:
            cann = val
    return driver, cann


def driver_older_than_cann(findings: list[Finding], scanner: Scanner, spec: Optional[dict[str, Any]],
                           lang: Optional[str]) -> None:
    if not spec or not any(f.severity == "error" and f.category in spec["categories"] for f in findings):
        return
    driver, cann = _versions(scanner)
    if not driver or not cann:
        return
    have, toolkit = _major_minor(driver), _major_minor(cann)
    if have is None or toolkit is None:
        return
    table = {_major_minor(k): _major_minor(v) for k, v in spec["required"].items()}
    known = [k for k in table if k is not None and k <= toolkit]
    if not known:
        return
    need = table[max(known)]      # a newer CANN than the table knows needs at least its newest entry's driver
    if need is None or have >= need:
        return
    reason = tr(spec["reason"], lang, driver=driver, cann=cann, required=f"{need[0]}.{need[1]}")
    for f in findings:
        if f.severity == "error" and f.category in spec["categories"]:
            f.judgement = {"context": "ascend-driver-older-than-cann", "severity_was": f.severity,
                           "category_was": f.category, "reason": reason}
            f.category = "cuda-version-mismatch"
