"""`planrun cache info|clean|prune`: the cache directory's size, emptying it, trimming it.

Pruning removes entries least recently used first (an entry's mtime is refreshed on every
hit), then every blob no remaining entry refers to. Blobs younger than a grace period are
kept even when unreferenced: a run sharing the directory may be about to write their entry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass

from planrun.cache.safeio import read_regular
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
    path: str
    bytes: int
    mtime: float


def _disk_bytes(st: os.stat_result) -> int:
    blocks = getattr(st, "st_blocks", None)
    return blocks * 512 if blocks is not None else st.st_size


def _files(directory: str) -> list[_File]:
    """The regular files in `directory`; none when it is a symbolic link (`entries -> ~`):
    pruning never removes a file outside the cache directory."""
    out = []
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return []
        it = os.scandir(directory)
    except OSError:
        return []
    with it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if e.is_file(follow_symlinks=False):
                out.append(_File(e.path, _disk_bytes(st), st.st_mtime))
    return out


def directory_bytes(root: str) -> int:
    """The cache directory's size on disk (like `du`), its own directories included."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in [".", *files]:
            with contextlib.suppress(OSError):
                total += _disk_bytes(os.lstat(os.path.join(dirpath, name)))
    return total


def cache_info(root: str) -> dict[str, object]:
    """{dir, entries, bytes}."""
    entries = [f for f in _files(os.path.join(root, "entries")) if f.path.endswith(".json")]
    return {"dir": root, "entries": len(entries), "bytes": directory_bytes(root)}


def clean(root: str) -> int:
    """Remove every entry and blob; returns the number of entries removed."""
    count = int(cache_info(root)["entries"])  # type: ignore[call-overload]
    for sub in ("entries", "blobs"):
        shutil.rmtree(os.path.join(root, sub), ignore_errors=True)
    return count


def _refs(path: str) -> set[str]:
    """The blobs one entry refers to (none when it cannot be read: it holds nothing to keep)."""
    try:
        doc = loads(read_regular(path).partition(b"\n")[2])
        refs = {str(o["hash"]) for o in doc.get("outputs", [])}
        material = doc.get("material")
        if isinstance(material, dict) and material.get("sources"):
            refs.add(str(material["sources"]))
        return refs
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return set()


def prune(root: str, max_size: int | None = None, older_than: float | None = None) -> int:
    """Drop entries unused for `older_than` seconds, then the least recently used until the
    directory fits `max_size` bytes, with the blobs no remaining entry needs; returns the
    number of entries removed."""
    entries_dir, blobs_dir = os.path.join(root, "entries"), os.path.join(root, "blobs")
    now = time.time()
    entries = sorted(
        (f for f in _files(entries_dir) if f.path.endswith(".json")), key=lambda f: f.mtime
    )
    refs = {f.path: _refs(f.path) for f in entries}
    counts: dict[str, int] = {}
    for blobs in refs.values():
        for b in blobs:
            counts[b] = counts.get(b, 0) + 1
    blob_bytes = {os.path.basename(f.path): f for f in _files(blobs_dir)}
    size = directory_bytes(root) if max_size is not None else 0
    removed = 0

    def drop(entry: _File) -> None:
        nonlocal size, removed
        if _unlink(entry.path):
            removed += 1
        size -= entry.bytes
        for b in refs[entry.path]:
            counts[b] -= 1
            if counts[b] == 0 and b in blob_bytes and _unlink(blob_bytes[b].path):
                size -= blob_bytes.pop(b).bytes

    kept = []
    for f in entries:
        if older_than is not None and now - f.mtime > older_than:
            drop(f)
        else:
            kept.append(f)
    for name, f in list(blob_bytes.items()):  # unreferenced, and too old to be mid-store
        if name.endswith(".tmp"):
            if now - f.mtime > 86400:  # left by a writer that crashed
                _unlink(f.path)
        elif not counts.get(name) and now - f.mtime > BLOB_GRACE_S and _unlink(f.path):
            size -= blob_bytes.pop(name).bytes
    while max_size is not None and kept and size > max_size:
        drop(kept.pop(0))
    return removed


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
