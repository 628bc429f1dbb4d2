"""Stat records: a file whose size, mtime, inode and ctime are unchanged is not read again.

One file per working directory (`.planrun/stat-records`), never shared between machines. A
record is kept only when the file's mtime and ctime are safely older than the moment it was
hashed: a file written in the same clock tick as it was read could change again without its
stat moving ("racily clean", as git calls it), so such a file is simply hashed next time too.

The file is binary so that loading 10,000 records costs a few milliseconds: a header line, the
paths as one JSON list, then per path 32 bytes of stat (size, mtime_ns, inode, ctime_ns) and 32
bytes of SHA-256. Anything unreadable counts as no records (it is only a shortcut).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
import time
from dataclasses import dataclass, field

from planrun.cache.globs import FileStat
from planrun.cache.safeio import open_regular, read_regular

RACY_NS = 2_000_000_000  # mtime granularity on the coarsest common file systems, and some slack
_MAGIC = b"planrun-stat-records 2\n"
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


@dataclass
class StatRecords:
    """path -> (stat signature, sha256), loaded once and saved once per run."""

    path: str
    index: dict[str, int] = field(default_factory=dict)  # loaded: path -> position
    sigs: list[Sig] = field(default_factory=list)
    digests: bytes = b""
    fresh: dict[str, tuple[Sig, str]] = field(default_factory=dict)  # hashed in this run
    gone: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def dirty(self) -> bool:
        return bool(self.fresh or self.gone)

    @classmethod
    def load(cls, path: str) -> StatRecords:
        """The records at `path`; unreadable or foreign content counts as no records."""
        try:
            data = read_regular(path)
            if not data.startswith(_MAGIC):
                return cls(path)
            head_end = data.index(b"\n", len(_MAGIC))
            paths = json.loads(data[len(_MAGIC) : head_end])
            body = data[head_end + 1 :]
            n = len(paths)
            if not isinstance(paths, list) or len(body) != n * (_STAT.size + 32):
                return cls(path)
            sigs = list(_STAT.iter_unpack(body[: n * _STAT.size]))
            index = {p: i for i, p in enumerate(paths) if isinstance(p, str)}
            return cls(path, index, sigs, body[n * _STAT.size :])
        except (OSError, ValueError, struct.error):
            return cls(path)

    def lookup(self, rel: str) -> tuple[Sig, str] | None:
        """The record of `rel`, if any."""
        got = self.fresh.get(rel)
        if got is not None:
            return got
        i = self.index.get(rel)
        if i is None or rel in self.gone:
            return None
        return self.sigs[i], self.digests[i * 32 : i * 32 + 32].hex()

    def digest(self, cwd: str, f: FileStat) -> str:
        """The content hash of `f`, from its record when its stat is unchanged, else read."""
        sig = (f.size, f.mtime_ns, f.inode, f.ctime_ns)
        i = self.index.get(f.path)
        if i is not None and self.sigs[i] == sig and f.path not in self.gone:
            return self.digests[i * 32 : i * 32 + 32].hex()
        got = self.fresh.get(f.path)
        if got is not None and got[0] == sig:
            return got[1]
        digest = hash_file(os.path.join(cwd, f.path))
        with self._lock:
            if time.time_ns() - max(f.mtime_ns, f.ctime_ns) > RACY_NS:
                self.fresh[f.path] = (sig, digest)
            else:
                self.forget(f.path)
        return digest

    def forget(self, rel: str) -> None:
        """Drop a file's record (planrun itself is about to replace the file)."""
        self.fresh.pop(rel, None)
        if rel in self.index:
            self.gone.add(rel)

    def save(self) -> None:
        """Write the records atomically if they changed; failure to write only costs speed."""
        if not self.dirty:
            return
        merged: dict[str, tuple[Sig, bytes]] = {}
        # Records of deleted files pile up; past the bound, start again from this run's.
        keep_old = len(self.index) + len(self.fresh) <= MAX_RECORDS
        for p, i in self.index.items() if keep_old else ():
            if p not in self.gone:
                merged[p] = (self.sigs[i], self.digests[i * 32 : i * 32 + 32])
        for p, (sig, hexdigest) in self.fresh.items():
            merged[p] = (sig, bytes.fromhex(hexdigest))
        paths = list(merged)
        try:
            blob = b"".join(
                [
                    _MAGIC,
                    json.dumps(paths, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                    b"\n",
                    b"".join(_STAT.pack(*merged[p][0]) for p in paths),
                    b"".join(merged[p][1] for p in paths),
                ]
            )
        except (struct.error, UnicodeEncodeError):
            return
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(blob)
            os.replace(tmp, self.path)
            self.fresh.clear()
            self.gone.clear()
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
