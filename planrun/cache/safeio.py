"""Reading files the cache did not make itself: only regular files, never a blocking open
(the cache writes its own files with planrun.atomicwrite).

A FIFO put where an entry, a blob, a stat-record file or a source was would make a plain
`open()` wait forever for a writer; opening non-blocking and checking `fstat` first turns
it into an OSError, which every caller already treats as "not there". `dir_fd` names a file
relative to an open directory (the cache's `entries/` or `blobs/`, opened without following
a link), so a link put in place of that directory later is never followed.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def regular_fd(
    path: str, *, flags: int = 0, dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """A descriptor open for reading on `path` and its stat, if it is a regular file; OSError
    otherwise (nothing left open). `flags` are added to the open (O_NOFOLLOW: a symbolic link
    is refused too). Non-blocking, which a regular file ignores."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC | flags, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_regular(path: str, *, flags: int = 0, dir_fd: int | None = None) -> BinaryIO:
    """Open `path` for reading if it is a regular file; OSError otherwise. `flags` are added
    to the open (O_NOFOLLOW: a symbolic link is refused too)."""
    fd, _st = regular_fd(path, flags=flags, dir_fd=dir_fd)
    try:
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: str, limit: int | None = None, *, flags: int = 0, dir_fd: int | None = None
) -> bytes:
    """The bytes of a regular file; OSError for anything else (or one over `limit` bytes)."""
    return read_regular_stat(path, limit, flags=flags, dir_fd=dir_fd)[0]


def read_regular_stat(
    path: str, limit: int | None = None, *, flags: int = 0, dir_fd: int | None = None
) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file and its stat as it was opened; OSError for anything else,
    or for a file larger than `limit` bytes (a shortcut file grown absurdly is not loaded).
    `flags` are added to the open (O_NOFOLLOW: a symbolic link is refused too).

    Plain reads on the descriptor, no file object: a run reads one entry per cached step, and
    a buffered reader costs as much as the reads themselves on small files."""
    fd, st = regular_fd(path, flags=flags, dir_fd=dir_fd)
    try:
        size = st.st_size
        if limit is not None and size > limit:
            raise OSError(errno.EFBIG, "file too large", path)
        data = os.read(fd, size) if size else b""
        if len(data) < size or not size:  # read short, or a size the file system does not know
            parts = [data]
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
                if limit is not None and sum(map(len, parts)) > limit:
                    raise OSError(errno.EFBIG, "file too large", path)
            data = b"".join(parts)
        return data, st
    finally:
        os.close(fd)
