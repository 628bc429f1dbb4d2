"""Reading files the cache did not make itself: only regular files, never a blocking open.

A FIFO put where an entry, a blob, a stat-record file or a source was would make a plain
`open()` wait forever for a writer; opening non-blocking and checking `fstat` first turns
it into an OSError, which every caller already treats as "not there".
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO


def open_regular(path: str) -> BinaryIO:
    """Open `path` for reading if it is a regular file; OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str) -> bytes:
    """The bytes of a regular file; OSError for anything else."""
    with open_regular(path) as f:
        return f.read()
