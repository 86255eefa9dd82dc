"""Project configuration: `[tool.llmtriage]` in pyproject.toml or `.llmtriage.yaml` (layer 3).

Searched upward from the working directory; the first directory holding `.llmtriage.yaml`, or a
`pyproject.toml` with a `[tool.llmtriage]` table, wins (`.llmtriage.yaml` first in one directory).
The search stops at the top of a git work tree (a directory holding `.git`).
`LLMTRIAGE_CONFIG=FILE` names the file explicitly; `LLMTRIAGE_NO_CONFIG=1` turns configuration off.

Keys (both spellings `min_severity` / `min-severity` are accepted)::

    rules = ["team-rules"]          # extra rule folders, relative to the config file
    disable = ["hf-head-newly-initialized"]
    min_severity = "warning"        # info | warning | error
    lang = "zh"                     # en | zh
    baseline = ".llmtriage-baseline.json"   # findings acknowledged there are dropped
    engine = "hyperscan"            # auto | re2 | hyperscan | python (block scanner; same findings)
    [tool.llmtriage.thresholds]     # metric / throughput detector thresholds (docs/METRICS.md)
    rise_factor = 3.0               # (YAML: `thresholds: {rise_factor: 3.0}`)

Unknown keys and bad values raise ConfigError naming the file and the key.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

from llmtriage.errors import ConfigError
from llmtriage.detect.metrics import Thresholds, configure

KEYS = ("rules", "disable", "min_severity", "lang", "baseline", "engine", "thresholds")
ENGINES = ("auto", "re2", "hyperscan", "python")
SEVERITIES = ("info", "warning", "error")
LANGS = ("en", "zh")
YAML_NAME = ".llmtriage.yaml"


def find_config(start_dir: str | os.PathLike, explicit: Optional[str] = None
                ) -> Optional[tuple[Path, dict[str, Any], str]]:
    """(file, raw table, label) of the nearest configuration, or None. `explicit` (--config) wins over
    LLMTRIAGE_CONFIG, which wins over the search upward from `start_dir`."""
    origin = "--config" if explicit else "LLMTRIAGE_CONFIG"
    explicit = explicit or os.environ.get("LLMTRIAGE_CONFIG")
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise ConfigError(f"{p}: {origin} names a file that does not exist")
        return _read(p, required=True)
    d = Path(start_dir).resolve()
    while True:
        for name in (YAML_NAME, ".llmtriage.yml", "pyproject.toml"):
            p = d / name
            if p.is_file():
                found = _read(p, required=False)
                if found is not None:
                    return found
        if (d / ".git").exists() or d.parent == d:
            return None
        d = d.parent


def _read(p: Path, *, required: bool) -> Optional[tuple[Path, dict[str, Any], str]]:
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read configuration: {exc}") from None
    if p.suffix == ".toml":
        doc = _load_toml(text, p)
        table = doc.get("tool", {}).get("llmtriage") if isinstance(doc.get("tool"), dict) else None
        if table is None:
            if required:
                raise ConfigError(f"{p}: no [tool.llmtriage] table")
            return None
        if not isinstance(table, dict):
            raise ConfigError(f"{p}: [tool.llmtriage] must be a table")
        return p, table, "[tool.llmtriage] "
    import yaml   # deferred: with a pyproject.toml the triage process never loads yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{p}{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{p}: the configuration must be a mapping of keys to values")
    return p, doc, ""


def _load_toml(text: str, p: Path) -> dict[str, Any]:
    try:
        import tomllib as toml  # Python >= 3.11
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as toml  # type: ignore[no-redef]
        except ModuleNotFoundError:
            return _mini_toml(text, p)
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: invalid TOML: {exc}") from None


_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
_KV = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=\s*(.*)$")


def _mini_toml(text: str, p: Path) -> dict[str, Any]:
    """Reads only the `[tool.llmtriage]` table (strings, booleans, numbers, arrays of strings), for
    Python 3.10 without tomli. Other tables are skipped unparsed."""
    result: dict[str, Any] = {}
    table: Optional[dict[str, Any]] = None
    pending = ""
    key = ""
    for raw in text.splitlines():
        if pending:
            pending += " " + (raw.split("#", 1)[0] if '"' not in raw and "'" not in raw else raw)
            if pending.count("[") > pending.count("]"):
                continue
            table[key] = _mini_value(pending, p, key, ast)  # type: ignore[index]
            pending = ""
            continue
        m = _TABLE.match(raw)
        if m:
            table = {} if m.group(1).replace(" ", "") == "tool.llmtriage" else None
            if table is not None:
                result = {"tool": {"llmtriage": table}}
            continue
        if table is None or not raw.strip() or raw.strip().startswith("#"):
            continue
        m = _KV.match(raw)
        if not m:
            raise ConfigError(f"{p}: [tool.llmtriage]: cannot parse line: {raw.strip()}")
        key, val = m.group(1), m.group(2).strip()
        if val.startswith("[") and val.count("[") > val.count("]"):
            pending = val
            continue
        table[key] = _mini_value(val, p, key, ast)
    return result


def _mini_value(val: str, p: Path, key: str, ast: Any) -> Any:
    val = val.strip()
    if val in ("true", "false"):
        return val == "true"
    if val.startswith("'") and val.endswith("'") and "'" not in val[1:-1]:
        return val[1:-1]
    try:
        return ast.literal_eval(re.sub(r"#[^\"'\]]*$", "", val).strip())
    except (ValueError, SyntaxError):
        raise ConfigError(f"{p}: [tool.llmtriage] key '{key}': cannot parse value {val}") from None


def _str_list(value: Any, p: Path, label: str, key: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{p}: {label}key '{key}': expected a list of non-empty strings, got {value!r}")
    return list(value)


def _thresholds(value: Any, p: Path, label: str, key: str) -> dict[str, float]:
    names = {f.name for f in fields(Thresholds)}
    if not isinstance(value, dict):
        raise ConfigError(f"{p}: {label}key '{key}': expected a table of threshold names to numbers, got {value!r}")
    out = {}
    for name, v in value.items():
        n = str(name).replace("-", "_")
        if n not in names:
            raise ConfigError(f"{p}: {label}key '{key}': unknown threshold '{name}' (known: {', '.join(sorted(names))})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ConfigError(f"{p}: {label}key '{key}.{name}': expected a non-negative number, got {v!r}")
        out[n] = v
    return out


def parse_settings(p: Path, table: dict[str, Any], label: str = "") -> dict[str, Any]:
    """Validate a raw table into settings (see module doc)."""
    out: dict[str, Any] = {"config_file": str(p)}
    base = p.parent
    for raw_key, value in table.items():
        key = str(raw_key).replace("-", "_")
        if key not in KEYS:
            raise ConfigError(f"{p}: {label}unknown key '{raw_key}' (known keys: {', '.join(KEYS)})")
        if key == "rules":
            dirs = []
            for d in _str_list(value, p, label, raw_key):
                path = (base / d).resolve()
                if not path.is_dir():
                    raise ConfigError(f"{p}: {label}key '{raw_key}': rule folder '{d}' does not exist ({path})")
                dirs.append(str(path))
            out["rules"] = dirs
        elif key == "disable":
            out["disable"] = _str_list(value, p, label, raw_key)
        elif key == "min_severity":
            if value not in SEVERITIES:
                raise ConfigError(f"{p}: {label}key '{raw_key}': expected one of {', '.join(SEVERITIES)}, got {value!r}")
            out["min_severity"] = value
        elif key == "lang":
            if value not in LANGS:
                raise ConfigError(f"{p}: {label}key '{raw_key}': expected one of {', '.join(LANGS)}, got {value!r}")
            out["lang"] = value
        elif key == "engine":
            if value not in ENGINES:
                raise ConfigError(f"{p}: {label}key '{raw_key}': expected one of {', '.join(ENGINES)}, got {value!r}")
            out["engine"] = value
        elif key == "thresholds":
            out["thresholds"] = _thresholds(value, p, label, raw_key)
        elif key == "baseline":
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{p}: {label}key '{raw_key}': expected a file path, got {value!r}")
            bpath = (base / value).resolve()
            if not bpath.is_file():
                raise ConfigError(f"{p}: {label}key '{raw_key}': baseline file '{value}' does not exist "
                                  f"(create it with `llmtriage baseline LOGS... > {value}`)")
            from llmtriage.report.baseline import load_baseline   # deferred: hashlib (OpenSSL) only with a baseline

            bl = load_baseline(bpath)
            out["baseline"] = str(bpath)
            out["baseline_filter"] = bl.filter
    return out


def load_settings(start_dir: str | os.PathLike, explicit: Optional[str] = None) -> dict[str, Any]:
    """Settings of the nearest configuration above `start_dir` ({} when there is none).

    Keys: rules (absolute folder paths), disable, min_severity, lang, engine, baseline (path),
    baseline_filter (Report -> Report), config_file."""
    if os.environ.get("LLMTRIAGE_NO_CONFIG") and not explicit:
        return {}
    found = find_config(start_dir, explicit)
    if found is None:
        return {}
    settings = parse_settings(*found)
    if settings.get("thresholds"):
        configure(**settings["thresholds"])     # the detectors of this process read THRESHOLDS
    return settings
