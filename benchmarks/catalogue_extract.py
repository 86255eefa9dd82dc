"""Message templates from Python sources, with `ast` (the extraction half of `catalogue.py`).

For every `raise X(...)`, `logger.error/critical/exception/warning(...)`, `warnings.warn(...)` and
module-level `*_ERROR` / `*_MSG` string constant (transformers' `requires_backends` texts) the
message is rebuilt as a template: a list of literal strings and `Wild` values (an f-string field, a
`%s` / `{}` slot, a variable we could not resolve). Names used as the message (`raise X(msg)`) are
resolved to their last assignment before the use in the same function, plus later `+=` pieces.
"""
from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

LOG_LEVELS = {"error": "error", "critical": "error", "exception": "error", "fatal": "error",
              "warning": "warning", "warn": "warning", "warning_once": "warning", "warning_advice": "warning"}
BUILTIN_ALIASES = {"EnvironmentError": "OSError", "IOError": "OSError"}
EXC_NAME = re.compile(r"(Error|Exception|Exit|Interrupt)$")
CONST_NAME = re.compile(r"(ERROR|_MSG|MESSAGE|_WARNING)", re.I)
PCT_SLOT = re.compile(r"%(?:\((?P<name>\w+)\))?[#0 +-]*\d*(?:\.\d+)?[sdrifgeExXc%]")
FMT_SLOT = re.compile(r"\{(?P<field>[^{}]*)\}")


@dataclass(frozen=True)
class Wild:
    """A value only known at run time; `src` is its source expression (for the template and the filler)."""
    src: str


Part = Union[str, Wild]


@dataclass
class Message:
    file: str            # path inside the package, e.g. transformers/trainer.py
    line: int
    kind: str            # raise | log-error | log-warning | warn | const
    exc: str             # exception type as the traceback headline prints it ('' for log lines)
    parts: list = field(default_factory=list)
    logger: str = ""     # module name for log lines

    @property
    def template(self) -> str:
        return "".join(p if isinstance(p, str) else "{" + p.src[:40] + "}" for p in self.parts)

    @property
    def literal_chars(self) -> int:
        return sum(len(re.findall(r"[A-Za-z]", p)) for p in self.parts if isinstance(p, str))


class Source:
    """Module text split once (`ast.get_source_segment` re-splits the whole file on every call)."""

    def __init__(self, text: str):
        self.lines = text.splitlines(keepends=True)

    def segment(self, node: ast.AST) -> str:
        end = getattr(node, "end_lineno", None)
        if end is None or node.lineno > len(self.lines):
            return type(node).__name__
        first, last = node.lineno - 1, end - 1
        if first == last:
            text = self.lines[first].encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
        else:
            text = self.lines[first].encode()[node.col_offset:].decode(errors="replace") + "".join(
                self.lines[first + 1:last]) + self.lines[last].encode()[:node.end_col_offset].decode(errors="replace")
        return " ".join(text.split()) or type(node).__name__


def _src(node: ast.AST, source: "Source") -> str:
    return source.segment(node)


def _merge(parts: list) -> list:
    out: list = []
    for p in parts:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif p != "":
            out.append(p)
    return out


class _Resolver:
    """Rebuilds message templates inside one module, resolving local names within a scope."""

    def __init__(self, source: Source):
        self.source = source

    def parts(self, node: ast.AST, scope: Optional[ast.AST], depth: int = 0) -> Optional[list]:
        """Template parts of `node`, or None when it is not string-like at all."""
        if depth > 6:
            return None
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            out: list = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out.append(str(v.value))
                elif isinstance(v, ast.FormattedValue):
                    out.append(Wild(_src(v.value, self.source)))
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.parts(node.left, scope, depth + 1)
            right = self.parts(node.right, scope, depth + 1)
            if left is None and right is None:
                return None
            return (left or [Wild(_src(node.left, self.source))]) + (right or [Wild(_src(node.right, self.source))])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.parts(node.left, scope, depth + 1)
            if left is None:
                return None
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return self.percent(left, [_src(a, self.source) for a in args])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "format":
                base = self.parts(node.func.value, scope, depth + 1)
                if base is None:
                    return None
                pos = [_src(a, self.source) for a in node.args]
                kw = {k.arg: _src(k.value, self.source) for k in node.keywords if k.arg}
                return self.braces(base, pos, kw)
            if node.func.attr == "join" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                sep = self.parts(node.func.value, scope, depth + 1)
                if sep is None:
                    return None
                out = []
                for i, elt in enumerate(node.args[0].elts):
                    if i:
                        out += sep
                    out += self.parts(elt, scope, depth + 1) or [Wild(_src(elt, self.source))]
                return out
            if node.func.attr in ("strip", "rstrip", "lstrip") and not node.args:
                return self.parts(node.func.value, scope, depth + 1)
        if isinstance(node, ast.IfExp):
            return self.parts(node.body, scope, depth + 1) or self.parts(node.orelse, scope, depth + 1)
        if isinstance(node, ast.Name) and scope is not None:
            return self.name(node, scope, depth)
        return None

    def name(self, node: ast.Name, scope: ast.AST, depth: int) -> Optional[list]:
        """Last assignment of the name before this use in the same scope, then `+=` pieces after it."""
        assigns: list = []
        for sub in ast.walk(scope):
            if getattr(sub, "lineno", 10**9) >= node.lineno:
                continue
            if isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in sub.targets):
                assigns.append((sub.lineno, "=", sub.value))
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.target.id == node.id \
                    and sub.value is not None:
                assigns.append((sub.lineno, "=", sub.value))
            elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name) and sub.target.id == node.id \
                    and isinstance(sub.op, ast.Add):
                assigns.append((sub.lineno, "+=", sub.value))
        assigns.sort(key=lambda a: a[0])
        start = max((i for i, a in enumerate(assigns) if a[1] == "="), default=None)
        if start is None:
            return None
        out = self.parts(assigns[start][2], scope, depth + 1)
        if out is None:
            return None
        for _, _, value in assigns[start + 1:]:
            out = out + (self.parts(value, scope, depth + 1) or [Wild(_src(value, self.source))])
        return out

    @staticmethod
    def percent(parts: list, args: list) -> list:
        out: list = []
        it = iter(args)
        for p in parts:
            if not isinstance(p, str):
                out.append(p)
                continue
            pos = 0
            for m in PCT_SLOT.finditer(p):
                out.append(p[pos:m.start()])
                if m.group(0) == "%%":
                    out.append("%")
                else:
                    out.append(Wild(m.group("name") or next(it, "value")))
                pos = m.end()
            out.append(p[pos:])
        return _merge(out)

    @staticmethod
    def braces(parts: list, pos: list, kw: dict) -> list:
        out: list = []
        auto = iter(pos)
        for p in parts:
            if not isinstance(p, str):
                out.append(p)
                continue
            text = p.replace("{{", "\x00").replace("}}", "\x01")
            last = 0
            for m in FMT_SLOT.finditer(text):
                out.append(text[last:m.start()])
                name = m.group("field").split(":")[0].split("!")[0]
                if name.isdigit():
                    src = pos[int(name)] if int(name) < len(pos) else name
                elif name:
                    src = kw.get(name.split(".")[0].split("[")[0], name)
                else:
                    src = next(auto, "value")
                out.append(Wild(src))
                last = m.end()
            out.append(text[last:])
        return [p.replace("\x00", "{").replace("\x01", "}") if isinstance(p, str) else p for p in _merge(out)]


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def exception_classes(relpath: str, tree: ast.AST) -> dict:
    """Exception-like classes defined in this module: name -> dotted module (as a headline prints it)."""
    module = relpath[:-3].replace("/", ".")
    if module.endswith(".__init__"):
        module = module[: -len(".__init__")]
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = " ".join(_dotted(b) for b in node.bases)
            if re.search(r"(Error|Exception|Warning|Interrupt)\b", node.name + " " + bases):
                out[node.name] = module
    return out


