"""Terminal rendering of knowledge-base pages (`llmtriage kb show`, `llmtriage explain`) (layer 4)."""
from __future__ import annotations

import textwrap
from typing import Any

from llmtriage.kb.pages import verification_text
from llmtriage.kb.tokens import has_cjk
from llmtriage.kb.words import load_kb_words
from llmtriage.report.style import Style


def _wrap(text: str, indent: int, width: int) -> str:
    pad = " " * indent
    text = " ".join(str(text).split())
    if has_cjk(text):
        return pad + text
    return textwrap.fill(text, width=max(width, 40), initial_indent=pad, subsequent_indent=pad)


def render_rule_text(page: dict[str, Any], *, color: bool = False, width: int = 100) -> str:
    st = Style(color)
    L = load_kb_words().label_set(page["lang"])
    out: list[str] = []
    w = out.append
    w(st(page["title"], "bold") + "  " + st(f"[{page['category']} / {page['id']}]", "dim"))
    meta = (f"{L['category']}: {page['category']}"
            f"{' — ' + page['category_desc'] if page['category_desc'] else ''}")
    w(meta)
    w(f"{L['severity']}: {page['severity']} · {L['role']}: {page['role']} · {L['confidence']}: "
      f"{page['confidence']} · {L['priority']}: {page['priority']}")
    if page["tags"]:
        w(f"{L['tags']}: {', '.join(page['tags'])}")
    if not page["translated"]:
        w(st(L["lang_note"], "yellow"))
    w("")
    for key in ("what", "why"):
        w(st(L[key], "bold"))
        w(_wrap(page[key], 2, width))
        w("")
    w(st(L["signature"], "bold"))
    w(f"  {L['keywords']}: {', '.join(page['keywords'])}")
    for kind in ("any", "not", "requires", "unless"):
        pats = page["signatures"][kind]
        if not pats:
            continue
        w(f"  {L[kind]}:")
        for p in pats:
            w(f"    {st(p['name'] or '-', 'cyan')}  {p['regex']}")
    w("")
    ex = page["example"]
    w(st(L["example"], "bold") + (f" ({ex['name']})" if ex.get("name") else ""))
    for line in ex["log"].splitlines():
        w("  │ " + line)
    w("")
    w(st(L["output"], "bold"))
    for line in (ex["output"] or L["no_fire"]).splitlines():
        w("  │ " + line)
    w("")
    w(st(page["next"], "bold"))
    w(st(L["fixes"], "bold"))
    for n, f in enumerate(page["fixes"], 1):
        vt = verification_text(f["verification"], f["verified_by"], L)
        ok = bool(f["verification"] and f["verification"]["verified"])
        w(f"  {n}. {st(f['title'], 'bold')}" + (f"  {st(vt, 'green' if ok else 'yellow')}" if vt else ""))
        w(_wrap(f["detail"], 5, width))
        if f.get("when"):
            w(f"     ({L['when']}: {f['when']})")
        if f.get("snippet"):
            for sl in str(f["snippet"]).splitlines():
                w("       " + st(sl, "cyan"))
    w("")
    w(st(L["confused"], "bold"))
    for c in page["confused"]:
        head = f"  - {c['why']}"
        if c["expect_rule"]:
            head += f" → {L['instead']} {c['expect_rule']}" + (f" ({c['expect_title']})" if c["expect_title"] else "")
        w(head)
        for line in c["log"].splitlines():
            w("      │ " + line)
    w("")
    w(st(L["references"], "bold"))
    for ref in page["references"] or [L["none"]]:
        w(f"  - {ref}")
    w("")
    w(f"{L['source']}: {page['source']}")
    return "\n".join(out) + "\n"


def render_category_text(page: dict[str, Any], *, color: bool = False) -> str:
    st = Style(color)
    L = load_kb_words().label_set(page["lang"])
    out = [st(page["category"], "bold") + " — " + page["description"]]
    if page["lang"] == "zh" and page["description_zh"]:
        out.append(page["description_zh"])
    out.append("")
    out.append(st(f"{L['rules']} ({len(page['rules'])})", "bold"))
    width = max((len(r["id"]) for r in page["rules"]), default=10)
    for r in page["rules"]:
        out.append(f"  {r['id']:<{width}}  {r['severity']:<7} {r['role']:<7} {r['title']}")
    out.append("")
    out.append(f"llmtriage kb show {page['rules'][0]['id'] if page['rules'] else 'ID'}")
    return "\n".join(out) + "\n"
