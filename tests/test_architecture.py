"""Dependency direction and the no-torch triage path."""
import ast
import subprocess
import sys
from pathlib import Path

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
    layer0 = {"ruleset.model", "ruleset.yamlpos", "engine.logparse", "findings", "errors"}
    for name in layer0:
        tree = ast.parse((ROOT / "analyzer" / (name.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("llmtriage"):
                assert node.module.removeprefix("llmtriage.") in layer0, (name, node.module)
