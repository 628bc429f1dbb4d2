"""The cache directory: content-addressed blobs and one entry per key, shared safely.

Layout: `entries/<key>.json` (a header line with the body's SHA-256, then the JSON body) and
`blobs/<sha256>` (file contents). Everything is written to a temporary name in the same
directory and renamed into place, so readers see a whole file or none; entries are immutable
once written, so any number of processes may share the directory without a lock. A missing,
truncated or corrupt entry or blob is reported as a miss (with a warning), never raised.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, BinaryIO

from planrun.atomicwrite import atomic_write, write_renamed
from planrun.cache.cachedir import DIR_FLAGS, SUBDIRS, NotACache, mark, open_subdir, refusal
from planrun.cache.keys import CACHE_FORMAT
from planrun.cache.safeio import open_regular, read_regular, read_regular_stat
from planrun.text import os_cause
from planrun.untrusted_json import loads

_HEADER = "planrun-cache-entry"
_HEX = frozenset("0123456789abcdef")
MODE_BITS = 0o777  # restored: permissions; set-user/group-ID and sticky bits never are
TOUCH_S = 60.0  # an entry used less than this long ago is not marked used again
# Bounds memory whatever the directory (or a remote) holds: an entry planrun writes is a result
# (64 MiB at most from the tools that read text: tools/base.py MAX_RESULT_BYTES) and the output
# it replays (1 MiB a stream by default), with room for JSON's escapes. A larger one is neither
# stored (the step is said not to be, and runs each time) nor read (a miss).
MAX_ENTRY_BYTES = 96 << 20
# Output files up to this size are held in memory whole; larger ones are streamed in chunks
# into the store and back (a build's artifact may be larger than the memory planrun has).
INLINE_MAX = 8 << 20
CHUNK = 1 << 20
Warn = Callable[[str], None]


class CorruptCache(Exception):
    """Something in the cache directory is not what it claims to be."""


class Squatted(IsADirectoryError):
    """A directory planrun did not write stands where the store writes a file (`filename`)."""


def _blob_unreadable(digest: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"blob {digest[:12]} missing"
    return f"blob {digest[:12]} unreadable ({os_cause(exc)})"


def write_problem(exc: OSError) -> str:
    """Why the store could not write a file, in one plain sentence naming it (the store's
    OSErrors name the file in the cache directory), with what to do when planrun cannot."""
    if isinstance(exc, Squatted):
        return (
            f"{exc.filename} is a directory planrun did not write: remove it to cache this step"
            " (planrun cache clean keeps what planrun did not write)"
        )
    where = f"cannot write {exc.filename}" if exc.filename else "cannot write to the cache"
    return f"{where}: {os_cause(exc)}"


class OutputFile:
    """One file of an entry's output manifest."""

    __slots__ = ("path", "hash", "mode", "size")

    def __init__(self, path: str, hash: str, mode: int, size: int) -> None:
        self.path = path  # relative to the working directory, '/'-separated
        self.hash = hash
        self.mode = mode
        self.size = size

    def __repr__(self) -> str:
        return f"OutputFile({self.path!r}, {self.hash[:12]!r}, {self.mode:o}, {self.size})"

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "hash": self.hash, "mode": self.mode, "size": self.size}


