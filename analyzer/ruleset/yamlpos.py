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


def child(node: Optional[yaml.Node], part: Any) -> Optional[yaml.Node]:
    """The value node under `node` at one path element (a mapping key or a sequence index), or None."""
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part]
    return None


def walk(node: Optional[yaml.Node], loc: Sequence[Any]) -> Optional[yaml.Node]:
    """The node at path `loc` under `node`, or None where the path leaves the document."""
    for part in loc:
        node = child(node, part)
        if node is None:
            return None
    return node


def locate(node: Optional[yaml.Node], loc: Sequence[Any]) -> tuple[int, int]:
    """Best position (1-based line, col) of the value at `loc`, or of its nearest existing parent."""
    if node is None:
        return 1, 1
    best = node
    for part in loc:
        nxt = child(best, part)
        if nxt is None:
            break
        best = nxt
    mark = best.start_mark
    return mark.line + 1, mark.column + 1


def key_node(node: Optional[yaml.Node], loc: Sequence[Any]) -> Optional[yaml.Node]:
    """The key node of the last element of `loc` (for 'unknown key' errors)."""
    if node is None or not loc:
        return None
    parent = walk(node, loc[:-1])
    if isinstance(parent, yaml.MappingNode):
        for k, _ in parent.value:
            if isinstance(k, yaml.ScalarNode) and k.value == str(loc[-1]):
                return k
    return None


def scalar_style(node: Optional[yaml.Node], loc: Sequence[Any]) -> Optional[str]:
    """YAML quoting style of the scalar at `loc` ('"', "'", '|', '>' or None for plain)."""
    cur = walk(node, loc)
    return cur.style if isinstance(cur, yaml.ScalarNode) else None
