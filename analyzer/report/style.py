"""Terminal styling shared by every human renderer: ANSI colours and the severity icons (layer 4).

No click here: whether to colour is decided by the caller (`color=True/False`).
"""
from __future__ import annotations

_CODES = {"bold": "1", "dim": "2", "red": "31", "yellow": "33", "green": "32", "blue": "34",
          "cyan": "36", "magenta": "35"}

# severity -> (icon, colour)
SEVERITY_ICONS = {"error": ("✖", "red"), "warning": ("▲", "yellow"), "info": ("•", "blue")}
DEFAULT_ICON = ("•", "blue")


class Style:
    """`Style(color)(text, "bold", "red")`: `text` wrapped in ANSI codes, or unchanged without colour."""

    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, *codes: str) -> str:
        if not self.color or not codes:
            return text
        return "\x1b[" + ";".join(_CODES[c] for c in codes) + "m" + text + "\x1b[0m"


def severity_icon(severity: str) -> tuple[str, str]:
    """(icon, colour) of a severity."""
    return SEVERITY_ICONS.get(severity, DEFAULT_ICON)
