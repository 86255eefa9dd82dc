"""The message catalogue (benchmarks/catalogue.py) on installed sources, offline: output format, and
known library wordings rendered as a log line are matched by the rule that owns them."""
from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "catalogue.py"
COLUMNS = ["loc", "kind", "type", "rel", "status", "severity", "template"]
KINDS = {"raise", "log-error", "log-warning", "warn", "const"}

pytestmark = pytest.mark.slow


def installed(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed")


def run_catalogue(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.setdefault("LLMTRIAGE_CACHE_DIR", str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), *args], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def rows(path: Path) -> list:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == COLUMNS
    out = []
    for line in lines[1:]:
        cells = line.split("\t")
        assert len(cells) == len(COLUMNS), line
        out.append(dict(zip(COLUMNS, cells)))
    return out


def test_small_library_format_and_summary(tmp_path):
    version = installed("safetensors")
    proc = run_catalogue(tmp_path, "--libs", "safetensors")
    table = rows(tmp_path / f"safetensors-{version}.tsv")
    assert table, "safetensors raises messages; none were extracted"
    for r in table:
        assert r["kind"] in KINDS
        assert r["rel"] in ("R", "-")
        assert ":" in r["loc"] and r["loc"].startswith("safetensors/")
        assert len(r["template"]) <= 200
        assert r["status"] == "-" or r["status"].startswith("allow:") or r["severity"] in ("error", "warning", "info")
    summary = (tmp_path / "SUMMARY.md").read_text(encoding="utf-8")
    assert f"| safetensors | {version} |" in summary
    assert f"| safetensors | {version} |" in proc.stdout
    # Summary counts agree with the rows.
    cells = [c.strip() for c in summary.splitlines()[-1].split("|")[1:-1]]
    assert int(cells[3]) == len(table)
    relevant = [r for r in table if r["rel"] == "R" and r["kind"] in ("raise", "log-error", "const")]
    assert int(cells[6]) == len(relevant)


def test_known_transformers_wordings_match_their_rules(tmp_path):
    version = installed("transformers")
    run_catalogue(tmp_path, "--libs", "transformers",
                  "--files", "transformers/tokenization_utils_base.py,transformers/utils/import_utils.py")
    table = rows(tmp_path / f"transformers-{version}.tsv")
    pad = [r for r in table if "Asking to pad but the tokenizer does not have a padding token" in r["template"]]
    assert pad, "transformers' pad-token error was not extracted"
    assert {r["status"] for r in pad} == {"tokenizer-no-pad-token"}
    assert pad[0]["kind"] == "raise" and pad[0]["type"] == "ValueError" and pad[0]["rel"] == "R"
    # The `requires_backends` texts are module constants, formatted at run time.
    requires = [r for r in table if r["kind"] == "const" and "requires the scipy library but it was not found" in r["template"]]
    assert requires and all(r["status"] == "library-requires-backend" for r in requires)
    # Only the two selected files were read, and no SUMMARY.md is written for a partial run.
    assert {r["loc"].split(":")[0] for r in table} <= {"transformers/tokenization_utils_base.py",
                                                       "transformers/utils/import_utils.py"}
    assert not (tmp_path / "SUMMARY.md").exists()


def test_diff_lists_new_wordings(tmp_path):
    installed("safetensors")
    run_catalogue(tmp_path, "--libs", "safetensors")
    new = next(tmp_path.glob("safetensors-*.tsv"))
    lines = new.read_text(encoding="utf-8").splitlines()
    old = tmp_path / "old.tsv"
    old.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--diff", str(old), str(new)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert len(out) == 1 and out[0].endswith(lines[-1].split("\t")[-1])
    assert "1 wordings" in proc.stderr


def test_restatus_agrees_with_a_full_run(tmp_path):
    """Relevance and allow-list read only the result row, so re-applying them changes nothing."""
    version = installed("accelerate")
    run_catalogue(tmp_path, "--libs", "accelerate")
    path = tmp_path / f"accelerate-{version}.tsv"
    before = path.read_text(encoding="utf-8")
    table = rows(path)
    assert any(r["status"].startswith("allow:") for r in table), "no accelerate wording was allow-listed"
    assert all(r["rel"] == "-" for r in table if r["kind"] in ("warn", "log-warning"))
    run_catalogue(tmp_path, "--libs", "accelerate", "--restatus")
    assert path.read_text(encoding="utf-8") == before
