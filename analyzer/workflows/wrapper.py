"""`llmtriage run -- CMD ARGS...`: run a job, pass its output through, diagnose it when it fails.

* stdout and stderr of the child go through unchanged to ours (raw `os.read`/`os.write` of whatever
  arrives, no line buffering added) and into a copy (`--log FILE`, else a temporary file that is
  kept only when the command fails). `PYTHONUNBUFFERED=1` is set for the child unless already set,
  because a Python child writing to a pipe would otherwise block-buffer its own output.
* The child runs in its own process group. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the wrapper
  are forwarded to that group (as a terminal does with Ctrl-C); when standard input is our
  terminal, the child's group is made the terminal's foreground group, so Ctrl-C reaches the job
  exactly once and a job that prompts can still read the terminal.
* The child is tied to the wrapper: on Linux it gets SIGTERM when the wrapper dies, even by
  SIGKILL (prctl PR_SET_PDEATHSIG), so a killed wrapper never leaves the job running.
* Our own stdout going away (`llmtriage run -- job | head -1`) does not stop the job: SIGPIPE is
  ignored in the wrapper (the child keeps the default), the pumps keep draining the child into
  the log copy, and the diagnosis still goes to stderr. A grandchild that outlives the child and
  keeps writing is drained quietly until the wrapper exits.
* Exit status: the child's; 128+N when it was killed by signal N (137 for SIGKILL). When it is
  non-zero the log copy, plus one line naming the exit status, is triaged and the diagnosis is
  printed to stderr.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import io
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, BinaryIO, Callable, Optional, Sequence

FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))
_CHUNK = 65536
PR_SET_PDEATHSIG = 1
PDEATH_SIGNAL = signal.SIGTERM     # lets a launcher (torchrun) stop its own workers


def _libc_prctl() -> Optional[Any]:
    """libc's prctl on Linux, loaded before fork (nothing is loaded between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


class _Chain(io.RawIOBase):
    """Read several binary streams one after another."""

    def __init__(self, *streams: BinaryIO):
        self._streams = list(streams)

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        while self._streams:
            data = self._streams[0].read(n) if n is not None and n >= 0 else self._streams[0].read()
            if data:
                return data
            self._streams.pop(0)
        return b""

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:   # our own stdout/stderr went away (closed pipe): keep the copy going
            return False
        view = view[n:]
    return True


def _pump(src: BinaryIO, dst_fd: int, log: BinaryIO, lock: threading.Lock) -> None:
    fd = src.fileno()
    alive = True
    logging = True
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        if alive:
            alive = _write_all(dst_fd, chunk)
        if logging:
            with lock:
                try:
                    log.write(chunk)
                except (ValueError, OSError):    # the copy was closed (a grandchild outlived the
                    logging = False              # child) or the disk is full: drain quietly
    try:
        src.close()
    except OSError:
        pass


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def status_line(returncode: int) -> str:
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return (f"llmtriage run: the command was killed by signal {sig} ({name}), "
                f"exited with code {128 + sig}")
    return f"llmtriage run: the command exited with code {returncode}"


def _tty_fd() -> Optional[int]:
    try:
        fd = sys.stdin.fileno()
        if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _give_terminal(fd: int, pgrp: int) -> None:
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.tcsetpgrp(fd, pgrp)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, old)


def run_command(argv: Sequence[str], *, log_path: Optional[str] = None,
                diagnose: Callable[[BinaryIO, str, int], None],
                stdout_fd: int = 1, stderr_fd: int = 2) -> tuple[int, Optional[str]]:
    """Run `argv`; returns (exit status, path of the kept log copy or None).
    `diagnose(stream, log_name, returncode)` is called when the command fails."""
    tty = _tty_fd()
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    prctl = _libc_prctl()
    parent = os.getpid()

    def child_setup() -> None:  # runs in the child between fork and exec
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(PDEATH_SIGNAL), 0, 0, 0)
            if os.getppid() != parent:          # the wrapper died before prctl took effect
                os._exit(128 + int(PDEATH_SIGNAL))
        if tty is not None:
            _give_terminal(tty, os.getpgrp())

    if log_path:
        log = open(log_path, "wb", buffering=0)
        keep_path: Optional[str] = log_path
    else:
        fd, tmp = tempfile.mkstemp(prefix="llmtriage-run-", suffix=".log")
        log = os.fdopen(fd, "wb", buffering=0)
        keep_path = tmp
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0, env=env,
                                preexec_fn=child_setup)
    except (FileNotFoundError, PermissionError, OSError) as exc:
        log.close()
        if not log_path:
            os.unlink(keep_path)  # type: ignore[arg-type]
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        _write_all(stderr_fd, f"llmtriage run: {argv[0]}: {exc.strerror or exc}\n".encode())
        return code, None

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            try:
                proc.send_signal(signum)
            except (ProcessLookupError, OSError):
                pass

    previous = {}
    if threading.current_thread() is threading.main_thread():
        if hasattr(signal, "SIGPIPE"):      # a closed stdout must not kill the wrapper (the child keeps SIG_DFL)
            previous[signal.SIGPIPE] = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        for s in FORWARDED:
            try:
                previous[s] = signal.signal(s, forward)
            except (OSError, ValueError):
                pass
    lock = threading.Lock()
    pumps = [threading.Thread(target=_pump, args=(proc.stdout, stdout_fd, log, lock), daemon=True),
             threading.Thread(target=_pump, args=(proc.stderr, stderr_fd, log, lock), daemon=True)]
    for t in pumps:
        t.start()
    try:
        returncode = proc.wait()
        for t in pumps:   # a daemon grandchild may keep the pipes open: don't wait for it forever
            t.join(timeout=5.0)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if tty is not None:
            _give_terminal(tty, os.getpgrp())
        with lock:
            log.close()
    if returncode == 0:
        if not log_path:
            os.unlink(keep_path)  # type: ignore[arg-type]
            keep_path = None
        return 0, keep_path
    with open(keep_path, "rb") as fh:  # type: ignore[arg-type]
        trailer = io.BytesIO(("\n" + status_line(returncode) + "\n").encode())
        diagnose(io.BufferedReader(_Chain(fh, trailer)), keep_path, returncode)  # type: ignore[arg-type]
    return exit_status(returncode), keep_path
