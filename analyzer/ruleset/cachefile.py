"""Private, data-only cache files (the rule cache and the optional Hyperscan database cache).

A cache file is trusted only if it cannot have been planted: the cache folder is created 0700
whatever the umask (a folder of someone else is never used), a file is read only when it is a regular file
(never through a symlink) owned by the current user and writable by nobody else, and every file
carries a checksum of its payload (CRC-32 and length) that is checked on read. Files are written atomically (a private
temp file in the same folder, then rename). Nothing here deserialises code: callers store JSON
and raw bytes (Hyperscan's own serialisation), never pickle.
"""
from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython builds always have it
    from hashlib import blake2b

T = TypeVar("T")
MAGIC = b"llmtriage-cache 2 "
MAX_CACHE_BYTES = 64 << 20
KEEP_PER_KIND = 16      # files kept per kind (the name before its first '-'): the most recently used


def digest(data: bytes) -> str:
    """The payload's CRC-32 and length: catches truncation and corruption. (Planting is prevented by
    the owner and mode checks, not by this; a keyed hash of 3 MB cost 13 ms of every start.)"""
    return f"{zlib.crc32(data):08x}-{len(data):x}"


def cache_dir() -> Optional[Path]:
    """The cache folder (LLMTRIAGE_CACHE_DIR, else $XDG_CACHE_HOME or ~/.cache, /llmtriage), or None."""
    if os.environ.get("LLMTRIAGE_NO_CACHE"):
        return None
    if "LLMTRIAGE_CACHE_DIR" in os.environ:
        return Path(os.environ["LLMTRIAGE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llmtriage"


def _private(st: os.stat_result) -> bool:
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    return st.st_uid == uid and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def ensure_dir(path: Path) -> bool:
    """Create `path` 0700 (any umask); True if it is a folder of ours we may use. An existing folder
    keeps its mode (LLMTRIAGE_CACHE_DIR may name a folder shared with other things): every file in
    it is checked on its own (owner, mode, regular, digest)."""
    try:
        created = not path.exists()
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            return False
        uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
        if st.st_uid != uid:
            return False                      # someone else's folder: never read or write there
        if created and stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
        return True
    except OSError:
        return False


def read(path: Path) -> Optional[bytes]:
    """The payload of cache file `path`, or None when missing, not ours, loose, foreign or corrupt."""
    opened = _open_checked(path)              # (a file that fails the checks is removed: the caller rebuilds it)
    if opened is None:
        return None
    fd = opened[0]
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            blob = fh.read(MAX_CACHE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    head, sep, payload = blob.partition(b"\n")
    if not sep or not head.startswith(MAGIC) or head[len(MAGIC):].decode("ascii", "replace") != digest(payload):
        remove(path)
        return None
    return payload


def _open_checked(path: Path) -> Optional[tuple[int, os.stat_result]]:
    """An fd on cache file `path` when it is a regular file of ours writable by nobody else and not
    too big (its mtime is touched: see _prune), else None (a file that fails the checks is removed)."""
    if not ensure_dir(path.parent):
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > MAX_CACHE_BYTES:
            os.close(fd)
            remove(path)
            return None
        try:
            os.utime(fd)
        except (OSError, NotImplementedError):
            pass
    except OSError:
        os.close(fd)
        return None
    return fd, st


STREAM_CHUNK = 256 << 10


def read_stream(path: Path, consume: Callable[[bytes, int], int]) -> Optional[tuple[int, int, int, int]]:
    """Stream the payload of cache file `path` (the same checks as `read`) without holding it:
    `consume(chunk, offset)` gets successive pieces of the payload (and where each starts in the
    file, for `read_tail` later) and returns -1 to go on, or k >= 0 when
    it wants no more: the payload from byte k of that chunk on (the tail) is only checksummed.
    Nothing `consume` made may be trusted unless this returns (fd, tail offset in the file, tail
    length, tail CRC-32): the file is ours and its digest matched. The fd stays open (the caller
    closes it) so that the tail can be read back later with `read_tail`, from the very file that
    was checked even when the name has been replaced or removed since. None: missing, not ours,
    loose or corrupt (then removed; an exception from `consume` closes the fd and propagates)."""
    got = _open_checked(path)
    if got is None:
        return None
    fd, _ = got
    ok = False
    try:
        head = b""
        while b"\n" not in head and len(head) <= len(MAGIC) + 40:
            more = os.read(fd, 64)
            if not more:
                break
            head += more
        line, sep, first = head.partition(b"\n")
        if not sep or not line.startswith(MAGIC):
            remove(path)
            return None
        want = line[len(MAGIC):].decode("ascii", "replace")
        pos = len(line) + 1                      # file offset of the payload byte `first` starts with
        crc = length = 0
        tail_off, tail_crc, done = -1, 0, False
        chunk = first
        while True:
            if chunk:
                crc = zlib.crc32(chunk, crc)
                if done:
                    tail_crc = zlib.crc32(chunk, tail_crc)
                else:
                    k = consume(chunk, pos)
                    if k >= 0:
                        done = True
                        tail_off = pos + k
                        tail_crc = zlib.crc32(chunk[k:])
                pos += len(chunk)
                length += len(chunk)
            if length > MAX_CACHE_BYTES:
                break                            # grew past the limit while read: the digest fails
            chunk = os.read(fd, STREAM_CHUNK)
            if not chunk:
                break
        if not done:
            tail_off, tail_crc = pos, 0
        if want != f"{crc:08x}-{length:x}":
            remove(path)
            return None
        ok = True
        return fd, tail_off, pos - tail_off, tail_crc
    except OSError:
        return None
    finally:
        if not ok:
            os.close(fd)


def read_tail(fd: int, offset: int, length: int, crc: int) -> Optional[bytes]:
    """Bytes `read_stream` checked (the tail, or a piece `consume` noted with its CRC-32), read back
    from its fd; None if they no longer have that checksum."""
    try:
        if hasattr(os, "pread"):
            data = os.pread(fd, length, offset)
        else:  # pragma: no cover - non-POSIX
            os.lseek(fd, offset, os.SEEK_SET)
            data = os.read(fd, length)
    except OSError:
        return None
    return data if len(data) == length and zlib.crc32(data) == crc else None


def remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def write(path: Path, payload: bytes) -> bool:
    """Write `payload` (with its digest) to `path` atomically, mode 0600; False if it could not be."""
    if not ensure_dir(path.parent):
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + digest(payload).encode() + b"\n")
            fh.write(payload)
        os.replace(tmp, path)
    except OSError:
        remove(tmp)
        return False
    _prune(path)
    return True


def _prune(path: Path) -> None:
    """Keep the KEEP_PER_KIND most recently used files of `path`'s kind: every edited rule set, custom
    rule folder or test run keys new files, and the folder would otherwise grow without bound.
    Only regular files of ours are removed, never a link or another user's file."""
    kind = path.name.split("-", 1)[0] + "-"
    mine = []
    try:
        with os.scandir(path.parent) as it:
            for e in it:
                if not e.name.startswith(kind) or not e.is_file(follow_symlinks=False):
                    continue
                st = e.stat(follow_symlinks=False)
                if _private(st):
                    mine.append((st.st_mtime, e.name))
    except OSError:
        return
    mine.sort(reverse=True)
    for _, name in mine[KEEP_PER_KIND:]:
        if name != path.name:
            remove(path.parent / name)


def cached_json(path: Optional[Path], decode: Callable[[Any], T], compute: Callable[[], T],
                encode: Callable[[T], Any]) -> T:
    """A value kept as checked JSON in cache file `path`: `decode(body)` when the file is ours and
    decodes (a ValueError, KeyError, TypeError, AttributeError or UnicodeDecodeError means stale or
    planted: the file is removed), else `compute()`, written back as `encode(value)`. `path` None:
    no cache, just compute."""
    if path is not None:
        blob = read(path)
        if blob is not None:
            try:
                return decode(json.loads(blob.decode("utf-8", "surrogatepass")))
            except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
                remove(path)
    value = compute()
    if path is not None:
        write(path, json.dumps(encode(value), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return value
