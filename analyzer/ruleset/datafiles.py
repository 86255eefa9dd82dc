"""The data files beside the rules (`files.DATA_FILES`: verdict, actions, report words), one copy
per process (layer 1).

The rule cache carries them parsed (`RuleSet.data`) and the engine hands them over with `use_data`,
so neither a scan nor a renderer imports yaml; without them (custom rule folders only) they are
read from the built-in rules on first use.
"""
from __future__ import annotations

from typing import Any

from llmtriage.ruleset.files import builtin_rules_dir, load_data_files

_DATA: dict[str, Any] = {}


def use_data(data: dict[str, Any]) -> None:
    """Take the data files parsed with the rule cache (`RuleSet.data`); the first copy stays."""
    for name, value in data.items():
        _DATA.setdefault(name, value)


def data_file(name: str) -> Any:
    """The parsed data file `name` (one of `files.DATA_FILES`)."""
    if name not in _DATA:
        _DATA[name] = load_data_files(builtin_rules_dir())[name]
    return _DATA[name]
