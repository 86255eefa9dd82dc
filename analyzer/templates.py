"""Message templates (layer 0): `{name}` placeholders, optional `[..]` segments; and the numeric
`checks` a rule puts on its captures (`checks_hold`, `CHECK_RE`).

`render_template` fills a rule's (or a detector's) message from captures; `template_names` is what
the rule validator checks placeholders against. Depends on nothing in the package.
"""
from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
SEGMENT = re.compile(r"\[([^\[\]]*)\]")


def render_template(template: str, captures: dict[str, str]) -> str:
    """`template` with its placeholders filled; a `[..]` segment whose values are missing is dropped,
    a missing placeholder outside segments reads `?`."""
    def seg(m: re.Match[str]) -> str:
        names = PLACEHOLDER.findall(m.group(1))
        if all(captures.get(n) for n in names):
            return PLACEHOLDER.sub(lambda p: captures[p.group(1)], m.group(1))
        return ""

    out = SEGMENT.sub(seg, template)
    return PLACEHOLDER.sub(lambda p: captures.get(p.group(1)) or "?", out).strip()


def template_names(template: str) -> tuple[set[str], set[str]]:
    """(placeholders outside [..] segments, placeholders inside segments)."""
    inside: set[str] = set()
    for seg in SEGMENT.findall(template):
        inside |= set(PLACEHOLDER.findall(seg))
    outside = set(PLACEHOLDER.findall(SEGMENT.sub("", template)))
    return outside, inside


CHECK_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|>=|==|!=|<|>)\s*([A-Za-z_]\w*|-?\d+(?:\.\d+)?)"
                      r"(?:\s*([*+-])\s*(\d+(?:\.\d+)?))?\s*$")
_OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _num(v: "str | None") -> "float | None":
    try:
        return float(v.replace(",", "")) if v is not None else None
    except ValueError:
        return None


def checks_hold(checks: list[str], caps: dict[str, str]) -> bool:
    """A rule's `match.checks` on the captures of its hit ('tokens > features', 'tokens <= features * 1.05'):
    False when a comparison of two numbers is false; a capture that is absent or not a number leaves
    its check passing."""
    for c in checks:
        m = CHECK_RE.match(c)
        if m is None:
            continue
        a = _num(caps.get(m.group(1)))
        rhs = m.group(3)
        b = _num(rhs) if rhs[0].isdigit() or rhs[0] == "-" else _num(caps.get(rhs))
        if b is not None and m.group(4):
            k = float(m.group(5))
            b = b * k if m.group(4) == "*" else b + k if m.group(4) == "+" else b - k
        if a is not None and b is not None and not _OPS[m.group(2)](a, b):
            return False
    return True
