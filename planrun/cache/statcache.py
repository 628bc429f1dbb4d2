"""Stat records: a file whose size, mtime, inode and ctime are unchanged is not read again.

One file per working directory (`.planrun/stat-records`), never shared between machines. A
record is kept only when the file's mtime and ctime are safely older than the moment it was
hashed (taken as the moment its walk's files began to be read, which is earlier): a file
written in the same clock tick as it was read could change again without its stat moving
("racily clean", as git calls it), so such a file is simply hashed next time too.

Walk digests: a step's source files enter its key as one digest of their sorted paths and
content hashes (planrun.cache.keys.sources_part). It is remembered under a fingerprint of what
the walk saw (every path with its size, mtime, inode and ctime), so a step whose files did not
move gets it from one dictionary lookup instead of one record lookup per file. The same racy
rule applies: a walk with a file too recent to trust is not remembered.

The file is binary so that loading 10,000 records costs a few milliseconds: a header line with
the number of records and of walk digests, then per record 32 bytes of stat (size, mtime_ns,
inode, ctime_ns), per record 32 bytes of SHA-256, per walk digest 64 bytes (fingerprint,
digest), then the paths separated by NUL (which no path holds). Anything unreadable counts as
no records (it is only a shortcut).
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
import time
from collections.abc import Iterable

from planrun.atomicwrite import atomic_write
from planrun.cache.globs import FileStat
from planrun.cache.keys import sources_part
from planrun.cache.safeio import read_regular, regular_fd

RACY_NS = 2_000_000_000  # mtime granularity on the coarsest common file systems, and some slack
_MAGIC = b"planrun-stat-records 4\n"
_STAT = struct.Struct("<QqQq")
MAX_RECORDS = 500_000
MAX_WALKS = 100_000
MAX_FILE_BYTES = 256 << 20  # MAX_RECORDS of ~400-byte paths; larger is ignored (and rewritten)

Sig = tuple[int, int, int, int]
_READ = 1 << 20


def hash_file(path: str) -> str:
    """SHA-256 of a regular file's bytes (hex); OSError for anything else (a FIFO is opened
    without blocking, then refused). Plain reads on the descriptor, no file object: a fresh
    checkout hashes every source, and this is half the CPU of a buffered file (5,000 files of
    4 KB: ~60 ms instead of ~110 ms; worker threads were measured slower, not faster).

    A file smaller than the read size is read with one byte more asked than `fstat` gave when
    it was opened: a read of a regular file that returns fewer bytes than asked is at the end
    of the file (Linux reads the page cache up to the size, and a signal interrupts a read of
    a local file only to end the process), so one read and no second, empty one to see the end
    (one system call less per file; and a buffer of the file's size, not of 1 MiB, which glibc
    would map and unmap for every file). What it returns is the bytes the file held when it
    was opened, as a reader going on to an empty read would have had them with nothing
    appended between its reads: an append after that read is a change after the hash either
    way, and the stat records notice it (the size moved). Anything else reads on to an empty
    read, as before: a size of 0 (a file system that does not know it: /proc), a read shorter
    than the size (the file shrank, or a network file system or damaged disk cut the read
    short, whose next read then says why) or longer (the file grew after `fstat`)."""
    fd, st = regular_fd(path)
    try:
        size = st.st_size
        data = os.read(fd, size + 1 if 0 < size < _READ else _READ)
        h = hashlib.sha256(data)
        if 0 < len(data) == size < _READ:
            return h.hexdigest()
        while chunk := os.read(fd, _READ):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


class StatRecords:
    """path -> (stat signature, sha256), and walk fingerprint -> walk digest; loaded once and
    saved once per run (when changed).

    The per-file records are decoded on first use: a run whose walks are all remembered never
    needs them. Loaded records stay in the three arrays they were decoded into (a record's
    signature is set to None when it is dropped); records made in this run are in `fresh`."""

    def __init__(self, path: str, walks: dict[bytes, bytes] | None = None) -> None:
        self.path = path
        self.walks = walks if walks is not None else {}  # loaded: fingerprint -> walk digest
        self.fresh: dict[str, tuple[Sig, str]] = {}  # hashed in this run
        self.fresh_walks: dict[bytes, bytes] = {}  # walks seen in this run
        self.dropped = False  # a loaded record was dropped: save
        self._lock = threading.Lock()
        self._index: dict[str, int] | None = None  # loaded: path -> position
        self._sigs: list[Sig | None] = []
        self._digests = b""
        self._raw: tuple[bytes, int, int, int] | None = None  # (data, n, stats at, names at)

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._decode()
        assert self._index is not None
        return self._index

    @property
    def sigs(self) -> list[Sig | None]:
        if self._index is None:
            self._decode()
        return self._sigs

    @property
    def digests(self) -> bytes:
        if self._index is None:
            self._decode()
        return self._digests

    @property
    def dirty(self) -> bool:
        return (
            bool(self.fresh) or self.dropped or any(w not in self.walks for w in self.fresh_walks)
        )

    @classmethod
    def load(cls, path: str) -> StatRecords:
        """The records at `path`; unreadable or foreign content counts as no records."""
        try:
            data = read_regular(path, MAX_FILE_BYTES)
            if not data.startswith(_MAGIC):
                return cls(path)
            head_end = data.index(b"\n", len(_MAGIC))
            n, m = (int(x) for x in data[len(_MAGIC) : head_end].split(b" "))
            at = head_end + 1
            hashes_end = at + n * (_STAT.size + 32)
            walks_end = hashes_end + m * 64
            if n < 0 or m < 0 or len(data) < walks_end:
                return cls(path)
            w = data[hashes_end:walks_end]
            records = cls(path, {w[i : i + 32]: w[i + 32 : i + 64] for i in range(0, m * 64, 64)})
            records._raw = (data, n, at, walks_end)
            return records
        except (OSError, ValueError):
            return cls(path)

    def _decode(self) -> None:
        """The per-file records of the loaded file; anything inconsistent counts as none."""
        self._index = {}
        if self._raw is None:
            return
        data, n, at, names_at = self._raw
        self._raw = None
        try:
            names = data[names_at:]
            paths = names.decode("utf-8", "surrogatepass").split("\0") if n else []
            if len(paths) != n or (not n and names):
                return
            stats_end = at + n * _STAT.size
            self._sigs = list(_STAT.iter_unpack(data[at:stats_end]))
            self._digests = data[stats_end : stats_end + n * 32]
            self._index = dict(zip(paths, range(n), strict=True))
        except (ValueError, struct.error):
            self._index, self._sigs, self._digests = {}, [], b""

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
        return self._hashes(cwd, [(f.path, (f.size, f.mtime_ns, f.inode, f.ctime_ns))])[f.path]

    def walk_digest(
        self, cwd: str, found: dict[str, os.stat_result]
    ) -> tuple[str, dict[str, str] | None]:
        """The walk digest of `found` (keys.sources_part), and the path -> hash map when it had
        to be made (None: the digest was remembered, nothing was looked up file by file)."""
        # In the walk's order, not sorted: the fingerprint only has to be the same when nothing
        # moved (a directory lists its names in the same order until it changes), and stat
        # results visited in the order they were made are ~5x cheaper to read than sorted.
        pack = _STAT.pack
        try:
            stats = b"".join(
                [
                    pack(st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
                    for st in found.values()
                ]
            )
            names = "\0".join(found).encode("utf-8", "surrogatepass")
        except (struct.error, UnicodeEncodeError):  # a stat beyond 64 bits: no shortcut
            files = self.digests_of(cwd, found)
            return sources_part(files), files
        # The count first: fixed-size stats, then the names, can then be split one way only.
        fp = hashlib.sha256(b"%d\n" % len(found) + stats + names).digest()
        known = self.fresh_walks.get(fp) or self.walks.get(fp)
        if known is not None:
            self.fresh_walks[fp] = known  # used: kept when the file is rewritten
            return known.hex(), None
        files = self.digests_of(cwd, found)
        part = sources_part(files)
        newest = max((max(st.st_mtime_ns, st.st_ctime_ns) for st in found.values()), default=0)
        if time.time_ns() - newest > RACY_NS:
            with self._lock:
                self.fresh_walks[fp] = bytes.fromhex(part)
        return part, files

    def digests_of(self, cwd: str, found: dict[str, os.stat_result]) -> dict[str, str]:
        """path -> content hash for the files of a walk (in no order: the key sorts); a file is
        read only when its size, mtime, inode or ctime differs from its record (or it has none).

        Each file is looked up once (its loaded record, then this run's), and the files read are
        recorded together after the walk, under one lock, against one clock reading taken before
        the first was read (stricter than each file's own moment: a file too recent then is not
        trusted): a fresh checkout reads every file, and the Python around each read costs about
        as much as its SHA-256."""
        return self._hashes(
            cwd,
            (
                (p, (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns))
                for p, st in found.items()
            ),
        )

    def _hashes(self, cwd: str, files: Iterable[tuple[str, Sig]]) -> dict[str, str]:
        """path -> content hash of each (path, stat signature), as digests_of says."""
        out: dict[str, str] = {}
        get, sigs, digests, fresh = self.index.get, self.sigs, self.digests, self.fresh.get
        read: list[tuple[str, Sig, str]] = []
        trusted_before = time.time_ns() - RACY_NS
        join = os.path.join
        for p, sig in files:
            i = get(p)
            if i is not None and sigs[i] == sig:
                out[p] = digests[i * 32 : i * 32 + 32].hex()
                continue
            got = fresh(p)
            if got is not None and got[0] == sig:
                out[p] = got[1]
                continue
            out[p] = digest = hash_file(join(cwd, p))
            read.append((p, sig, digest))
        if read:
            self._record(read, trusted_before)
        return out

    def _record(self, read: list[tuple[str, Sig, str]], trusted_before: int) -> None:
        """Keep the records of files just read whose mtime and ctime are both before
        `trusted_before`; a younger file's record is dropped (it could change unseen)."""
        with self._lock:
            for rel, sig, digest in read:
                if max(sig[1], sig[3]) < trusted_before:
                    self.fresh[rel] = (sig, digest)
                else:
                    self.forget(rel)

    def forget(self, rel: str) -> None:
        """Drop a file's record (planrun itself is about to replace the file)."""
        self.fresh.pop(rel, None)
        i = self.index.get(rel)
        if i is not None and self.sigs[i] is not None:
            self.sigs[i] = None
            self.dropped = True

    def save(self) -> None:
        """Write the records atomically if they changed; failure to write only costs speed.

        Walk digests not used in this run are kept up to a bound (an older state of the tree
        may come back); past it, only this run's are."""
        if not self.dirty:
            return
        walks = dict(self.fresh_walks)
        if len(self.walks) + len(walks) <= MAX_WALKS:
            walks = {**self.walks, **walks}
        try:
            n, per_file, names = self._file_section()
            head = b"%d %d\n" % (n, len(walks))
            blob = b"".join([_MAGIC, head, per_file, *(f + d for f, d in walks.items()), names])
        except (struct.error, UnicodeEncodeError):
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            atomic_write(self.path, blob)
        except OSError:
            return
        self.fresh.clear()
        self.dropped = False
        self.walks = walks

    def _file_section(self) -> tuple[int, bytes, bytes]:
        """(number of records, their stats and hashes, their NUL-separated paths) to save."""
        if self._raw is not None:  # never decoded, so unchanged: copied as it was read
            data, n, at, names_at = self._raw
            return n, data[at : at + n * (_STAT.size + 32)], data[names_at:]
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
        names = "\0".join(paths).encode("utf-8", "surrogatepass")
        return len(paths), b"".join(stats) + b"".join(hashes), names
