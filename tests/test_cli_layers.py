"""Issue 12 in the job, workflows and cli layers: small modules with one concern, no private names
imported across modules, no lower layer importing these, and their prose in YAML (en + zh)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "analyzer"
UPPER = ("cli", "job", "workflows")
LOWER = ("ruleset", "engine", "detect", "report")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (PKG / f).glob("*.py"))


def _imports(path: Path) -> list[ast.ImportFrom | ast.Import]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_upper_layer_modules_stay_under_500_lines():
    for p in _modules(*UPPER):
        assert len(p.read_text(encoding="utf-8").splitlines()) <= 500, p


def test_no_private_name_imported_from_another_module():
    for p in _modules(*UPPER) + [PKG / "report" / "style.py", PKG / "engine" / "logwindow.py"]:
        for n in _imports(p):
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("llmtriage"):
                bad = [a.name for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]
                assert not bad, (p.name, n.module, bad)


def test_lower_layers_never_import_job_cli_or_workflows():
    for p in _modules(*LOWER):
        for n in _imports(p):
            names = [n.module or ""] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names]
            for m in names:
                assert not m.startswith(tuple(f"llmtriage.{u}" for u in UPPER + ("kb", "fleet"))), (p, m)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_job_and_cli_hold_no_chinese_prose():
    """Chinese text lives in YAML: no string in job/ or cli/ code holds any (docstrings, which document
    usage examples such as `kb search "显存溢出"`, aside)."""
    for p in _modules("job", "cli"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                assert not _CJK.search(n.value), (p.name, n.lineno, n.value[:60])


def test_job_texts_have_english_and_chinese_with_the_same_placeholders():
    data = yaml.safe_load((ROOT / "rules" / "job_texts.yaml").read_text(encoding="utf-8"))
    for section, langs in data.items():
        assert set(langs) == {"en", "zh"}, section
        assert set(langs["en"]) == set(langs["zh"]), section
        for key, en in langs["en"].items():
            ph = lambda s: sorted(set(re.findall(r"\{(\w+)\}", str(s))))   # noqa: E731
            assert ph(en) == ph(langs["zh"][key]), (section, key)
