"""Which directories planrun may use as its cache, and which files in them are its own.

A cache directory planrun fills is marked by its `CACHEDIR.TAG` (the standard signature, so
backup tools skip it, then a comment line naming planrun; every planrun so far wrote the same
text). planrun uses a directory that is marked, missing, empty, or that holds nothing but
files named as planrun names them (a cache whose tag could not be written); any other
directory holds files of someone else's (`--cache-dir .` in a project): a run does without the
cache and `cache clean|prune` refuse it. Neither `entries/` nor `blobs/` may be a symbolic
link (a repository can ship `.planrun/cache/entries -> ~`): below the cache directory nothing
is opened through a link (the directory itself may be one the user named).

Within a cache, only planrun's own files are ever removed: `entries/<sha256>.json` that start
with an entry's header line, `blobs/<sha256>`, and the temporary files of their atomic writes.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat

from planrun.atomicwrite import atomic_write

SUBDIRS = ("entries", "blobs")
TAG_NAME = "CACHEDIR.TAG"
TAG = (
    b"Signature: 8a477f597d28d172789f06886806bc55\n"
    b"# This directory is planrun's cache; `planrun cache clean` empties it.\n"
)
_MARK = re.compile(
    rb"Signature: 8a477f597d28d172789f06886806bc55\r?\n# This directory is planrun's cache"
)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_HEX64 = "[0-9a-f]{64}"
_ENTRY = re.compile(rf"{_HEX64}\.json")
_BLOB = re.compile(_HEX64)
# `.NAME.RANDOM.tmp`, as safeio.atomic_write and CacheStore.put_blob_file name them
_TMP = {
    "entries": re.compile(rf"\.{_HEX64}\.json\.[0-9a-f]{{12}}\.tmp"),
    "blobs": re.compile(rf"\.{_HEX64}\.[0-9a-f]{{12}}\.tmp"),
    "": re.compile(r"\.CACHEDIR\.TAG\.[0-9a-f]{12}\.tmp"),
}
_ENTRY_HEAD = re.compile(rb"planrun-cache-entry \d+ [0-9a-f]{64}\n")


class NotACache(OSError):
    """The directory is not one planrun may use: it holds other files, or a link."""


def own_name(sub: str, name: str) -> bool:
    """Whether `name` in `entries/` or `blobs/` is named as planrun names its files."""
    pattern = _ENTRY if sub == "entries" else _BLOB
    return bool(pattern.fullmatch(name))


def own_temporary(sub: str, name: str) -> bool:
    """Whether `name` in `sub` ("" for the cache directory) is one of planrun's temporary
    files (a write under way, or left by a writer that crashed)."""
    return bool(_TMP[sub].fullmatch(name))


def is_entry_file(dir_fd: int, name: str) -> bool:
    """Whether `entries/NAME` is a regular file starting with an entry's header line."""
    return _starts_with(dir_fd, name, _ENTRY_HEAD, 128)


def is_marked(root_fd: int) -> bool:
    """Whether the directory open as `root_fd` holds planrun's CACHEDIR.TAG (a regular file)."""
    return _starts_with(root_fd, TAG_NAME, _MARK, 4096)


def _starts_with(dir_fd: int, name: str, head: re.Pattern[bytes], size: int) -> bool:
    """Whether `name` in `dir_fd` is a regular file whose first `size` bytes match `head`."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and bool(head.match(os.read(fd, size)))
    except OSError:
        return False
    finally:
        os.close(fd)


def open_subdir(root: str, sub: str, *, create: bool = False) -> int:
    """A descriptor of `root/sub`, never through a link there (OSError: missing, a link, not a
    directory). `create`: made first when missing (`root` too)."""
    if create:
        os.makedirs(root, exist_ok=True)
    root_fd = os.open(root, DIR_FLAGS)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(sub, dir_fd=root_fd)
        return os.open(sub, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=root_fd)
    finally:
        os.close(root_fd)


def not_a_directory(root: str) -> str | None:
    """Why no cache can ever be at `root`: it is a file, or a path below one (said by the file,
    so that the user sees what is in the way). None when `root` is, or may become, a directory."""
    path = os.path.abspath(root)
    while not os.path.lexists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    if os.path.isdir(path):
        return None
    return (
        f"{root} is not a directory"
        if path == os.path.abspath(root)
        else f"{root}: {path} is a file"
    )


def refusal(root: str) -> str | None:
    """Why planrun must neither use nor change `root` as its cache, or None when it may (a
    missing directory may be made). A directory planrun cannot read is left to fail later,
    as a miss."""
    try:
        root_fd = os.open(root, DIR_FLAGS)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return not_a_directory(root)
    except OSError:
        return None
    try:
        for sub in SUBDIRS:
            try:
                st = os.stat(sub, dir_fd=root_fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                return f"{os.path.join(root, sub)} is a symbolic link"
            if not stat.S_ISDIR(st.st_mode):
                return f"{os.path.join(root, sub)} is not a directory"
        if is_marked(root_fd) or _only_own_files(root_fd):
            return None
        return f"{root} is not a planrun cache (it holds other files and no planrun mark)"
    finally:
        os.close(root_fd)


def _only_own_files(root_fd: int) -> bool:
    """Whether the directory holds nothing but `entries/` and `blobs/` with planrun's files."""
    try:
        names = os.listdir(root_fd)
    except OSError:
        return False
    for name in names:
        if own_temporary("", name):
            continue
        if name == TAG_NAME and is_marked(root_fd):  # marked since the caller looked
            continue
        if name not in SUBDIRS:
            return False
        try:
            fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=root_fd)
        except OSError:
            return False
        try:
            if not all(_own_file(fd, name, n) for n in os.listdir(fd)):
                return False
        except OSError:
            return False
        finally:
            os.close(fd)
    return True


def _own_file(dir_fd: int, sub: str, name: str) -> bool:
    if not (own_name(sub, name) or own_temporary(sub, name)):
        return False
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:  # renamed or removed since the listing: a writer of planrun's
        return True
    return stat.S_ISREG(st.st_mode)


def mark(root_fd: int) -> None:
    """Write planrun's CACHEDIR.TAG into the directory (unless it is there)."""
    if not is_marked(root_fd):
        atomic_write(TAG_NAME, TAG, dir_fd=root_fd)
