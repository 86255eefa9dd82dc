"""YAML with source positions: map a pydantic error location to file:line:col.

Imported only when rule files are (re)validated.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import yaml

try:  # the C loader is ~10x faster; fall back to the pure-Python one
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


class YamlSyntaxError(Exception):
    def __init__(self, line: int, col: int, problem: str):
        super().__init__(problem)
        self.line, self.col, self.problem = line, col, problem


def compose(text: str) -> tuple[Any, Optional[yaml.Node]]:
    """Parse YAML text; return (data, node tree). Raises YamlSyntaxError with a position."""
    try:
        loader = _Loader(text)          # one parse: the node tree, then the data built from it
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(x for x in (exc.context, exc.problem) if x)
        raise YamlSyntaxError(line, col, f"invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:  # pragma: no cover - other YAML errors have no mark
        raise YamlSyntaxError(1, 1, f"invalid YAML: {exc}") from None
    return data, node


def locate(node: Optional[yaml.Node], loc: Sequence[Any]) -> tuple[int, int]:
    """Best position (1-based line, col) of the value at `loc`, or of its nearest existing parent."""
    if node is None:
        return 1, 1
    best = node
    for part in loc:
        if isinstance(best, yaml.MappingNode):
            for k, v in best.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    best = v
                    break
            else:
                break
        elif isinstance(best, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(best.value):
            best = best.value[part]
        else:
            break
    mark = best.start_mark
    return mark.line + 1, mark.column + 1


def key_node(node: Optional[yaml.Node], loc: Sequence[Any]) -> Optional[yaml.Node]:
    """The key node of the last element of `loc` (for 'unknown key' errors)."""
    if node is None or not loc:
        return None
    parent = node
    for part in loc[:-1]:
        if isinstance(parent, yaml.MappingNode):
            for k, v in parent.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    parent = v
                    break
            else:
                return None
        elif isinstance(parent, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(parent.value):
            parent = parent.value[part]
        else:
            return None
    if isinstance(parent, yaml.MappingNode):
        for k, _ in parent.value:
            if isinstance(k, yaml.ScalarNode) and k.value == str(loc[-1]):
                return k
    return None


def scalar_style(node: Optional[yaml.Node], loc: Sequence[Any]) -> Optional[str]:
    """YAML quoting style of the scalar at `loc` ('"', "'", '|', '>' or None for plain)."""
    cur = node
    for part in loc:
        if isinstance(cur, yaml.MappingNode):
            for k, v in cur.value:
                if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                    cur = v
                    break
            else:
                return None
        elif isinstance(cur, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(cur.value):
            cur = cur.value[part]
        else:
            return None
    return cur.style if isinstance(cur, yaml.ScalarNode) else None
