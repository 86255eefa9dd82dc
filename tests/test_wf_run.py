"""`llmtriage run` keeps the order the child wrote (issue 17, item 6): one channel when our stdout
and stderr go to the same place (a pipe, a file, a pseudo-terminal), two when they differ."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes and pseudo-terminals")

N = 400
# A child that alternates streams on every line, flushing each: the worst case for two readers.
CHILD = ("import sys\n"
         f"for i in range({N}):\n"
         "    s = sys.stdout if i % 2 == 0 else sys.stderr\n"
         "    s.write(f'line {i} ' + ('out' if i % 2 == 0 else 'err') + '\\n')\n"
         "    s.flush()\n"
         "sys.exit(3)\n")
EXPECTED = "".join(f"line {i} {'out' if i % 2 == 0 else 'err'}\n" for i in range(N))


def _env(cache: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "COLUMNS")}
    e["LLMTRIAGE_CACHE_DIR"] = str(cache)
    return e


def _wrapper(tmp_path: Path, log: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "llmtriage", "run", "--log", str(log), *extra, "--", sys.executable, "-c", CHILD]


@pytest.mark.slow   # six wrapped runs; test_streams_merged_forces_one_channel checks one in the fast tier
def test_same_destination_keeps_the_exact_order_every_run(tmp_path, warm_cache):
    """stdout and stderr into one pipe (as `2>&1 | tee`, or a CI runner): the kept log and the
    pass-through have the child's order, identical on every run."""
    for k in range(6):
        log = tmp_path / f"run{k}.log"
        r = subprocess.run(_wrapper(tmp_path, log), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env=_env(warm_cache), timeout=120)
        assert r.returncode == 3
        assert log.read_text() == EXPECTED, k
        assert r.stdout.decode().startswith(EXPECTED), k        # then the diagnosis


def test_separate_destinations_keep_each_stream_apart(tmp_path, warm_cache):
    """Captured separately (as `2> err.log`): the child's stdout reaches our stdout only, its stderr our
    stderr only, and the copy holds every line with each stream in its own order."""
    log = tmp_path / "copy.log"
    r = subprocess.run(_wrapper(tmp_path, log), capture_output=True, env=_env(warm_cache), timeout=120)
    assert r.returncode == 3
    outs = [ln for ln in EXPECTED.splitlines(True) if ln.endswith("out\n")]
    errs = [ln for ln in EXPECTED.splitlines(True) if ln.endswith("err\n")]
    assert r.stdout.decode() == "".join(outs)
    assert r.stderr.decode().startswith("".join(errs))
    kept = log.read_text().splitlines(True)
    assert sorted(kept) == sorted(EXPECTED.splitlines(True))
    assert [x for x in kept if x.endswith("out\n")] == outs and [x for x in kept if x.endswith("err\n")] == errs


def test_streams_merged_forces_one_channel(tmp_path, warm_cache):
    log = tmp_path / "copy.log"
    r = subprocess.run(_wrapper(tmp_path, log, "--streams", "merged"), capture_output=True, env=_env(warm_cache),
                       timeout=120)
    assert r.returncode == 3
    assert log.read_text() == EXPECTED and r.stdout.decode() == EXPECTED
    assert "exited with code 3" in r.stderr.decode()


def test_on_a_terminal_the_child_gets_a_pseudo_terminal_in_order(tmp_path, warm_cache):
    """Our stdout and stderr on one terminal: the child sees a terminal on both streams, and the
    terminal and the copy show its lines in the order written (no carriage returns in the copy)."""
    child = "import os, sys\nprint('isatty', os.isatty(1), os.isatty(2), flush=True)\n" + CHILD
    master, slave = os.openpty()
    log = tmp_path / "copy.log"
    p = subprocess.Popen([sys.executable, "-m", "llmtriage", "run", "--log", str(log), "--no-color", "--",
                          sys.executable, "-c", child], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                         env=_env(warm_cache))
    os.close(slave)
    seen = b""
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:          # EIO: the wrapper closed the terminal
                break
            if not data:
                break
            seen += data
    finally:
        os.close(master)
        p.wait(timeout=120)
    assert p.returncode == 3
    assert log.read_text() == "isatty True True\n" + EXPECTED
    assert "\r" not in log.read_text()
    assert EXPECTED.replace("\n", "\r\n") in seen.decode()
