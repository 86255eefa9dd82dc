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

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite fixtures/**/*.expected.json")


@pytest.fixture(scope="session")
def ruleset():
    import llmtriage

    return llmtriage.load_rules(use_cache=False)


@pytest.fixture(scope="session")
def engine(ruleset):
    from llmtriage.matcher import Engine

    return Engine(ruleset)


def run_cli(*args: str, input: bytes | None = None, env: dict | None = None, cwd: str | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real console entry point in a child process."""
    e = dict(os.environ)
    e.pop("FORCE_COLOR", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "llmtriage", *args], input=input, capture_output=True,
                          env=e, cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli
