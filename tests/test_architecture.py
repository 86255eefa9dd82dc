"""Dependency direction and the no-torch triage path."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_triage_never_imports_torch_or_transformers(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: x\n")
    code = ("import sys, llmtriage\nfrom llmtriage.cli.app import main\n"
            f"rc = main(['--format', 'json', {str(p)!r}])\n"
            "bad = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]\n"
            "sys.stderr.write('BAD=' + ','.join(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert r.stderr.decode().rstrip().endswith("BAD="), r.stderr.decode()[-500:]


@pytest.mark.slow   # a cold rule cache: full validation in a child
def test_a_cold_rule_cache_is_validated_outside_the_scanning_process(tmp_path):
    """The CLI validates on a cache miss in a forked child: yaml and pydantic never enter the process
    that scans (its peak RSS is the same cold and warm), nor does OpenSSL (`hashlib`: 3.6 MB); the result equals in-process validation,
    and rule problems still come back as the same one-line errors (tests/test_rule_file_errors.py)."""
    import os

    if not hasattr(os, "fork"):
        import pytest

        pytest.skip("no fork on this platform")
    p = tmp_path / "x.log"
    p.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    code = ("import sys, json\nfrom llmtriage.cli.app import main\n"
            f"rc = main(['--format', 'json', {str(p)!r}])\n"
            "sys.stderr.write('HEAVY=' + ','.join(m for m in ('yaml', 'pydantic', '_hashlib') if m in sys.modules))\n")
    env = {**os.environ, "LLMTRIAGE_CACHE_DIR": str(tmp_path / "cache")}
    for run in ("cold", "warm"):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, env=env)
        assert r.stderr.decode().rstrip().endswith("HEAVY="), (run, r.stderr.decode()[-500:])
        assert b'"cuda-oom"' in r.stdout, run
    assert list((tmp_path / "cache").glob("rules-*.json"))

    from llmtriage.ruleset import loader
    from llmtriage.ruleset.validate import validate_dirs

    dirs = [loader.builtin_rules_dir()]
    a, b = loader._validate_isolated(dirs, True), validate_dirs(dirs, builtin=True, probe_shipped=False)
    assert (a.rules, a.locales, a.taxonomy, a.verified) == (b.rules, b.locales, b.taxonomy, b.verified)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_click_only_in_cli_modules():
    for p in (ROOT / "analyzer").rglob("*.py"):
        if "cli" in p.relative_to(ROOT / "analyzer").parts[:-1]:
            continue
        assert "click" not in _imports(p), p.name


def test_heavy_libraries_never_imported_at_module_level():
    for folder in ("analyzer", "reproducers"):
        for p in (ROOT / folder).rglob("*.py"):
            assert not (_top_level_imports(p) & {"torch", "transformers", "numpy"}), p


def test_core_modules_do_not_import_upper_layers():
    layer0 = {"ruleset.model", "ruleset.yamlpos", "engine.logparse", "engine.quoted", "findings", "errors", "templates"}
    for name in layer0:
        tree = ast.parse((ROOT / "analyzer" / (name.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmtriage"):
                assert node.module.removeprefix("llmtriage.") in layer0, (name, node.module)


# --------------------------------------------------------------------------- the layer map
# Every module of the package belongs to one layer (its sub-package; the package root's small
# modules are `base`, its __init__ is the public `api`). A layer imports only the layers listed for
# it: the whole table, not only the bottom. Function-level imports count too.
LAYERS = ("base", "ruleset", "engine", "detect", "report", "api", "kb", "job", "workflows", "fleet", "cli", "main")
ALLOWED = {
    "base": set(),
    "ruleset": {"base"},
    "engine": {"base", "ruleset"},
    "detect": {"base", "ruleset", "engine"},
    "report": {"base", "ruleset", "engine", "detect"},
    "api": {"base", "ruleset", "engine", "detect", "report"},
    "kb": {"base", "ruleset", "engine", "detect", "report", "api"},
    "job": {"base", "ruleset", "engine", "detect", "report", "api"},
    "workflows": {"base", "ruleset", "engine", "detect", "report", "api"},
    "fleet": {"base", "ruleset", "engine", "detect", "report", "api", "job"},
    "cli": {"base", "ruleset", "engine", "detect", "report", "api", "kb", "job", "workflows", "fleet"},
    "main": {"cli"},
}
PKG = ROOT / "analyzer"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["llmtriage", *parts])


def _graph() -> dict[str, set[str]]:
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{m}: relative import (the package uses absolute imports)"
                if node.module and node.module.split(".")[0] == "llmtriage":
                    names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] == "llmtriage"]
            for n in names:
                while n not in mods and "." in n:
                    n = n.rsplit(".", 1)[0]
                if n in mods and n != m:
                    edges[m].add(n)
    return edges


def _layer(mod: str) -> str:
    parts = mod.split(".")
    if mod == "llmtriage":
        return "api"
    if parts[1] == "__main__":
        return "main"
    if len(parts) == 2 and not (PKG / parts[1]).is_dir():
        return "base"
    return parts[1]


def test_every_module_is_in_a_known_layer():
    assert {_layer(m) for m in _graph()} <= set(LAYERS)
    assert set(ALLOWED) == set(LAYERS)


def test_imports_follow_the_layer_table():
    bad = sorted(f"{m} ({_layer(m)}) -> {t} ({_layer(t)})" for m, ts in _graph().items() for t in ts
                 if _layer(t) != _layer(m) and _layer(t) not in ALLOWED[_layer(m)])
    assert not bad, "imports against the layer table:\n" + "\n".join(bad)


def test_no_import_cycle_among_modules():
    edges = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:           # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_no_module_over_500_lines():
    big = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not big, big


def test_no_private_name_imported_from_another_module():
    bad = []
    for p in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmtriage"):
                bad += [f"{p.relative_to(PKG)}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


def test_a_deferred_import_says_why():
    """Imports belong at module level; one inside a function (a heavy or optional dependency kept off
    the triage path's start-up) carries a comment on its line or the line above saying so."""
    bare = []
    for p in PKG.rglob("*.py"):
        src = p.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(src))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    here, above = src[node.lineno - 1], src[node.lineno - 2] if node.lineno > 1 else ""
                    if "#" not in here and not above.strip().startswith("#"):
                        bare.append(f"{p.relative_to(PKG)}:{node.lineno}: {here.strip()}")
    assert not bare, "\n".join(bare)
