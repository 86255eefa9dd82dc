"""Message templates (layer 0): `{name}` placeholders, optional `[..]` segments.

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
