"""A time-boxed atheris run of benchmarks/fuzz_logparse.py (reader, normaliser, traceback parser, then
the whole engine): every invariant it checks must hold on every generated input. Longer runs:
`python benchmarks/fuzz_logparse.py -max_total_time=600`."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")
HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "fuzz_logparse.py"


@pytest.mark.parametrize("extra", [[], ["--engine"]], ids=["logparse", "engine"])
def test_time_boxed_fuzz_run_finds_no_crash(tmp_path, extra):
    r = subprocess.run([sys.executable, str(HARNESS), *extra, "-max_total_time=10", "-max_len=4096", "-seed=1"],
                       cwd=tmp_path, capture_output=True, timeout=180)
    tail = r.stderr.decode(errors="replace")[-3000:]
    assert r.returncode == 0, tail
    assert "Done " in tail and " runs in " in tail, tail
    runs = int(tail.rsplit("Done ", 1)[1].split()[0])
    assert runs > 1000, tail                      # it really fuzzed, not just started
    assert not list(tmp_path.glob("crash-*")), tail
