"""`llmtriage run -- CMD ARGS...`: run a job, pass its output through, diagnose it when it fails.

* The child's output is read by one thread, in the order the child wrote it, and goes through
  unchanged (raw `os.read`/`os.write`, no line buffering added) and into a copy (`--log FILE`, else
  a temporary file kept only when the command fails). How the child's stdout and stderr are read
  (`streams`):
  - `merged` (the default when our stdout and stderr are the same file, pipe or terminal, as on a
    terminal, with `> log 2>&1` or `2>&1 | tee`): both through one channel, so the copy and the
    pass-through keep the exact order the child wrote; a pseudo-terminal when our stdout is a
    terminal (the child still sees a terminal: progress bars, colours, line buffering), else one pipe.
    Everything is passed to our stdout, which is where both streams were going anyway;
  - `separate` (the default when they differ, as with `2> err.log` or two captured pipes): two
    pipes, so the child's stdout reaches our stdout and its stderr our stderr; the copy holds each
    stream in its own order, and the two interleaved in the order the wrapper received them (lines
    written at the same instant to both streams may swap).
  `PYTHONUNBUFFERED=1` is set for the child unless already set, because a Python child writing to a
  pipe would otherwise block-buffer its own output.
* The child runs in its own process group. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the wrapper
  are forwarded to that group (as a terminal does with Ctrl-C); when standard input is our
  terminal, the child's group is made the terminal's foreground group, so Ctrl-C reaches the job
  exactly once and a job that prompts can still read the terminal.
* The child is tied to the wrapper: on Linux it gets SIGTERM when the wrapper dies, even by
  SIGKILL (prctl PR_SET_PDEATHSIG), so a killed wrapper never leaves the job running.
* Our own stdout going away (`llmtriage run -- job | head -1`) does not stop the job: SIGPIPE is
  ignored in the wrapper (the child keeps the default), the reader keeps draining the child into
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
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, BinaryIO, Callable, Optional, Sequence

try:                      # POSIX only: the pseudo-terminal of `merged` streams on a terminal
    import fcntl
    import termios
except ImportError:       # pragma: no cover - Windows
    fcntl = termios = None  # type: ignore[assignment]

FORWARDED = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT") if hasattr(signal, n))
_CHUNK = 65536
PR_SET_PDEATHSIG = 1
PDEATH_SIGNAL = signal.SIGTERM     # lets a launcher (torchrun) stop its own workers
STREAMS = ("auto", "merged", "separate")


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


def _pump(sources: dict[int, int], log: BinaryIO, lock: threading.Lock) -> None:
    """Read every source fd (-> its destination fd) in one thread, in the order data arrives; copy it
    to `log`. A destination that goes away (a closed pipe) stops being written; reading goes on."""
    sel = selectors.DefaultSelector()
    for fd in sources:
        sel.register(fd, selectors.EVENT_READ)
    alive = {dst: True for dst in sources.values()}
    logging = True
    while sel.get_map():
        for key, _ in sel.select():
            fd = key.fd
            try:
                chunk = os.read(fd, _CHUNK)
            except InterruptedError:
                continue
            except OSError:             # EIO: every holder of the pseudo-terminal closed it
                chunk = b""
            if not chunk:
                sel.unregister(fd)
                os.close(fd)
                continue
            dst = sources[fd]
            if alive[dst]:
                alive[dst] = _write_all(dst, chunk)
            if logging:
                with lock:
                    try:
                        log.write(chunk)
                    except (ValueError, OSError):   # the copy was closed (a grandchild outlived the
                        logging = False             # child) or the disk is full: drain quietly
    sel.close()


def same_target(a: int, b: int) -> bool:
    """Whether fds `a` and `b` write to the same file, pipe or terminal."""
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _open_pty(like: int) -> Optional[tuple[int, int]]:
    """(master, slave) of a pseudo-terminal with the window size of terminal `like`; output is not
    post-processed (a newline stays a newline: our own terminal adds its carriage return)."""
    if termios is None:
        return None
    try:
        master, slave = os.openpty()
    except OSError:
        return None
    try:
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        _copy_winsize(like, slave)
    except (OSError, termios.error):
        pass
    return master, slave


def _copy_winsize(src: int, dst: int) -> None:
    try:
        fcntl.ioctl(dst, termios.TIOCSWINSZ, fcntl.ioctl(src, termios.TIOCGWINSZ, b"\0" * 8))
    except (OSError, AttributeError):
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
                stdout_fd: int = 1, stderr_fd: int = 2, streams: str = "auto") -> tuple[int, Optional[str]]:
    """Run `argv`; returns (exit status, path of the kept log copy or None).
    `diagnose(stream, log_name, returncode)` is called when the command fails. `streams`: merged,
    separate, or auto (merged when `stdout_fd` and `stderr_fd` write to the same place)."""
    tty = _tty_fd()
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    prctl = _libc_prctl()
    parent = os.getpid()
    merged = streams == "merged" or (streams == "auto" and same_target(stdout_fd, stderr_fd))
    pty = _open_pty(stdout_fd) if merged and os.isatty(stdout_fd) else None

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
    # the child's ends, and ours: {our read fd: where its data goes}
    if pty is not None:
        child_out = child_err = pty[1]
        sources = {pty[0]: stdout_fd}
    elif merged:
        r, w = os.pipe()
        child_out = child_err = w
        sources = {r: stdout_fd}
    else:
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        child_out, child_err = w1, w2
        sources = {r1: stdout_fd, r2: stderr_fd}
    try:
        proc = subprocess.Popen(list(argv), stdout=child_out, stderr=child_err, bufsize=0, env=env,
                                preexec_fn=child_setup)
    except (FileNotFoundError, PermissionError, OSError) as exc:
        for fd in {*sources, child_out, child_err}:
            os.close(fd)
        log.close()
        if not log_path:
            os.unlink(keep_path)  # type: ignore[arg-type]
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        _write_all(stderr_fd, f"llmtriage run: {argv[0]}: {exc.strerror or exc}\n".encode())
        return code, None
    for fd in {child_out, child_err}:       # only the child holds its ends: EOF when it (and its heirs) exit
        os.close(fd)

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
        if pty is not None and hasattr(signal, "SIGWINCH"):    # a resized terminal resizes the child's
            previous[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, lambda *_: _copy_winsize(stdout_fd, pty[0]))
        for s in FORWARDED:
            try:
                previous[s] = signal.signal(s, forward)
            except (OSError, ValueError):
                pass
    lock = threading.Lock()
    reader = threading.Thread(target=_pump, args=(sources, log, lock), daemon=True)
    reader.start()
    try:
        returncode = proc.wait()
        reader.join(timeout=5.0)   # a daemon grandchild may keep the output open: don't wait for it forever
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
