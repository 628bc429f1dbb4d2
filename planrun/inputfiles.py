"""Read an input file (plan, vars file, MCP config) only if it is a regular file.

A FIFO given as a plan would block `open()` forever (and a device may never end), so
anything that is not a regular file is refused at once: `stat` first, then open with
O_NONBLOCK (opening a FIFO then cannot block) and check again with `fstat`, in case the
path was swapped between the two. A file larger than `MAX_INPUT_BYTES` is refused too,
before it is read (a sparse file can claim a gigabyte and cost nothing on disk): plans, vars
files and MCP configs are hand-written text, and reading one whole must not exhaust memory.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["MAX_INPUT_BYTES", "NotARegularFile", "read_regular_file"]

MAX_INPUT_BYTES = 16 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotARegularFile(OSError):
    """The path names something other than a regular file; `kind` says what."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path = path
        self.kind = kind


def _check(path: str, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise NotARegularFile(path, kind)


def read_regular_file(path: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file at `path` (symlinks followed).

    Raises NotARegularFile for a directory, FIFO, socket or device, OSError(EFBIG) for a
    file larger than `limit` bytes (refused before it is read when its size says so), and
    OSError (FileNotFoundError...) as `open` would for anything else.
    """
    if "\0" in path:  # os.stat would raise a bare ValueError
        raise OSError(errno.EINVAL, "the file name contains a NUL byte", path)
    _check(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        _check(path, st.st_mode)
        too_large = OSError(errno.EFBIG, f"it is larger than {limit >> 20} MiB", path)
        if st.st_size > limit:
            raise too_large
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)  # the size may change after fstat
        if len(data) > limit:
            raise too_large
        return data
    finally:
        os.close(fd)
