"""The knowledge base as a static HTML site (`llmtriage kb build`) (layer 4).

Self-contained pages (inline CSS, one inline filter script, no external asset), English at the
root and Chinese under zh/; kb/site_check.py verifies a built site.
"""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from llmtriage import get_engine
from llmtriage.kb.pages import category_page, rule_page, verification_text
from llmtriage.kb.words import load_kb_words

REQUIRED_RULE_SECTIONS = ("what", "signature", "example", "output", "fixes", "confused", "references", "source")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI","PingFang SC","Microsoft YaHei",sans-serif;max-width:60rem;
margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1d1d1f}
a{color:#0b5cad}pre{background:#f5f5f7;padding:.6rem .8rem;overflow-x:auto;border-radius:4px;font-size:.85rem}
code{font-size:.9em}.meta{color:#555}.sev-error{color:#b00020}.sev-warning{color:#a15c00}.sev-info{color:#0b5cad}
.verified{color:#107c10;font-weight:600}.unverified{color:#a15c00}table{border-collapse:collapse}
td,th{padding:.2rem .6rem;text-align:left;vertical-align:top;border-bottom:1px solid #e5e5e5}
nav{margin-bottom:1rem}.tag{display:inline-block;background:#eef;border-radius:3px;padding:0 .3rem;margin:.1rem}
"""

_FILTER_JS = """
document.getElementById('q').addEventListener('input',function(){var q=this.value.toLowerCase();
document.querySelectorAll('tr[data-s]').forEach(function(r){r.style.display=r.dataset.s.indexOf(q)<0?'none':''});});
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _doc(title: str, body: str, lang: str) -> str:
    hl = "zh-CN" if lang == "zh" else "en"
    return (f"<!DOCTYPE html>\n<html lang=\"{hl}\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{_e(title)}</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _prefix(lang: str) -> str:
    """Path from a language root to the site root ("" for en, "zh/" for zh)."""
    return "zh/" if lang == "zh" else ""


def _other_lang_link(lang: str, rel: str, depth: int) -> str:
    """Link from a page at `rel` (relative to its language root, `depth` folders deep) to the same
    page in the other language."""
    up = "../" * depth
    if lang == "zh":
        return up + "../" + rel
    return up + "zh/" + rel


def _nav(lang: str, depth: int, rel: str, langs: tuple[str, ...], extra: str = "") -> str:
    L = load_kb_words().label_set(lang)
    up = "../" * depth
    parts = [f"<a href=\"{up}index.html\">{_e(L['index'])}</a>"]
    if extra:
        parts.append(extra)
    other = "en" if lang == "zh" else "zh"
    if other in langs:
        parts.append(f"<a href=\"{_other_lang_link(lang, rel, depth)}\" hreflang=\"{'zh-CN' if other == 'zh' else 'en'}\">"
                     f"{_e(L['other_lang'])}</a>")
    return "<nav>" + " · ".join(parts) + "</nav>"


def _html_rule(page: dict[str, Any], langs: tuple[str, ...], rule_ids: set[str]) -> str:
    L = load_kb_words().label_set(page["lang"])
    lang = page["lang"]
    cat = page["category"]
    nav = _nav(lang, 1, f"rules/{page['id']}.html", langs,
               f"<a href=\"../category/{_e(cat)}.html\">{_e(cat)}</a>")
    b: list[str] = [nav, f"<h1>{_e(page['title'])}</h1>"]
    b.append(f"<p class=\"meta\"><code>{_e(page['id'])}</code> · {_e(L['category'])}: "
             f"<a href=\"../category/{_e(cat)}.html\">{_e(cat)}</a> · {_e(L['severity'])}: "
             f"<span class=\"sev-{_e(page['severity'])}\">{_e(page['severity'])}</span> · {_e(L['role'])}: "
             f"{_e(page['role'])} · {_e(L['confidence'])}: {_e(page['confidence'])} · {_e(L['priority'])}: "
             f"{_e(page['priority'])}</p>")
    if page["tags"]:
        b.append("<p>" + " ".join(f"<span class=\"tag\">{_e(t)}</span>" for t in page["tags"]) + "</p>")
    if not page["translated"]:
        b.append(f"<p class=\"unverified\">{_e(L['lang_note'])}</p>")
    b.append(f"<section id=\"what\"><h2>{_e(L['what'])}</h2><p>{_e(page['what'])}</p>"
             f"<h2 id=\"why\">{_e(L['why'])}</h2><p>{_e(page['why'])}</p></section>")
    sig = [f"<section id=\"signature\"><h2>{_e(L['signature'])}</h2>",
           f"<p>{_e(L['keywords'])}: " + ", ".join(f"<code>{_e(k)}</code>" for k in page["keywords"]) + "</p>"]
    for kind in ("any", "not", "requires", "unless"):
        pats = page["signatures"][kind]
        if pats:
            sig.append(f"<h3>{_e(L[kind])}</h3><table>")
            sig += [f"<tr><td>{_e(p['name'] or '-')}</td><td><code>{_e(p['regex'])}</code></td></tr>" for p in pats]
            sig.append("</table>")
    sig.append("</section>")
    b += sig
    ex = page["example"]
    b.append(f"<section id=\"example\"><h2>{_e(L['example'])}"
             f"{(' — ' + _e(ex['name'])) if ex.get('name') else ''}</h2><pre>{_e(ex['log'])}</pre></section>")
    b.append(f"<section id=\"output\"><h2>{_e(L['output'])}</h2><pre>{_e(ex['output'] or L['no_fire'])}</pre></section>")
    b.append(f"<p id=\"next\"><strong>{_e(page['next'])}</strong></p>")
    fx = [f"<section id=\"fixes\"><h2>{_e(L['fixes'])}</h2><ol>"]
    for f in page["fixes"]:
        item = f"<li><strong>{_e(f['title'])}</strong>"
        vt = verification_text(f["verification"], f["verified_by"], L)
        if vt:
            ok = bool(f["verification"] and f["verification"]["verified"])
            item += f" <span class=\"{'verified' if ok else 'unverified'}\">{_e(vt)}</span>"
        item += f"<p>{_e(f['detail'])}</p>"
        if f.get("when"):
            item += f"<p><em>{_e(L['when'])}:</em> {_e(f['when'])}</p>"
        if f.get("snippet"):
            item += f"<pre>{_e(f['snippet'])}</pre>"
        fx.append(item + "</li>")
    fx.append("</ol></section>")
    b += fx
    cf = [f"<section id=\"confused\"><h2>{_e(L['confused'])}</h2><ul>"]
    for c in page["confused"]:
        item = f"<li>{_e(c['why'])}"
        if c["expect_rule"]:
            target = c["expect_rule"]
            label = _e(target) + (f" — {_e(c['expect_title'])}" if c["expect_title"] else "")
            item += (f" → {_e(L['instead'])} <a href=\"{_e(target)}.html\">{label}</a>" if target in rule_ids
                     else f" → {_e(L['instead'])} <code>{label}</code>")
        item += f"<pre>{_e(c['log'])}</pre></li>"
        cf.append(item)
    cf.append("</ul></section>")
    b += cf
    refs = page["references"]
    if refs:
        b.append(f"<section id=\"references\"><h2>{_e(L['references'])}</h2><ul>" +
                 "".join(f"<li><a href=\"{_e(u)}\" rel=\"noreferrer\">{_e(u)}</a></li>" for u in refs) + "</ul></section>")
    else:
        b.append(f"<section id=\"references\"><h2>{_e(L['references'])}</h2><p>{_e(L['none'])}</p></section>")
    b.append(f"<section id=\"source\"><p class=\"meta\">{_e(L['source'])}: <code>{_e(page['source'])}</code></p></section>")
    return _doc(f"{page['title']} — {page['id']}", "\n".join(b), lang)


def _rules_table(rows: list[dict[str, Any]], href_prefix: str, with_filter_data: bool = False,
                 extra: Optional[dict[str, str]] = None) -> str:
    out = ["<table>"]
    for r in rows:
        data = f" data-s=\"{_e((r['id'] + ' ' + r['title'] + ' ' + (extra or {}).get(r['id'], '')).lower())}\"" \
            if with_filter_data else ""
        out.append(f"<tr{data}><td><a href=\"{href_prefix}{_e(r['id'])}.html\">{_e(r['id'])}</a></td>"
                   f"<td class=\"sev-{_e(r['severity'])}\">{_e(r['severity'])}</td><td>{_e(r['role'])}</td>"
                   f"<td>{_e(r['title'])}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def _html_category(page: dict[str, Any], langs: tuple[str, ...]) -> str:
    L = load_kb_words().label_set(page["lang"])
    lang = page["lang"]
    b = [_nav(lang, 1, f"category/{page['category']}.html", langs),
         f"<h1>{_e(page['category'])}</h1>", f"<p>{_e(page['description'])}</p>"]
    if lang == "zh" and page["description_zh"]:
        b.append(f"<p>{_e(page['description_zh'])}</p>")
    b.append(f"<section id=\"rules\"><h2>{_e(L['rules'])} ({len(page['rules'])})</h2>")
    b.append(_rules_table(page["rules"], "../rules/"))
    b.append("</section>")
    return _doc(f"{page['category']} — llmtriage", "\n".join(b), lang)


def _html_index(rs: Any, lang: str, langs: tuple[str, ...], cats: list[str]) -> str:
    words = load_kb_words()
    L = words.label_set(lang)
    code_lang = lang if lang == "zh" else None
    b = [_nav(lang, 0, "index.html", langs), f"<h1>{_e(L['title'])}</h1>",
         f"<p><input id=\"q\" type=\"search\" placeholder=\"{_e(L['filter'])}\" size=\"40\"></p>",
         f"<section id=\"categories\"><h2>{_e(L['categories'])}</h2>"]
    for cat in cats:
        rules = category_page(rs, cat, lang=code_lang)["rules"]
        desc = words.category_names.get("zh", {}).get(cat, "") if lang == "zh" else rs.taxonomy.get(cat, "")
        extra = {r["id"]: " ".join(rs.text(rs.by_id[r["id"]], code_lang).get("tags") or []) + " " + cat
                 for r in rules}
        b.append(f"<h3 id=\"cat-{_e(cat)}\"><a href=\"category/{_e(cat)}.html\">{_e(cat)}</a></h3>"
                 f"<p class=\"meta\">{_e(desc)}</p>")
        b.append(_rules_table(rules, "rules/", with_filter_data=True, extra=extra))
    b.append("</section>")
    b.append(f"<script>{_FILTER_JS}</script>")
    return _doc(L["title"], "\n".join(b), lang)


def build_site(rs: Any, out: os.PathLike[str] | str, *, langs: Iterable[str] = ("en", "zh"),
               verified: Optional[dict[str, Any]] = None) -> list[Path]:
    """Write the static site: OUT/index.html, OUT/category/<cat>.html, OUT/rules/<id>.html, and the
    same under OUT/zh/ for Chinese. `verified`: a verified-fix table (default: the rule set's).
    Returns the files written."""
    root = Path(out)
    langs = tuple(dict.fromkeys(l if l == "zh" else "en" for l in langs))
    verified = rs.verified if verified is None else verified
    cats = [c for c in rs.taxonomy if any(r["category"] == c for r in rs.rules)]
    cats += sorted({r["category"] for r in rs.rules} - set(cats))
    rule_ids = {r["id"] for r in rs.rules}
    written: list[Path] = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    for lang in langs:
        code_lang = "zh" if lang == "zh" else None
        base = root / _prefix(lang)
        engine = get_engine(rs, lang=code_lang)
        write(base / "index.html", _html_index(rs, lang, langs, cats))
        for cat in cats:
            write(base / "category" / f"{cat}.html", _html_category(category_page(rs, cat, lang=code_lang), langs))
        for rule in rs.rules:
            page = rule_page(rs, rule, lang=code_lang, engine=engine, verified=verified)
            write(base / "rules" / f"{rule['id']}.html", _html_rule(page, langs, rule_ids))
    return written
