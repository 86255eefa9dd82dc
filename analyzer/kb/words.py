"""The knowledge base's data: rules/kb.yaml (synonyms, category names, category tags, page labels).

Read with yaml.safe_load on a cache miss only; the parsed data is cached as JSON next to the rule
cache, keyed on the file's size and mtime, so a warm `kb search` never imports yaml.
"""
from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from llmtriage.ruleset.files import builtin_rules_dir
from llmtriage.ruleset.loader import cache_dir

KB_FILE = "kb.yaml"
_FORMAT = 2


@dataclass(frozen=True)
class KbWords:
    synonyms: dict[str, str] = field(default_factory=dict)          # query word -> expansion terms
    category_names: dict[str, dict[str, str]] = field(default_factory=dict)   # lang -> category -> name
    category_tags: dict[str, list[str]] = field(default_factory=dict)         # category -> search words
    labels: dict[str, dict[str, str]] = field(default_factory=dict)           # lang -> key -> page label

    def label_set(self, lang: Optional[str]) -> dict[str, str]:
        """The page labels in `lang` (English unless "zh")."""
        return self.labels["zh" if lang == "zh" else "en"]


def kb_words_path() -> Path:
    return builtin_rules_dir() / KB_FILE


def _check(data: Any, where: str) -> KbWords:
    """Plain, typed data from a parsed kb.yaml; ValueError naming the first bad entry."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping at the top level")
    unknown = set(data) - {"synonyms", "category_names", "category_tags", "labels"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    syn = data.get("synonyms") or {}
    names = data.get("category_names") or {}
    tags = data.get("category_tags") or {}
    labels = data.get("labels") or {}
    if not isinstance(syn, dict) or not all(isinstance(k, str) and isinstance(v, str) and k.strip() and v.strip()
                                            for k, v in syn.items()):
        raise ValueError(f"{where}: synonyms must map non-empty words to non-empty expansion strings")
    if not isinstance(names, dict) or not all(
            isinstance(lang, str) and isinstance(m, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                                  for k, v in m.items())
            for lang, m in names.items()):
        raise ValueError(f"{where}: category_names must map a language to {{category: name}}")
    if not isinstance(tags, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(t, str) and t.strip() for t in v)
            for k, v in tags.items()):
        raise ValueError(f"{where}: category_tags must map a category to a list of words")
    if not isinstance(labels, dict) or set(labels) != {"en", "zh"} or not all(
            isinstance(m, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in m.items())
            for m in labels.values()):
        raise ValueError(f"{where}: labels must map en and zh to {{key: text}}")
    if set(labels["en"]) != set(labels["zh"]):
        raise ValueError(f"{where}: labels: en and zh differ in {sorted(set(labels['en']) ^ set(labels['zh']))}")
    return KbWords(synonyms={k.lower(): v for k, v in syn.items()},
                   category_names={lang: dict(m) for lang, m in names.items()},
                   category_tags={k: list(v) for k, v in tags.items()},
                   labels={lang: dict(m) for lang, m in labels.items()})


def parse_kb_words(text: str, where: str = KB_FILE) -> KbWords:
    """Parse kb.yaml text (yaml.safe_load) into KbWords."""
    import yaml  # deferred: only a cache miss (or validation) reads the YAML

    return _check(yaml.safe_load(text), where)


def _cache_file(path: Path, st: os.stat_result) -> Optional[Path]:
    base = cache_dir()
    if base is None:
        return None
    key = zlib.crc32(str(path.resolve()).encode("utf-8"))
    return base / f"kbwords-{_FORMAT}-{key:08x}-{st.st_size}-{st.st_mtime_ns}.json"


def load_kb_words(path: Optional[Path] = None) -> KbWords:
    """The search vocabulary from `path` (default rules/kb.yaml), via the JSON cache when fresh."""
    path = Path(path) if path else kb_words_path()
    st = path.stat()
    cached = _cache_file(path, st)
    if cached is not None:
        try:
            with open(cached, encoding="utf-8") as fh:
                return _check(json.load(fh), str(cached))
        except (OSError, ValueError):
            pass
    words = parse_kb_words(path.read_text(encoding="utf-8"), str(path))
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"synonyms": words.synonyms, "category_names": words.category_names,
                                       "category_tags": words.category_tags, "labels": words.labels},
                                      ensure_ascii=False),
                           encoding="utf-8")
            os.replace(tmp, cached)
        except OSError:
            pass
    return words
