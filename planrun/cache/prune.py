"""`planrun cache info|clean|prune`: the cache directory's size, emptying it, trimming it.

Only planrun's own files are counted and removed (planrun.cache.cachedir says which), through
descriptors of `entries/` and `blobs/` opened without following a link. Pruning removes entries least recently used first (an entry's mtime is refreshed on every
hit), then every blob no remaining entry refers to. Blobs younger than a grace period are
kept even when unreferenced: a run sharing the directory may be about to write their entry.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from planrun.cache.cachedir import (
    SUBDIRS,
    is_entry_file,
    open_subdir,
    own_name,
    own_temporary,
)
from planrun.cache.safeio import read_regular
from planrun.cache.store import MAX_ENTRY_BYTES
from planrun.text import os_cause
from planrun.untrusted_json import loads

BLOB_GRACE_S = 600.0
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)(?:I?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """Bytes from `500`, `10K`, `1.5M`, `2G` (powers of 1024); ValueError otherwise."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"bad size {text!r}: use bytes, or a number with K, M or G (e.g. 500M)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


@dataclass
class _File:
    name: str
    bytes: int
    mtime: float


def _disk_bytes(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)
    return blocks * 512 if blocks is not None else st.st_size


@contextlib.contextmanager
def _opened(root: str, sub: str) -> Iterator[int | None]:
    """`root/sub` open as a descriptor, or None when it is missing, a link or not a directory:
    nothing outside the cache directory is ever listed or removed."""
    try:
        fd = open_subdir(root, sub)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _named(fd: int | None, sub: str, temporary: bool) -> Iterator[tuple[str, os.stat_result]]:
    """The names in `sub` open as `fd` that planrun writes there (with `temporary`: its
    temporary files), each with its stat (a link not followed)."""
    if fd is None:
        return
    try:
        names = os.listdir(fd)
    except OSError:
        return
    for name in names:
        if own_temporary(sub, name) if temporary else own_name(sub, name):
            with contextlib.suppress(OSError):
                yield name, os.stat(name, dir_fd=fd, follow_symlinks=False)


def _files(fd: int | None, sub: str, *, temporary: bool = False) -> list[_File]:
    """planrun's own regular files in `sub` open as `fd` (with `temporary`: only its
    temporary files); entries only when they start with an entry's header (one named like
    an entry that does not is not one planrun wrote)."""
    if fd is None:
        return []
    return [
        _File(name, _disk_bytes(st), st.st_mtime)
        for name, st in _named(fd, sub, temporary)
        if stat.S_ISREG(st.st_mode) and (sub != "entries" or temporary or is_entry_file(fd, name))
    ]


def squatters(root: str) -> list[str]:
    """Paths in `entries/` and `blobs/` under a name planrun writes that hold something else
    (a directory, a link...): planrun did not write them, so `clean` and `prune` keep them, and
    no step whose file has that name can be stored until they are removed."""
    out = []
    for sub in SUBDIRS:
        with _opened(root, sub) as fd:
            found = [n for n, st in _named(fd, sub, False) if not stat.S_ISREG(st.st_mode)]
        out += [os.path.join(root, sub, name) for name in sorted(found)]
    return out


def directory_bytes(root: str) -> int:
    """The cache directory's size on disk (like `du`), its own directories included."""
    total = 0
    with contextlib.suppress(OSError):
        st = os.stat(root)  # (a --cache-dir that is a link is its target)
        if not stat.S_ISDIR(st.st_mode):
            return 0
        total = _disk_bytes(st)
    todo = [root]  # without recursion: a tree nested deeper than Python's stack is counted
    while todo:
        with contextlib.suppress(OSError), os.scandir(todo.pop()) as it:
            for item in it:
                with contextlib.suppress(OSError):
                    total += _disk_bytes(item.stat(follow_symlinks=False))
                    if item.is_dir(follow_symlinks=False):
                        todo.append(item.path)
    return total


def cache_info(root: str) -> dict[str, object]:
    """{dir, entries, bytes}."""
    with _opened(root, "entries") as fd:
        entries = len(_files(fd, "entries"))
    return {"dir": root, "entries": entries, "bytes": directory_bytes(root)}


