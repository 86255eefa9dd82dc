"""Where the rules live and how the files beside them are read (layer 1): ruleset/files.py.

The one place that knows the built-in rules' install location (`builtin_rules_dir`) and the data
files kept beside the rules: the taxonomy, the verdict data, the credential catalogue and the
where the verified-fix record lives (`verified_path`; read and written by `ruleset.verified`). Every file is read as a regular file of
bounded size (`read_rule_text`). yaml is imported only when a file is parsed (a cache miss): the
triage path with a warm rule cache never loads it.
"""
from __future__ import annotations

import errno
import os
import stat
from importlib.resources import files
from pathlib import Path
from typing import Any

from llmtriage.errors import RuleLoadError
from llmtriage.ruleset.verified import VERIFIED_FILE

DATA_FILES = ("verdict.yaml", "actions.yaml", "report.yaml", "families.yaml", "versions.yaml")   # cached with the rules (ruleset/datafiles.py)
SECRETS_FILE = "secrets.yaml"
NON_RULE_FILES = {"taxonomy.yaml", "detectors.yaml", "fleet.yaml", "job_texts.yaml", "kb.yaml", SECRETS_FILE, *DATA_FILES}   # data beside the rules, not rules
LOCALES_DIR = "locales"


def builtin_rules_dir() -> Path:
    root = files("llmtriage.rules")
    return Path(str(root))


def rule_files(root: Path) -> list[Path]:
    """Every rule file under `root` (not the locales, not the data files beside the rules, nothing
    hidden), in path order. Walked with os.scandir: rglob and relative_to cost ~10 ms of a warm
    start-up for 350 files, and every triage lists them to check the rule cache."""
    found: list[tuple[list[str], str]] = []

    def walk(path: str, parts: list[str]) -> None:
        with os.scandir(path) as it:
            for e in it:
                if e.name.startswith("."):
                    continue
                rel = parts + [e.name]
                if e.is_dir():
                    if not (not parts and e.name == LOCALES_DIR):
                        walk(e.path, rel)
                elif e.name.endswith((".yaml", ".yml")) and not (not parts and e.name in NON_RULE_FILES):
                    found.append((rel, e.path))

    walk(str(root), [])
    found.sort(key=lambda x: x[0])
    return [Path(path) for _, path in found]


def locale_files(root: Path) -> list[tuple[str, Path]]:
    base = root / LOCALES_DIR
    if not base.is_dir():
        return []
    return [(d.name, p) for d in sorted(base.iterdir()) if d.is_dir() for p in sorted(d.glob("*.y*ml"))]


def taxonomy_path(dirs: list[Path]) -> Path:
    return dirs[0] / "taxonomy.yaml"


MAX_RULE_FILE = 1 << 20       # bytes; a rule file is a page of YAML


def read_rule_text(path: Path) -> str:
    """A rule/locale/data file's text: a regular file (a FIFO, device or socket is refused without
    blocking, a symlink to /dev/zero included) of at most MAX_RULE_FILE bytes, in UTF-8."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device, socket or a link to one)")
        if st.st_size > MAX_RULE_FILE:
            raise OSError(errno.EFBIG, f"too large ({st.st_size} bytes; a rule file may hold at most {MAX_RULE_FILE})")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_RULE_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_RULE_FILE:
        raise OSError(errno.EFBIG, f"too large (over {MAX_RULE_FILE} bytes)")
    return data.decode("utf-8")

def compose_data_file(path: Path) -> Any:
    """A data file beside the rules (taxonomy, secrets), read like a rule file: one-line errors."""
    from llmtriage.ruleset.yamlpos import YamlSyntaxError, compose   # deferred: yaml, only on a cache miss

    try:
        data, _ = compose(read_rule_text(path))
    except YamlSyntaxError as exc:
        raise RuleLoadError([f"{path}:{exc.line}:{exc.col}: {exc.problem}"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleLoadError([f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"]) from None
    return data


def load_taxonomy(path: Path) -> dict[str, str]:
    data = compose_data_file(path)
    cats = data.get("categories") if isinstance(data, dict) else None
    if not isinstance(cats, dict) or not cats:
        raise RuleLoadError([f"{path}:1:1: taxonomy: expected a mapping 'categories:' of name -> description"])
    return {str(k): str(v) for k, v in cats.items()}


def load_data_files(root: Path) -> dict[str, Any]:
    """DATA_FILES of `root` parsed with yaml.safe_load (name -> data), for the rule cache."""
    import yaml   # deferred: yaml never enters the triage path (only on a cache miss)

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return {n: yaml.load((root / n).read_text(encoding="utf-8"), Loader=loader)
            for n in DATA_FILES if (root / n).exists()}


def verified_path() -> Path:
    """rules/verified.json of the built-in rules (written by `llmtriage verify --record`; read and
    written only through `ruleset.verified`)."""
    return builtin_rules_dir() / VERIFIED_FILE
