"""Check a built knowledge-base site (`llmtriage kb build --check`): every rule page has its
sections, every internal link and anchor resolves, no external asset (layer 4, stdlib only)."""
from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Optional

from llmtriage.kb.site import REQUIRED_RULE_SECTIONS

class _PageParser:
    """Collects section ids, internal links and a few contents of a generated page (stdlib only)."""

    def __init__(self) -> None:
        outer = self
        self.sections: dict[str, int] = {}      # section id -> number of <pre>/<li>/<p> inside
        self.links: list[str] = []
        self.ids: set[str] = set()
        self._stack: list[str] = []

        class P(HTMLParser):
            def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
                a = dict(attrs)
                if a.get("id"):
                    outer.ids.add(str(a["id"]))
                if tag == "section":
                    outer._stack.append(str(a.get("id") or ""))
                    outer.sections.setdefault(outer._stack[-1], 0)
                elif tag in ("pre", "li", "p", "tr") and outer._stack:
                    outer.sections[outer._stack[-1]] += 1
                if tag == "a" and a.get("href"):
                    outer.links.append(str(a["href"]))
                if tag in ("link", "script", "img") and (a.get("src") or a.get("href")):
                    outer.links.append(str(a.get("src") or a.get("href")))

            def handle_endtag(self, tag: str) -> None:
                if tag == "section" and outer._stack:
                    outer._stack.pop()

        self.parser = P(convert_charrefs=True)

    def feed(self, text: str) -> "_PageParser":
        self.parser.feed(text)
        self.parser.close()
        return self


def check_site(out: os.PathLike[str] | str) -> list[str]:
    """Problems of a built site: rule pages lacking a required section (or with it empty), internal
    links that do not resolve, external assets. Empty list: the site is complete."""
    root = Path(out)
    problems: list[str] = []
    pages = sorted(root.rglob("*.html"))
    if not (root / "index.html").exists():
        problems.append(f"{root / 'index.html'}: missing")
    for p in pages:
        parsed = _PageParser().feed(p.read_text(encoding="utf-8"))
        rel = p.relative_to(root)
        if rel.parent.name == "rules":
            for sec in REQUIRED_RULE_SECTIONS:
                if sec not in parsed.sections:
                    problems.append(f"{rel}: missing section '{sec}'")
                elif parsed.sections[sec] == 0 and sec not in ("references",):
                    problems.append(f"{rel}: section '{sec}' is empty")
        for href in parsed.links:
            if re.match(r"^[a-z][a-z0-9+.-]*:", href, re.I) or href.startswith("//"):
                if href.startswith(("http://", "https://")) and rel.parent.name == "rules":
                    continue          # references are external links by nature
                problems.append(f"{rel}: external link or asset '{href}'")
                continue
            target, _, frag = href.partition("#")
            dest = (p.parent / target).resolve() if target else p.resolve()
            if not dest.exists():
                problems.append(f"{rel}: broken link '{href}'")
            elif frag and target:
                if frag not in _PageParser().feed(dest.read_text(encoding="utf-8")).ids:
                    problems.append(f"{rel}: broken anchor '{href}'")
    return problems
