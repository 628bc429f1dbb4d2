"""Opening state files safely: never through a symbolic link, never anything but a regular file.

A repository can ship `.planrun/state/NAME.json.lock` as a symlink to a file of the user's, and
`--state PATH` can name any file at all. Every state file (`.json`, `.journal`, `.lock` and the
temporary files they are written through) is therefore opened with O_NOFOLLOW (a link is refused,
not followed), O_NONBLOCK (a FIFO cannot hang the open) and checked with fstat to be a regular
file; temporary files are created with O_CREAT|O_EXCL, so an existing name is never written
through. Each refusal is a StateError (exit 4) of one line that names the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from planrun.atomicwrite import file_kind
from planrun.errors import StateError

_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def refuse(path: str, what: str) -> StateError:
    """The one-line error for a state file that is not a regular file of its own."""
    return StateError(f"state file {path} is {what}: refusing to use it (remove or rename it)")


def check_not_special(path: str) -> None:
    """StateError if `path` exists and is a symlink, FIFO, device or anything but a regular file."""
    try:
        st = os.lstat(path)
    except OSError:
        return  # missing, or its directory cannot be made: writing it will say so
    if not stat.S_ISREG(st.st_mode):
        raise refuse(path, file_kind(st.st_mode))


def open_regular(path: str, flags: int, mode: int = 0o600, *, own: bool = False) -> int:
    """os.open without following a symlink; the fd of a regular file, else StateError.

    `own`: the file is written in place (the lock), so it must not be a hard link to a file
    elsewhere either.

    FileNotFoundError and FileExistsError pass through (callers handle races with them).
    """
    try:
        fd = os.open(path, flags | _SAFE, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refuse(path, "a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(path, file_kind(st.st_mode))
        if own and st.st_nlink > 1:
            raise refuse(path, "a hard link to another file")
    except BaseException:
        os.close(fd)
        raise
    return fd


MAX_STATE_BYTES = 256 << 20
"""A state file or journal larger than this is refused unread: one a repository ships can be
any size, and reading it whole (then parsing it) would take memory without bound. A real state
stays far below it: a 10,000-step run's is a few MB, and each stream a step keeps is capped
(PLANRUN_MAX_OUTPUT, 1 MiB by default)."""


def read_regular(path: str, limit: int = MAX_STATE_BYTES) -> bytes | None:
    """The bytes of the regular file `path`, None if it does not exist; StateError otherwise
    (a file over `limit` bytes too, without reading it)."""
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read state file {path}: {exc.strerror}") from None
    try:
        chunks = []
        total = 0
        too_big = os.fstat(fd).st_size > limit
        while not too_big and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            total += len(chunk)
            too_big = total > limit  # it may grow while it is read
        if too_big:
            raise StateError(
                f"state file {path} is larger than {limit >> 20} MiB: refusing to read it"
                " (remove it, or point --state elsewhere)"
            )
        return b"".join(chunks)
    finally:
        os.close(fd)


def create_temp(path: str, flags: int = 0) -> int:
    """Create the temporary file `path` afresh (O_EXCL): a leftover or planted name is removed
    first (unlinking a symlink removes the link, never its target)."""
    for _ in range(3):
        try:
            return open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags)
        except FileExistsError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    raise StateError(f"cannot create temporary state file {path}: it keeps reappearing")


def path_text(path: str | os.PathLike[str]) -> str:
    """`path` as text, spelled as pathlib spells it: no `.` parts, no doubled or trailing `/`.
    The state modules work on text paths (pathlib costs ~5 ms of every start-up to import)."""
    text = os.fspath(path)
    lead = "/" if text.startswith("/") else ""
    return lead + "/".join(p for p in text.split("/") if p and p != ".") or lead or "."


def parent_dir(path: str) -> str:
    """The directory holding `path` (`.` for a bare name)."""
    return os.path.dirname(path) or "."


def check_state_dirs(path: str) -> None:
    """Under the default `.planrun/state/`, neither directory may be a symbolic link: a
    repository could ship `.planrun` pointing anywhere (another user's directory, /tmp), and the
    run's state would be written there. A `--state` path elsewhere is the user's own choice."""
    state_dir = os.path.dirname(path)
    dot_dir = os.path.dirname(state_dir)
    if os.path.basename(state_dir) != "state" or os.path.basename(dot_dir) != ".planrun":
        return
    for d in (dot_dir, state_dir):
        try:
            st = os.lstat(d)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise StateError(
                f"state directory {d} is a symbolic link: refusing to use it (remove or rename it)"
            )
