"""Directory listings remembered by the directory's stat, so an unchanged source directory is
not listed again (only its files are stat-ed).

Adding, removing or renaming an entry changes its directory's mtime and ctime, so a
directory whose size, mtime, inode and ctime are those of a remembered listing still has
those names. As for files (planrun.cache.statcache), a directory changed within the last
two seconds is not remembered: it could change again within the same clock tick.

One file per working directory (`.planrun/listings`): a header line, then per directory 32
bytes of stat, the lengths of its path and of its names (4 bytes each), the path, and the
names separated by NUL. Anything unreadable counts as no listings (they are only a shortcut).
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time

from planrun.atomicwrite import atomic_write
from planrun.cache import statcache
from planrun.cache.safeio import read_regular

_MAGIC = b"planrun-listings 1\n"
_STAT = struct.Struct("<QqQq")
_LENGTHS = struct.Struct("<II")
MAX_LISTINGS = 100_000  # past this, only the directories listed in the latest run are kept
MAX_FILE_BYTES = 256 << 20


class Listings:
    """directory path -> (its stat, its names), loaded once and saved once per run."""

    def __init__(self, path: str, known: dict[str, bytes] | None = None) -> None:
        self.path = path
        self.known = known if known is not None else {}  # loaded: dir -> stat + NUL-joined names
        self.seen: dict[str, bytes] = {}  # listed in this run (remembered or new)
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str) -> Listings:
        """The listings at `path`; unreadable or foreign content counts as none."""
        try:
            data = read_regular(path, MAX_FILE_BYTES)
        except OSError:
            return cls(path)
        if not data.startswith(_MAGIC):
            return cls(path)
        known: dict[str, bytes] = {}
        at, end = len(_MAGIC), len(data)
        try:
            while at < end:
                plen, blen = _LENGTHS.unpack_from(data, at + _STAT.size)
                start = at + _STAT.size + _LENGTHS.size
                stop = start + plen + blen
                if stop > end:
                    return cls(path)  # truncated
                name = data[start : start + plen].decode("utf-8", "surrogatepass")
                known[name] = data[at : at + _STAT.size] + data[start + plen : stop]
                at = stop
        except (struct.error, UnicodeDecodeError):
            return cls(path)
        return cls(path, known)

    def names(self, fd: int, path: str) -> list[str]:
        """The names in the directory open as `fd` (at `path`): remembered, or listed."""
        st = os.fstat(fd)
        try:
            sig = _STAT.pack(st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        except struct.error:  # a stat beyond 64 bits: no shortcut
            return os.listdir(fd)
        got = self.known.get(path)
        if got is not None and got[: _STAT.size] == sig:
            self.seen[path] = got
            body = got[_STAT.size :]
            return body.decode("utf-8", "surrogatepass").split("\0") if body else []
        names = os.listdir(fd)
        if (
            time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > statcache.RACY_NS
        ):  # one racy window for files and directories
            with contextlib.suppress(UnicodeEncodeError), self._lock:
                self.seen[path] = sig + "\0".join(names).encode("utf-8", "surrogatepass")
        return names

    @property
    def dirty(self) -> bool:
        return any(self.known.get(p) != v for p, v in self.seen.items())

    def save(self) -> None:
        """Write the listings atomically if they changed; failure to write only costs speed."""
        if not self.dirty:
            return
        keep = dict(self.seen)
        if len(self.known) + len(keep) <= MAX_LISTINGS:
            keep = {**self.known, **keep}
        parts = [_MAGIC]
        try:
            for name, value in keep.items():
                raw = name.encode("utf-8", "surrogatepass")
                body = value[_STAT.size :]
                parts += [value[: _STAT.size], _LENGTHS.pack(len(raw), len(body)), raw, body]
        except (UnicodeEncodeError, struct.error):
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            atomic_write(self.path, b"".join(parts))
        except OSError:
            return
        self.known = keep
