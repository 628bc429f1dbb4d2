"""Stat records: a file whose size, mtime, inode and ctime are unchanged is not read again.

One file per working directory (`.planrun/stat-records`), never shared between machines. A
record is kept only when the file's mtime and ctime are safely older than the moment it was
hashed: a file written in the same clock tick as it was read could change again without its
stat moving ("racily clean", as git calls it), so such a file is simply hashed next time too.

The file is binary so that loading 10,000 records costs a few milliseconds: a header line and
the number of records, then per record 32 bytes of stat (size, mtime_ns, inode, ctime_ns),
then per record 32 bytes of SHA-256, then the paths separated by NUL (which no path holds).
Anything unreadable counts as no records (it is only a shortcut).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
import time

from planrun.cache.globs import FileStat
from planrun.cache.safeio import open_regular, read_regular

RACY_NS = 2_000_000_000  # mtime granularity on the coarsest common file systems, and some slack
_MAGIC = b"planrun-stat-records 3\n"
_STAT = struct.Struct("<QqQq")
MAX_RECORDS = 500_000

Sig = tuple[int, int, int, int]


def hash_file(path: str) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class StatRecords:
    """path -> (stat signature, sha256), loaded once and saved once per run (when changed).

    Loaded records stay in the three arrays they were read into (a record's signature is set
    to None when it is dropped); records made in this run are in `fresh`."""

    def __init__(
        self,
        path: str,
        index: dict[str, int] | None = None,
        sigs: list[Sig | None] | None = None,
        digests: bytes = b"",
    ) -> None:
        self.path = path
        self.index = index if index is not None else {}  # loaded: path -> position
        self.sigs = sigs if sigs is not None else []
        self.digests = digests
        self.fresh: dict[str, tuple[Sig, str]] = {}  # hashed in this run
        self.dropped = False  # a loaded record was dropped: save
        self._lock = threading.Lock()

    @property
    def dirty(self) -> bool:
        return bool(self.fresh) or self.dropped

    @classmethod
    def load(cls, path: str) -> StatRecords:
        """The records at `path`; unreadable or foreign content counts as no records."""
        try:
            data = read_regular(path)
            if not data.startswith(_MAGIC):
                return cls(path)
            head_end = data.index(b"\n", len(_MAGIC))
            n = int(data[len(_MAGIC) : head_end])
            names_end = head_end + 1 + n * (_STAT.size + 32)
            body = data[head_end + 1 : names_end]
            paths = data[names_end:].decode("utf-8", "surrogateescape").split("\0")
            if n == 0 or len(paths) != n or len(body) != n * (_STAT.size + 32):
                return cls(path)
            sigs: list[Sig | None] = list(_STAT.iter_unpack(body[: n * _STAT.size]))
            return cls(path, dict(zip(paths, range(n), strict=True)), sigs, body[n * _STAT.size :])
        except (OSError, ValueError, struct.error):
            return cls(path)

    def lookup(self, rel: str) -> tuple[Sig, str] | None:
        """The record of `rel`, if any."""
        got = self.fresh.get(rel)
        if got is not None:
            return got
        i = self.index.get(rel)
        sig = None if i is None else self.sigs[i]
        if i is None or sig is None:
            return None
        return sig, self.digests[i * 32 : i * 32 + 32].hex()

    def digest(self, cwd: str, f: FileStat) -> str:
        """The content hash of `f`, from its record when its stat is unchanged, else read."""
        return self._digest(cwd, f.path, (f.size, f.mtime_ns, f.inode, f.ctime_ns))

    def digests_of(self, cwd: str, found: dict[str, os.stat_result]) -> dict[str, str]:
        """path -> content hash for the files of a walk, sorted by path; a file is read only
        when its size, mtime, inode or ctime differs from its record (or it has none).

        One pass per source file of every cached step on every run: kept to the bare minimum."""
        out: dict[str, str] = {}
        get, sigs, digests = self.index.get, self.sigs, self.digests
        for p in sorted(found):
            st = found[p]
            sig = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
            i = get(p)
            if i is not None and sigs[i] == sig:
                out[p] = digests[i * 32 : i * 32 + 32].hex()
            else:
                out[p] = self._digest(cwd, p, sig)
        return out

    def _digest(self, cwd: str, rel: str, sig: Sig) -> str:
        i = self.index.get(rel)
        if i is not None and self.sigs[i] == sig:
            return self.digests[i * 32 : i * 32 + 32].hex()
        got = self.fresh.get(rel)
        if got is not None and got[0] == sig:
            return got[1]
        digest = hash_file(os.path.join(cwd, rel))
        with self._lock:
            if time.time_ns() - max(sig[1], sig[3]) > RACY_NS:
                self.fresh[rel] = (sig, digest)
            else:
                self.forget(rel)
        return digest

    def forget(self, rel: str) -> None:
        """Drop a file's record (planrun itself is about to replace the file)."""
        self.fresh.pop(rel, None)
        i = self.index.get(rel)
        if i is not None and self.sigs[i] is not None:
            self.sigs[i] = None
            self.dropped = True

    def save(self) -> None:
        """Write the records atomically if they changed; failure to write only costs speed."""
        if not self.dirty:
            return
        paths: list[str] = []
        stats: list[bytes] = []
        hashes: list[bytes] = []
        # Records of deleted files pile up; past the bound, start again from this run's.
        keep_old = len(self.index) + len(self.fresh) <= MAX_RECORDS
        fresh = self.fresh
        for p, i in self.index.items() if keep_old else ():
            sig = self.sigs[i]
            if sig is not None and p not in fresh:
                paths.append(p)
                stats.append(_STAT.pack(*sig))
                hashes.append(self.digests[i * 32 : i * 32 + 32])
        for p, (sig, hexdigest) in fresh.items():
            paths.append(p)
            stats.append(_STAT.pack(*sig))
            hashes.append(bytes.fromhex(hexdigest))
        try:
            names = "\0".join(paths).encode("utf-8", "surrogateescape")
            blob = b"".join([_MAGIC, b"%d\n" % len(paths), *stats, *hashes, names])
        except (struct.error, UnicodeEncodeError):
            return
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path)
            self.fresh.clear()
            self.dropped = False
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
