"""Where a restore writes a file before renaming it into place: `.planrun/tmp/`.

A file restored from the cache is written whole under a temporary name, then renamed over the
output. Written next to the output, a run killed midway (SIGKILL, a power cut) would leave a
partial `.NAME.<hex>.tmp` in the output folder for good, where the step's own globs see it.
Written here instead (the same file system as the working directory, so the rename is
atomic), a killed run leaves its partial file in planrun's own directory, named after its
process; the next restore removes the files of processes that are gone. Only when the output
lies on another file system (a mount inside the working directory) is the file written next
to it, as before.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable
from typing import BinaryIO

from planrun.atomicwrite import write_renamed
from planrun.state.lock import pid_alive

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_NAME = re.compile(r"restore-(\d+)-[0-9a-f]{12}\.tmp\Z")


class RestoreTemp:
    """`.planrun/tmp` under one working directory, opened on first use (never through a
    symbolic link), with the leftovers of dead runs removed then."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._fd: int | None = None
        self._usable = True

    def write(self, dst: int, name: str, write: Callable[[BinaryIO], None], mode: int) -> None:
        """Write `name` in the directory `dst` (a descriptor) whole with `write`, then `mode`."""
        fd = self._open()
        if fd is not None:
            try:
                write_renamed(fd, f"restore-{os.getpid()}-{os.urandom(6).hex()}.tmp", dst, name,
                              write, mode)  # fmt: skip
                return
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                self._usable = False  # another file system: next to the output from now on
        write_renamed(dst, f".{name}.{os.urandom(6).hex()}.tmp", dst, name, write, mode)

    def _open(self) -> int | None:
        if self._fd is not None or not self._usable:
            return self._fd
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.join(self.cwd, ".planrun"))
            state = os.open(os.path.join(self.cwd, ".planrun"), _DIR_FLAGS)
            try:
                with contextlib.suppress(FileExistsError):
                    os.mkdir("tmp", 0o700, dir_fd=state)
                self._fd = os.open("tmp", _DIR_FLAGS, dir_fd=state)
            finally:
                os.close(state)
        except OSError:
            self._usable = False
            return None
        _remove_leftovers(self._fd)
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def _remove_leftovers(fd: int) -> None:
    """Remove the temporary files of restores whose process is gone (killed midway)."""
    try:
        names = os.listdir(fd)
    except OSError:
        return
    for name in names:
        found = _NAME.match(name)
        if found is None or pid_alive(int(found.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
