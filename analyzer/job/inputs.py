"""The log files of a job: globs and directories expanded, and a rank read from a file's name."""
from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Iterable, Optional

from llmtriage.errors import InputError

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")

_RANK_IN_NAME = [re.compile(r"(?i)rank[-_.]?(\d{1,5})"),
                 re.compile(r"(?i)(?:proc|worker|process|task|gpu)[-_.]?(\d{1,5})")]
_TRAILING_NUM = re.compile(r"(\d{1,5})(?:\.(?:log|out|err|txt))*$")


def collect_inputs(paths: Iterable[str]) -> list[Path]:
    """Expand globs and directories (their *.log/*.out/*.err/*.txt files, sorted) into files."""
    out: list[Path] = []
    for p in paths:
        hits = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
        if not hits:
            raise InputError(f"{p}: no file matches")
        for h in hits:
            path = Path(h)
            if path.is_dir():
                files = sorted(f for f in path.iterdir() if f.is_file() and f.name.lower().endswith(LOG_SUFFIXES)
                               and not f.name.endswith(".expected.json"))
                if not files:
                    raise InputError(f"{h}: directory holds no .log/.out/.err/.txt files")
                out += files
            elif path.is_file():
                out.append(path)
            else:
                raise InputError(f"{h}: no such file")
    seen: set[str] = set()
    uniq = []
    for p in out:
        k = os.path.realpath(p)
        if k not in seen:
            seen.add(k)
            uniq.append(p)
    return uniq


def has_logs(path: Path) -> bool:
    """Whether a directory holds any log file."""
    return any(f.is_file() and f.name.lower().endswith(LOG_SUFFIXES) for f in path.iterdir())


def rank_from_name(path: Path) -> Optional[int]:
    name = path.name
    for pat in _RANK_IN_NAME:
        m = pat.search(name)
        if m:
            return int(m.group(1))
    m = _TRAILING_NUM.search(re.sub(r"\.(?:log|out|err|txt)$", "", name))
    return int(m.group(1)) if m else None


__all__ = ["LOG_SUFFIXES", "collect_inputs", "has_logs", "rank_from_name"]
