"""Text analysis of the knowledge base's search: lowercase words lightly stemmed, CJK runs as
character bigrams (layer 4, stdlib only)."""
from __future__ import annotations

import re

CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[a-z0-9]+|[{CJK}]+")
_HAS_CJK = re.compile(rf"[{CJK}]")
# CamelCase identifiers (PermissionDeniedError, DefaultCPUAllocator) and their parts
_CAMEL = re.compile(r"(?<![A-Za-z0-9])[A-Z][a-z][A-Za-z0-9]*?[a-z0-9][A-Z][A-Za-z0-9]*")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z]+")
_STOP = frozenset("a an the of to in on for is are was be and or with by at it its this that as from into "
                  "i my me we you your can how what why when does do did after".split())


def stem(w: str) -> str:
    """A light English stemmer: plural, -ing and -ed endings (short words and numbers unchanged)."""
    if len(w) <= 4 or w.isdigit():
        return w
    if w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith(("ches", "shes", "xes")):
        return w[:-2]
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 5 and not w.endswith("eed"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    else:
        return w
    if len(w) > 2 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    return w


def tokens(text: str) -> list[str]:
    """Search terms of `text`: stemmed lowercase words and CJK character bigrams. A CamelCase identifier
    (an exception name a user pastes) also yields its parts: PermissionDeniedError -> permission, deni(ed), error."""
    out: list[str] = []
    for m in _TOKEN.finditer(text.lower()):
        t = m.group()
        if _HAS_CJK.match(t):
            if len(t) == 1:
                out.append(t)
            else:
                out.extend(t[i:i + 2] for i in range(len(t) - 1))
        elif t not in _STOP:
            out.append(stem(t))
    out.extend(stem(p) for p in camel_parts(text) if p not in _STOP)
    return out


def camel_parts(text: str) -> list[str]:
    """The lowercase words inside the CamelCase identifiers of `text` (DefaultCPUAllocator -> default, cpu,
    allocator)."""
    return [p.lower() for m in _CAMEL.finditer(text) for p in _CAMEL_PART.findall(m.group())]


def has_cjk(text: str) -> bool:
    """Whether `text` holds a Chinese (CJK) character."""
    return bool(_HAS_CJK.search(text))