def clean(root: str, failed: list[str] | None = None) -> int:
    """Remove every entry and blob planrun wrote (its temporary files too), nothing else, and
    keep the directories and the mark; returns the number of entries removed, and adds to
    `failed` why each file that could not be removed stayed. The caller checks first that
    `root` is a planrun cache (planrun.cache.cachedir.refusal)."""
    count = 0
    for sub in SUBDIRS:
        with _opened(root, sub) as fd:
            unlink = _Unlink(fd, os.path.join(root, sub), failed)
            for f in _files(fd, sub) + _files(fd, sub, temporary=True):
                if unlink(f.name) and sub == "entries" and f.name.endswith(".json"):
                    count += 1
    return count


def _refs(fd: int, name: str) -> set[str]:
    """The blobs one entry refers to (none when it cannot be read: it holds nothing to keep)."""
    try:
        raw = read_regular(name, MAX_ENTRY_BYTES, flags=os.O_NOFOLLOW, dir_fd=fd)
        doc = loads(raw.partition(b"\n")[2])
        refs = {str(o["hash"]) for o in doc.get("outputs", [])}
        material = doc.get("material")
        if isinstance(material, dict) and material.get("sources"):
            refs.add(str(material["sources"]))
        return refs
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def prune(
    root: str,
    max_size: int | None = None,
    older_than: float | None = None,
    failed: list[str] | None = None,
) -> int:
    """Drop entries unused for `older_than` seconds, then the least recently used until the
    directory fits `max_size` bytes, with the blobs no remaining entry needs; returns the
    number of entries removed, and adds to `failed` why each file that could not be removed
    stayed. Only planrun's own files are removed; the caller checks first that `root` is a
    planrun cache."""
    with _opened(root, "entries") as entries_fd, _opened(root, "blobs") as blobs_fd:
        if entries_fd is None and blobs_fd is None:
            return 0
        unlinks = (
            _Unlink(entries_fd, os.path.join(root, "entries"), failed),
            _Unlink(blobs_fd, os.path.join(root, "blobs"), failed),
        )
        return _prune(root, entries_fd, blobs_fd, max_size, older_than, unlinks)


def _prune(
    root: str,
    entries_fd: int | None,
    blobs_fd: int | None,
    max_size: int | None,
    older_than: float | None,
    unlinks: tuple[_Unlink, _Unlink],
) -> int:
    now = time.time()
    entries = sorted(_files(entries_fd, "entries"), key=lambda f: f.mtime)
    refs = {f.name: _refs(entries_fd, f.name) for f in entries if entries_fd is not None}
    counts: dict[str, int] = {}
    for blobs in refs.values():
        for b in blobs:
            counts[b] = counts.get(b, 0) + 1
    blob_files = {f.name: f for f in _files(blobs_fd, "blobs")}
    size = directory_bytes(root) if max_size is not None else 0
    removed = 0
    unlink_entry, unlink_blob = unlinks

    def drop(entry: _File) -> None:
        nonlocal size, removed
        if unlink_entry(entry.name):
            removed += 1
        size -= entry.bytes
        for b in refs[entry.name]:
            counts[b] -= 1
            if counts[b] == 0 and b in blob_files and unlink_blob(b):
                size -= blob_files.pop(b).bytes

    kept = []
    for f in entries:
        if older_than is not None and now - f.mtime > older_than:
            drop(f)
        else:
            kept.append(f)
    for sub, fd, unlink in (
        ("entries", entries_fd, unlink_entry),
        ("blobs", blobs_fd, unlink_blob),
    ):
        for f in _files(fd, sub, temporary=True):
            if now - f.mtime > 86400 and unlink(f.name):  # left by a writer that crashed
                size -= f.bytes
    for name, f in list(blob_files.items()):  # unreferenced, and too old to be mid-store
        if not counts.get(name) and now - f.mtime > BLOB_GRACE_S and unlink_blob(name):
            size -= blob_files.pop(name).bytes
    while max_size is not None and kept and size > max_size:
        drop(kept.pop(0))
    return removed


class _Unlink:
    """Removes a file from one subdirectory open as `fd` (at `where`); True when it did. A file
    already gone (another run removed it) is no failure; any other refusal (a read-only file
    system, no permission) adds `cannot remove PATH: why` to `failed`."""

    def __init__(self, fd: int | None, where: str, failed: list[str] | None) -> None:
        self.fd, self.where, self.failed = fd, where, failed

    def __call__(self, name: str) -> bool:
        if self.fd is None:
            return False
        try:
            os.unlink(name, dir_fd=self.fd)
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            if self.failed is not None:
                path = os.path.join(self.where, name)
                self.failed.append(f"cannot remove {path}: {os_cause(exc)}")
            return False
