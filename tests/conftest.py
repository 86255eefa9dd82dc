from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Nothing in the test suite may reach the network (reproducers and the Trainer test build tiny models
# in-process); set before anything imports transformers / huggingface_hub, which read it at import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Human output to a pipe wraps only when COLUMNS is set: the terminal that runs pytest (or an xdist
# worker that inherits its width) must not change what the CLI tests read. Tests of wrapping set it.
os.environ.pop("COLUMNS", None)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", "--update-goldens", action="store_true",
                     help="rewrite golden files (also LLMTRIAGE_UPDATE_GOLDENS=1); without it a missing golden fails")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Real torch/transformers reproducers are part of the slow tier.
    for item in items:
        if item.get_closest_marker("reproducer"):
            item.add_marker(pytest.mark.slow)


def _updating(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden")) or os.environ.get("LLMTRIAGE_UPDATE_GOLDENS") == "1"


@pytest.fixture
def golden(request):
    """Compare text with a golden file. Regenerating is an explicit opt-in (`--update-golden` or
    LLMTRIAGE_UPDATE_GOLDENS=1); a missing golden always fails, so a deleted one cannot come back by itself."""

    def check(path: Path, text: str) -> None:
        if _updating(request):
            path.write_text(text, encoding="utf-8")
        elif not path.exists():
            pytest.fail(f"{path.name} is missing: run `pytest --update-golden`, review the new file and commit it")
        assert text == path.read_text(encoding="utf-8"), f"{path.name} differs (review, then `pytest --update-golden`)"

    return check


@pytest.fixture(scope="session")
def ruleset():
    import llmtriage

    return llmtriage.load_rules(use_cache=False)


@pytest.fixture(scope="session")
def engine(ruleset):
    import llmtriage

    return llmtriage.get_engine(ruleset)


def run_cli(*args: str, input: bytes | None = None, env: dict | None = None, cwd: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real console entry point in a child process."""
    e = dict(os.environ)
    e.pop("FORCE_COLOR", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], input=input, capture_output=True,
                          env=e, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory) -> Path:
    """One rule cache for the CLI runs of tests that do not test the cache itself: a cold cache is
    validated in a child process (about 1.5 s a run). Tests of the cache keep their own folders."""
    return tmp_path_factory.mktemp("rule-cache")


@pytest.fixture
def cli():
    return run_cli
