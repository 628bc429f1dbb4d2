"""Stat records: a file whose size, mtime, inode and ctime are unchanged is not read again.

One JSON file per working directory (`.planrun/stat-records.json`), never shared between
machines. A record is kept only when the file's mtime is safely older than the moment it was
hashed: a file written in the same clock tick as it was read could change again without its
mtime moving ("racily clean", as git calls it), so such a file is simply hashed next time too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field

from planrun.cache.globs import FileStat

RACY_NS = 2_000_000_000  # mtime granularity on the coarsest common file systems, and some slack
_FORMAT = 1


def hash_file(path: str) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class StatRecords:
    """path -> (size, mtime_ns, inode, ctime_ns, sha256), loaded once and saved once per run."""

    path: str
    records: dict[str, list[object]] = field(default_factory=dict)
    dirty: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, path: str) -> StatRecords:
        """The records at `path`; unreadable or foreign content counts as no records."""
        try:
            with open(path, "rb") as f:
                doc = json.loads(f.read())
            if isinstance(doc, dict) and doc.get("format") == _FORMAT:
                records = doc.get("files")
                if isinstance(records, dict):
                    return cls(path, records)
        except (OSError, ValueError):
            pass
        return cls(path)

    def digest(self, cwd: str, f: FileStat) -> str:
        """The content hash of `f`, from its record when its stat is unchanged, else read."""
        rec = self.records.get(f.path)
        if (
            rec is not None
            and len(rec) == 5
            and rec[0] == f.size
            and rec[1] == f.mtime_ns
            and rec[2] == f.inode
            and rec[3] == f.ctime_ns
            and isinstance(rec[4], str)
        ):
            return rec[4]
        digest = hash_file(os.path.join(cwd, f.path))
        with self._lock:
            if time.time_ns() - max(f.mtime_ns, f.ctime_ns) > RACY_NS:
                self.records[f.path] = [f.size, f.mtime_ns, f.inode, f.ctime_ns, digest]
                self.dirty = True
            elif self.records.pop(f.path, None) is not None:
                self.dirty = True
        return digest

    def forget(self, rel: str) -> None:
        """Drop a file's record (planrun itself is about to replace the file)."""
        with self._lock:
            if self.records.pop(rel, None) is not None:
                self.dirty = True

    def save(self) -> None:
        """Write the records atomically if they changed; failure to write only costs speed."""
        if not self.dirty:
            return
        tmp = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with self._lock:
                blob = json.dumps({"format": _FORMAT, "files": self.records}, separators=(",", ":"))
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(blob)
            os.replace(tmp, self.path)
            self.dirty = False
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
