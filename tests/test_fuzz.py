"""A time-boxed atheris run of benchmarks/fuzz_logparse.py (reader, normaliser, traceback parser, then
the whole engine): every invariant it checks must hold on every generated input. Longer runs:
`python benchmarks/fuzz_logparse.py -max_total_time=600`."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # time-boxed fuzzing: slow tier

pytest.importorskip("atheris")
HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_logparse.py"


ROOT = HARNESS.parents[1]


def _seed_corpus(d: Path) -> Path:
    """20-line excerpts of fixtures: mutations of real log lines keep hitting rules."""
    import random

    d.mkdir()
    rng = random.Random(3)
    logs = sorted((ROOT / "fixtures").rglob("*.log"))
    for i, p in enumerate(rng.sample(logs, min(60, len(logs)))):
        lines = p.read_bytes().splitlines(keepends=True)
        j = rng.randrange(max(1, len(lines) - 20))
        (d / f"seed-{i}").write_bytes(b"".join(lines[j:j + 20])[:4000])
    return d


@pytest.mark.parametrize("extra", [[], ["--engine"], ["--differential"]], ids=["logparse", "engine", "differential"])
def test_time_boxed_fuzz_run_finds_no_crash(tmp_path, extra):
    """differential: the default engine, the literal Set and the stdlib path must equal the reference.

    A fixed number of executions, not a time box: on a loaded machine a 25-second box ran only 135
    differential inputs, so a count of runs (the proof that it really fuzzed) must not hang on the clock."""
    runs_wanted = 1500
    if extra == ["--differential"]:
        extra = extra + [str(_seed_corpus(tmp_path / "seeds"))]
        runs_wanted = 300     # four engines per input, the reference one pattern by pattern over 600+ rules
    r = subprocess.run([sys.executable, str(HARNESS), *extra, f"-runs={runs_wanted}", "-max_len=4096", "-seed=1"],
                       cwd=tmp_path, capture_output=True, timeout=600)
    tail = r.stderr.decode(errors="replace")[-3000:]
    assert r.returncode == 0, tail
    assert "Done " in tail and " runs in " in tail, tail
    runs = int(tail.rsplit("Done ", 1)[1].split()[0])
    assert runs >= runs_wanted, tail   # it really fuzzed, not just started
    assert not list(tmp_path.glob("crash-*")), tail
