"""Files written whole or not at all: a temporary file created anew beside the target, then
renamed over it (the cache's entries and blobs, the report files, the `write_file` tool); and
what must never be renamed over (a link, a FIFO, a device)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from typing import BinaryIO

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def atomic_write(
    path: str,
    data: bytes,
    mode: int | None = None,
    *,
    dir_fd: int | None = None,
    new: int = 0o644,
) -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename (with
    `dir_fd`: `path` is a name in that directory). The temporary file is created anew, never
    opened through a link; `mode` and `new` as for write_renamed."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
    write_renamed(dir_fd, tmp, dir_fd, path, lambda f: f.write(data), mode, new)


def write_renamed(
    src: int | None,
    tmp: str,
    dst: int | None,
    name: str,
    write: Callable[[BinaryIO], object],
    mode: int | None,
    new: int = 0o644,
) -> None:
    """Create `tmp` anew in directory `src` (never through a link), write it with `write` and
    give it `mode` (None: `new` less the umask, as a plain open gives), then rename it to
    `name` in directory `dst` (a link there is replaced, not followed); `tmp` is removed on
    failure. A directory of None: `tmp` and `name` are paths."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    fd = os.open(tmp, flags, new if mode is None else 0o600, dir_fd=src)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if mode is not None:
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=src, dst_dir_fd=dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=src)
        raise


def file_kind(mode: int) -> str:
    """What a file of `st_mode` `mode` is, in words: "a symbolic link", "a FIFO", ..."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def not_replaceable(path: str) -> str | None:
    """What is at `path` when a rename must not replace it (a symbolic link, a FIFO, a device:
    as root, `/dev/null` itself), in words; None for a regular file or nothing."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None  # missing, or unreachable: writing it says why
    return None if stat.S_ISREG(mode) else file_kind(mode)