def _scopes(tree: ast.Module, lines: list) -> Iterator[tuple]:
    """(node, enclosing function or module) for every node spanning one of `lines` (sorted candidate
    line numbers: a text pre-filter, so the walk skips the bulk of a module), innermost function wins."""
    stack = [(tree, tree)]
    while stack:
        node, scope = stack.pop()
        for child in ast.iter_child_nodes(node):
            first = getattr(child, "lineno", None)
            if first is not None:
                i = bisect.bisect_left(lines, first)
                if i == len(lines) or lines[i] > (child.end_lineno or first):
                    continue
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            yield child, inner
            stack.append((child, inner))


CANDIDATE = re.compile(r"\braise\b|\.(?:%s)\(|^[A-Za-z_]\w*\s*=" % "|".join(LOG_LEVELS), re.M)


def candidate_lines(text: str) -> list:
    """1-based numbers of lines that may start a message (raise, a log/warn call, a module assignment)."""
    out = []
    line, pos = 1, 0
    for m in CANDIDATE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        out.append(line)
    return out


def _is_logger(node: ast.AST) -> bool:
    name = _dotted(node).lower()
    return bool(name) and ("log" in name.split(".")[-1] or name in ("logging",))


def extract(relpath: str, text: str) -> tuple:
    """(messages, exception classes) of one module (relpath like 'transformers/trainer.py')."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [], {}
    lines = candidate_lines(text)
    source = Source(text)
    res = _Resolver(source)
    module = relpath[:-3].replace("/", ".")
    out: list = []
    for node, scope in _scopes(tree, lines):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            call = node.exc
            exc = _dotted(call.func)
            args = list(call.args) or [k.value for k in call.keywords if k.arg in ("msg", "message")]
            if len(args) > 1 and EXC_NAME.search(_dotted(args[0])) and not EXC_NAME.search(exc):
                exc, args = _dotted(args[0]), args[1:]  # a factory: raise _format(RepoNotFoundError, msg, response)
            if not exc or not args:
                continue
            parts = res.parts(args[0], scope)
            if parts is None:
                parts = [Wild(_src(args[0], source))]
            out.append(Message(relpath, node.lineno, "raise", BUILTIN_ALIASES.get(exc, exc), _merge(parts)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            attr = node.func.attr
            if attr in LOG_LEVELS and _is_logger(node.func.value):
                parts = res.parts(node.args[0], scope)
                if parts is None:
                    continue
                if len(node.args) > 1:
                    parts = res.percent(parts, [_src(a, source) for a in node.args[1:]])
                out.append(Message(relpath, node.lineno, "log-" + LOG_LEVELS[attr], "", _merge(parts), module))
            elif attr == "warn" and _dotted(node.func.value) == "warnings":
                parts = res.parts(node.args[0], scope)
                if parts is None:
                    continue
                cat = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "category"), None)
                out.append(Message(relpath, node.lineno, "warn", _dotted(cat) if cat is not None else "UserWarning",
                                   _merge(parts)))
        elif isinstance(node, ast.Assign) and scope is tree and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and CONST_NAME.search(node.targets[0].id):
            parts = res.parts(node.value, None)
            if parts and sum(len(p) for p in parts if isinstance(p, str)) >= 40:
                name = node.targets[0].id
                exc = "ImportError" if "IMPORT" in name.upper() else ""
                out.append(Message(relpath, node.lineno, "const", exc, _merge(res.braces(parts, [], {}))))
    out.sort(key=lambda m: m.line)
    return out, exception_classes(relpath, tree)
