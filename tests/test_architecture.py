"""Dependency direction and the no-torch triage path."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_triage_never_imports_torch_or_transformers(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("Traceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: x\n")
    code = ("import sys, llmtriage\nfrom llmtriage.cli import main\n"
            f"rc = main(['--format', 'json', {str(p)!r}])\n"
            "bad = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]\n"
            "sys.stderr.write('BAD=' + ','.join(bad))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert r.stderr.decode().rstrip().endswith("BAD="), r.stderr.decode()[-500:]


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
    for p in (ROOT / "analyzer").glob("*.py"):
        if p.name.startswith("cli"):
            continue
        assert "click" not in _imports(p), p.name


def test_heavy_libraries_never_imported_at_module_level():
    for folder in ("analyzer", "reproducers"):
        for p in (ROOT / folder).glob("*.py"):
            assert not (_top_level_imports(p) & {"torch", "transformers", "numpy"}), p


def test_core_modules_do_not_import_upper_layers():
    layer0 = {"model", "yamlpos", "logparse", "findings", "errors"}
    for name in layer0:
        tree = ast.parse((ROOT / "analyzer" / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert (node.module or "") in layer0 | {""}, (name, node.module)