class Entry:
    """One stored step execution."""

    __slots__ = (
        "key", "plan", "step", "result", "exit", "stdout", "stderr", "outputs", "material",
        "created",
    )  # fmt: skip

    def __init__(
        self,
        key: str,
        plan: str,
        step: str,
        result: Any,
        exit: int,
        stdout: str,
        stderr: str,
        outputs: list[OutputFile] | None = None,
        material: dict[str, Any] | None = None,
        created: float = 0.0,
    ) -> None:
        self.key, self.plan, self.step, self.result = key, plan, step, result
        self.exit, self.stdout, self.stderr = exit, stdout, stderr
        self.outputs = outputs if outputs is not None else []
        self.material = material if material is not None else {}
        self.created = created

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CACHE_FORMAT,
            "key": self.key,
            "plan": self.plan,
            "step": self.step,
            "created": self.created,
            "result": self.result,
            "exit": self.exit,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "outputs": [o.as_dict() for o in self.outputs],
            "material": self.material,
        }

    @classmethod
    def from_json(cls, doc: Any, key: str) -> Entry:
        try:
            if doc["format"] != CACHE_FORMAT or doc["key"] != key:
                raise CorruptCache("entry is for another key or format")
            outputs = [_output_file(o) for o in doc["outputs"]]
            created = float(doc["created"])
            if not math.isfinite(created):  # ("nan" as a string): JSON could not hold it again
                raise ValueError("created")
            return cls(
                key,
                str(doc["plan"]),
                str(doc["step"]),
                doc["result"],
                int(doc["exit"]),
                str(doc["stdout"]),
                str(doc["stderr"]),
                outputs,
                dict(doc["material"]),
                created,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptCache(f"entry is malformed ({type(exc).__name__})") from None


def parse_entry(raw: bytes, key: str) -> Entry:
    """An entry from its file's bytes (a header line with the body's SHA-256, then the JSON
    body); CorruptCache when it is not a whole, well-formed entry for `key`."""
    return Entry.from_json(entry_doc(raw), key)


def entry_doc(raw: bytes) -> Any:
    """The JSON document of an entry file's bytes, its header and checksum checked (the
    fields are not: Entry.from_json does that); CorruptCache when it is not a whole entry."""
    try:
        head, _, body = raw.partition(b"\n")
        parts = head.decode("ascii").split(" ")
        if len(parts) != 3 or parts[0] != _HEADER or parts[1] != str(CACHE_FORMAT):
            raise CorruptCache("bad header")
        if hashlib.sha256(body).hexdigest() != parts[2]:
            raise CorruptCache("checksum mismatch (truncated or altered)")
        return loads(body)
    except (UnicodeDecodeError, ValueError):
        raise CorruptCache("not a cache entry") from None


def entry_bytes(doc: dict[str, Any]) -> bytes:
    """An entry file's bytes: the header line with the body's SHA-256, then the JSON body."""
    try:
        body = json.dumps(doc, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8 (a lone surrogate): escaped
        body = json.dumps(doc, default=str).encode("ascii")
    head = f"{_HEADER} {CACHE_FORMAT} {hashlib.sha256(body).hexdigest()}\n".encode()
    return head + body


def _output_file(o: Any) -> OutputFile:
    """One manifest line, checked: an entry is data anyone may have written, and its path,
    hash and mode become a file name, a blob name and a chmod."""
    out = OutputFile(safe_relpath(str(o["path"])), str(o["hash"]), int(o["mode"]), int(o["size"]))
    check_digest(out.hash)
    if not 0 <= out.mode <= 0o7777 or out.size < 0:
        raise CorruptCache(f"output {out.path!r} has a bad mode or size")
    return out


def is_key(text: str) -> bool:
    """Whether `text` is a SHA-256 in hex: an entry's key, a blob's name."""
    return len(text) == 64 and _HEX.issuperset(text)


def check_digest(digest: str) -> str:
    """`digest` if it is a SHA-256 in hex (a blob's name), else CorruptCache: a name from an
    entry must never reach a path outside `blobs/` (`../x`, `/home/...`)."""
    if not is_key(digest):
        raise CorruptCache(f"blob name {digest[:16]!r} is not a SHA-256")
    return digest


def safe_relpath(path: str) -> str:
    """`path` if it stays inside the working directory, else CorruptCache. A backslash is a
    character of a name here, as it is to the system (`a\\b.txt` is one file), never a
    separator: a build may well write one, and refusing it would call its entry corrupt."""
    parts = path.split("/")
    if not path or path.startswith("/") or ".." in parts or "\0" in path:
        raise CorruptCache(f"output path {path!r} leaves the working directory")
    return path


class CacheStore:
    """One cache directory. Its `entries/` and `blobs/` are opened once, without following a
    link, and every file is named relative to them: a link put there is never followed."""

    def __init__(self, root: str, warn: Warn) -> None:
        self.root = root
        self.warn = warn
        self._ready = False
        self._read: dict[str, float] = {}  # entries read in this run -> their mtime then
        self._fds: dict[str, int] = {}  # "entries", "blobs" -> an open descriptor
        self._lock = threading.Lock()

    def _dir(self, sub: str, *, create: bool = False) -> int:
        """The descriptor of `entries` or `blobs`; OSError when it is missing (unless
        `create`), a link or not a directory."""
        fd = self._fds.get(sub)
        if fd is None:
            with self._lock:
                fd = self._fds.get(sub)
                if fd is None:
                    fd = self._fds[sub] = open_subdir(self.root, sub, create=create)
        return fd

    def close(self) -> None:
        """Close the directories (the store opens them again when used again)."""
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
            self._ready = False
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    # ---- entries --------------------------------------------------------------------------

    def get(self, key: str, *, quiet: bool = False) -> Entry | None:
        """The entry for `key`, or None (a damaged one is reported unless `quiet`)."""
        try:
            raw, st = read_regular_stat(
                f"{key}.json", MAX_ENTRY_BYTES, flags=os.O_NOFOLLOW, dir_fd=self._dir("entries")
            )
            self._read[key] = st.st_mtime
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not quiet:
                why = os_cause(exc)
                self.warn(f"cache entry {key[:12]} unreadable ({why}): treated as a miss")
            return None
        try:
            return parse_entry(raw, key)
        except CorruptCache as exc:
            if not quiet:
                self.warn(f"cache entry {key[:12]} is corrupt ({exc}): treated as a miss")
            return None

    def entry_size(self, key: str) -> int:
        """The bytes of the entry file for `key` as it is now (0 when there is none)."""
        try:
            st = os.stat(
                f"{check_digest(key)}.json", dir_fd=self._dir("entries"), follow_symlinks=False
            )
        except (OSError, CorruptCache):
            return 0
        return st.st_size

    def put(self, entry: Entry) -> None:
        self._prepare()
        raw = entry_bytes(entry.to_json())
        if len(raw) > MAX_ENTRY_BYTES:  # it could never be read back
            raise ValueError(
                f"its entry would be {len(raw) >> 20} MiB, over the {MAX_ENTRY_BYTES >> 20} MiB"
                " an entry may hold"
            )
        name = f"{check_digest(entry.key)}.json"
        with self._writing("entries", name):
            atomic_write(name, raw, dir_fd=self._dir("entries"))

    @contextlib.contextmanager
    def _writing(self, sub: str, name: str) -> Iterator[None]:
        """An OSError writing `sub/name` raised again naming that file (the system's names a
        temporary file relative to the directory); Squatted when a directory holds the name."""
        try:
            yield
        except OSError as exc:
            path = os.path.join(self.root, sub, name)
            squatted = False
            with contextlib.suppress(OSError):
                squatted = stat.S_ISDIR(os.lstat(path).st_mode)
            kind = Squatted if squatted else OSError
            raise kind(exc.errno, exc.strerror, path) from None

    def touch(self, key: str, *, now: bool = False) -> None:
        """Mark an entry used (least-recently-used pruning reads the mtime). An entry marked
        within the last minute is left alone unless `now`: a run of many hits then writes
        nothing to a shared directory."""
        last = self._read.get(key)
        if not now and last is not None and 0 <= time.time() - last < TOUCH_S:
            return
        with contextlib.suppress(OSError):
            os.utime(f"{key}.json", dir_fd=self._dir("entries"), follow_symlinks=False)

    # ---- blobs ----------------------------------------------------------------------------

    def has_blob(self, digest: str) -> bool:
        """Whether the blob is stored (a regular file, not a link); marked used if so."""
        try:
            fd = self._dir("blobs")
            st = os.stat(check_digest(digest), dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False  # replaced by the store's rename, never followed
        with contextlib.suppress(OSError):
            os.utime(digest, dir_fd=fd, follow_symlinks=False)
        return True

    def put_blob(self, data: bytes, digest: str | None = None) -> str:
        """Store bytes under their SHA-256 (once); returns the digest."""
        digest = digest or hashlib.sha256(data).hexdigest()
        if not self.has_blob(digest):
            self.add_blob(data, digest)
        return digest

    def add_blob(self, data: bytes, digest: str) -> None:
        """Store bytes the caller has checked to be `digest`'s, without looking whether the blob
        is there already (a caller that just looked: a rename over the same bytes is harmless)."""
        self._prepare()
        with self._writing("blobs", digest):
            atomic_write(check_digest(digest), data, dir_fd=self._dir("blobs"))

    def put_blob_file(self, path: str, digest: str) -> str:
        """Store a file too large to hold in memory, copied in chunks; ValueError when it can no
        longer be read or its bytes no longer have `digest` (changed since it was hashed:
        nothing is stored)."""
        self._prepare()
        if self.has_blob(digest):
            return digest
        fd = self._dir("blobs")

        def copy(out: BinaryIO) -> None:
            try:  # (the output's own fault, not the store's: said as such, not as a write)
                src = open_regular(path)
            except OSError as exc:
                raise ValueError(f"cannot read {path}: {os_cause(exc)}") from None
            with src:
                if copy_hashed(src, out)[0] != digest:
                    raise ValueError(f"{path} changed while it was stored")

        with self._writing("blobs", digest):
            write_renamed(fd, f".{digest}.{os.urandom(6).hex()}.tmp", fd, digest, copy, None)
        return digest

    async def blob_chunks(self, digest: str, size: int) -> AsyncIterator[bytes]:
        """A blob's bytes, one chunk at a time (a large blob sent somewhere), checked as they go:
        the last chunk is given only once all of them are `size` bytes with `digest`'s SHA-256,
        else CorruptCache (the blob removed), so the receiver never gets a whole wrong blob
        (anyone sharing the directory may have put other bytes under its name)."""
        fd = self._dir("blobs")
        h, got, held = hashlib.sha256(), 0, b""
        with open_regular(check_digest(digest), flags=os.O_NOFOLLOW, dir_fd=fd) as src:
            while chunk := src.read(CHUNK):
                got += len(chunk)
                if got > size:
                    raise CorruptCache(f"blob {digest[:12]} is larger than its entry says")
                h.update(chunk)
                if held:
                    yield held
                held = chunk
        if got != size or h.hexdigest() != digest:
            self._drop_blob(fd, digest)
            raise CorruptCache(f"blob {digest[:12]} is corrupt")
        if held:
            yield held

    async def put_blob_chunks(self, digest: str, size: int, chunks: AsyncIterator[bytes]) -> None:
        """Store a blob that arrives in parts (too large for memory): written beside the blobs,
        checked against `size` and `digest` (CorruptCache if not), then renamed into place."""
        self._prepare()
        fd = self._dir("blobs")
        tmp = f".{check_digest(digest)}.{os.urandom(6).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        h, got = hashlib.sha256(), 0
        try:
            with os.fdopen(os.open(tmp, flags, 0o644, dir_fd=fd), "wb") as out:
                async for chunk in chunks:
                    got += len(chunk)
                    if got > size:
                        raise CorruptCache(f"blob {digest[:12]} is larger than its entry says")
                    h.update(chunk)
                    out.write(chunk)
            if got != size or h.hexdigest() != digest:
                raise CorruptCache(f"blob {digest[:12]} is not what its name says")
            os.replace(tmp, digest, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)

    def copy_blob(self, digest: str, size: int, out: BinaryIO | None) -> None:
        """Write a blob's bytes to `out` in chunks (None: only check them, one chunk held at a
        time); CorruptCache (and the blob removed) when it is missing, larger than `size` or
        not what its name says."""
        check_digest(digest)
        try:
            fd = self._dir("blobs")
            with open_regular(digest, flags=os.O_NOFOLLOW, dir_fd=fd) as src:
                if os.fstat(src.fileno()).st_size > size:
                    raise CorruptCache(f"blob {digest[:12]} is larger than its entry says")
                got, _size = copy_hashed(src, out)
        except OSError as exc:
            raise CorruptCache(_blob_unreadable(digest, exc)) from None
        if got != digest:
            self._drop_blob(fd, digest)
            raise CorruptCache(f"blob {digest[:12]} is corrupt")

    def read_blob(self, digest: str, size: int | None = None) -> bytes:
        """A blob's bytes, verified against its name; CorruptCache (and the blob removed) if not.
        `size`: the bytes expected; a larger file is not read (bounded memory)."""
        check_digest(digest)
        try:
            fd = self._dir("blobs")
            data = read_regular(digest, size, flags=os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            raise CorruptCache(_blob_unreadable(digest, exc)) from None
        if hashlib.sha256(data).hexdigest() != digest:
            self._drop_blob(fd, digest)  # the next run that produces it stores it afresh
            raise CorruptCache(f"blob {digest[:12]} is corrupt")
        return data

    @staticmethod
    def _drop_blob(fd: int, digest: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(digest, dir_fd=fd)

    def _prepare(self) -> None:
        """Before the first write: the directory must be planrun's (marked, or holding only
        its files, or new: NotACache otherwise); it is then marked, its `entries/` and
        `blobs/` made."""
        if self._ready:
            return
        why = refusal(self.root)
        if why is not None:
            raise NotACache(errno.EPERM, why)
        for sub in SUBDIRS:
            self._dir(sub, create=True)
        root_fd = os.open(self.root, DIR_FLAGS)
        try:  # backup tools skip directories tagged like this; planrun knows its own by it
            with contextlib.suppress(OSError):
                mark(root_fd)
        finally:
            os.close(root_fd)
        self._ready = True


def copy_hashed(src: BinaryIO, out: BinaryIO | None) -> tuple[str, int]:
    """Copy `src` to `out` (None: read it only) one chunk at a time; its bytes' SHA-256 and
    their number."""
    h = hashlib.sha256()
    size = 0
    while chunk := src.read(CHUNK):
        h.update(chunk)
        size += len(chunk)
        if out is not None:
            out.write(chunk)
    return h.hexdigest(), size
