"""A step's declared outputs: collected into the store after a run, restored on a hit."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
from collections.abc import Callable, Mapping
from typing import BinaryIO

from planrun.cache.globs import (
    ALWAYS_SKIPPED,
    FileStat,
    Matcher,
    compile_patterns,
    match_files,
    plain_patterns,
)
from planrun.cache.keys import sources_part
from planrun.cache.restoretmp import RestoreTemp
from planrun.cache.safeio import open_regular, read_regular
from planrun.cache.statcache import StatRecords
from planrun.cache.store import (
    CHUNK,
    INLINE_MAX,
    MODE_BITS,
    CacheStore,
    CorruptCache,
    OutputFile,
    copy_hashed,
    safe_relpath,
)
from planrun.errors import one_line
from planrun.text import os_cause

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# Bytes of small output files (INLINE_MAX at most each) one store or restore holds in memory at
# once; past that, the others are hashed and copied in chunks as a large one is (an entry may
# list any number of files).
HELD_BYTES = 64 << 20


class OutputMissing(Exception):
    """A declared output pattern matched nothing after a successful run."""


class Collected:
    """A run's output files: their manifest and their bytes."""

    __slots__ = ("files", "contents", "large", "linked", "owned")

    def __init__(
        self,
        files: list[OutputFile],
        contents: dict[str, bytes],
        large: dict[str, str] | None = None,
        linked: list[str] | None = None,
        owned: list[str] | None = None,
    ) -> None:
        self.files = files
        self.contents = contents  # hash -> bytes, to be stored as blobs
        self.large = large or {}  # hash -> path of a file over INLINE_MAX: copied in chunks
        self.linked = linked or []  # matched, but reached through a symbolic link: not stored
        self.owned = owned or []  # matched, but in planrun's own directories: not stored

    def holds(self, needles: list[bytes]) -> bool:
        """Whether any output file contains one of `needles` (large files read in chunks)."""
        if any(n in data for data in self.contents.values() for n in needles):
            return True
        return any(_file_holds(path, needles) for path in self.large.values())


def _file_holds(path: str, needles: list[bytes]) -> bool:
    keep = max(map(len, needles)) - 1  # a needle may straddle two chunks
    tail = b""
    try:
        with open_regular(path) as f:
            while chunk := f.read(CHUNK):
                window = tail + chunk
                if any(n in window for n in needles):
                    return True
                tail = window[-keep:] if keep else b""
    except OSError:
        return True  # gone or replaced since it was hashed: not known to be clean, not stored
    return False


def collect_outputs(
    cwd: str,
    patterns: list[str],
    skip: list[str],
    records: StatRecords,
    keep: Callable[[FileStat], bool] | None = None,
    own: list[str] | None = None,
) -> Collected:
    """Read every file the `outputs` patterns match; OutputMissing names a pattern that matched
    nothing (each pattern on its own must match, `!` excludes apply to all). A file reached
    through a symbolic link is not read (`Collected.linked`); nor is one `keep` refuses, nor one
    in planrun's own directories (`.planrun/`, the cache directory's path `own` when it lies
    inside the working directory: `Collected.owned`), which a hit would refuse to restore."""
    excludes = tuple(p for p in patterns if p.startswith("!"))
    files: dict[str, OutputFile] = {}
    contents: dict[str, bytes] = {}
    large: dict[str, str] = {}
    linked: list[str] = []
    owned: list[str] = []
    held = 0
    for pattern in (p for p in patterns if not p.startswith("!")):
        found = match_files(cwd, compile_patterns((pattern, *excludes)), skip)
        if not found:
            raise OutputMissing(f"declared output not produced: {one_line(pattern)}")
        for f in found:
            if f.path in files or f.path in linked or (keep is not None and not keep(f)):
                continue
            if in_own_directory(f.path, f.path.split("/"), own or []):
                if f.path not in owned:
                    owned.append(f.path)
                continue
            if linked_part(cwd, f.path, set()) is not None:
                linked.append(f.path)
                continue
            path = os.path.join(cwd, f.path)
            if f.size > INLINE_MAX or held + f.size > HELD_BYTES:
                with open_regular(path) as src:  # hashed now, copied into the store in chunks
                    digest, size = copy_hashed(src, None)
                large[digest] = path
            else:
                data = read_regular(path)
                digest, size = hashlib.sha256(data).hexdigest(), len(data)
                contents[digest] = data
                held += size
            files[f.path] = OutputFile(f.path, digest, f.mode, size)
            records.forget(f.path)  # just written: its stat is racy; hash it afresh next time
    return Collected(
        [files[k] for k in sorted(files)], contents, large, sorted(linked), sorted(owned)
    )


def snapshot(cwd: str, patterns: list[str], skip: list[str]) -> dict[str, tuple[int, ...]]:
    """What the `outputs` patterns match now: path -> (size, mtime_ns, inode, ctime_ns), to tell
    later which files changed meanwhile."""
    if not any(not p.startswith("!") for p in patterns):
        return {}
    return {f.path: stat_key(f) for f in match_files(cwd, compile_patterns(tuple(patterns)), skip)}


def stat_key(f: FileStat) -> tuple[int, ...]:
    return (f.size, f.mtime_ns, f.inode, f.ctime_ns)


def foreign_output(outputs: list[OutputFile], patterns: list[str], skip: list[str]) -> str | None:
    """The first path of an entry's manifest that the step's own `outputs` patterns do not
    match (or that lies in planrun's own directories, `skip`); None when all are the step's.

    An entry is data anyone who can write the cache directory may have written: a manifest
    naming `.git/hooks/pre-commit` must never become a write."""
    if not outputs:
        return None
    takes = _outputs_taker(patterns)
    for o in outputs:
        parts = o.path.split("/")
        if (
            "" in parts
            or "." in parts
            or in_own_directory(o.path, parts, skip)
            or not takes(o.path, parts)
        ):
            return o.path
    return None


def in_own_directory(path: str, parts: list[str], own: list[str]) -> bool:
    """Whether a relative path lies in `.planrun/` or in one of the directories `own`."""
    return parts[0] in ALWAYS_SKIPPED or any(path == s or path.startswith(s + "/") for s in own)


def _outputs_taker(patterns: list[str]) -> Callable[[str, list[str]], bool]:
    """Whether the step's `outputs` patterns take a path (given with its parts split)."""
    plain = plain_patterns(patterns)
    if plain is not None:  # plain paths: the path itself, or a directory above it, is one
        if "." in plain:
            return lambda _path, _parts: True
        return lambda _path, parts: any(
            "/".join(parts[:n]) in plain for n in range(1, len(parts) + 1)
        )
    if not any(not p.startswith("!") for p in patterns):
        return lambda _path, _parts: False
    matcher = compile_patterns(tuple(patterns))
    everything = "." in matcher.literal_include
    return lambda path, _parts: (
        covered(matcher, path) or (everything and not matcher.excluded(path))
    )


def linked_part(cwd: str, rel: str, checked: set[str]) -> str | None:
    """The first part of `rel` (a directory on the way, or the file itself) that is a symbolic
    link, None when there is none. `checked`: directories already known not to be links
    (filled in as they are found)."""
    parts = rel.split("/")
    for n in range(1, len(parts) + 1):
        here = "/".join(parts[:n])
        if here in checked:
            continue
        try:
            st = os.lstat(os.path.join(cwd, here))
        except OSError:
            return None  # missing from here on: nothing to follow
        if stat.S_ISLNK(st.st_mode):
            return here
        if n < len(parts):
            checked.add(here)
    return None


def unproduced_output(cwd: str, patterns: list[str], skip: list[str]) -> str | None:
    """The error of a step whose `outputs` pattern matched nothing (None when each matched),
    for a step that ran with the cache off: nothing is read, only matched."""
    excludes = tuple(p for p in patterns if p.startswith("!"))
    for pattern in (p for p in patterns if not p.startswith("!")):
        if not match_files(cwd, compile_patterns((pattern, *excludes)), skip):
            return f"declared output not produced: {one_line(pattern)}"
    return None


def covered(matcher: Matcher, rel: str) -> bool:
    """Whether the sources matcher takes `rel` (itself, or a directory above it)."""
    if matcher.excluded(rel):
        return False
    parts = rel.split("/")
    return any(matcher.included("/".join(parts[:n])) for n in range(1, len(parts) + 1))


def outputs_to_restore(
    cwd: str, outputs: list[OutputFile], records: StatRecords
) -> list[tuple[OutputFile, bool]]:
    """(output, needs its bytes) for each output that is missing or differs; [] if all match.

    The outputs in place are checked together, like a walk of sources: when their paths and
    stats are ones already seen with exactly the manifest's hashes, no file is looked at."""
    todo: list[tuple[OutputFile, bool]] = []
    present: dict[str, os.stat_result] = {}
    for o in outputs:
        try:
            st = os.lstat(os.path.join(cwd, safe_relpath(o.path)))
        except OSError:
            todo.append((o, True))
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size != o.size:
            todo.append((o, True))
        else:
            present[o.path] = st
    if not present:
        return todo
    expected = {o.path: o.hash for o in outputs if o.path in present}
    part, files = records.walk_digest(cwd, present)
    same = part == sources_part(expected)
    for o in outputs:
        got = present.get(o.path)
        if got is None:
            continue
        if not same and (files or records.digests_of(cwd, {o.path: got}))[o.path] != o.hash:
            todo.append((o, True))
        elif stat.S_IMODE(got.st_mode) != o.mode & MODE_BITS:
            todo.append((o, False))
    return todo


def restore_outputs(
    cwd: str,
    store: CacheStore,
    todo: list[tuple[OutputFile, bool]],
    records: StatRecords,
    temp: RestoreTemp | None = None,
    held: Mapping[str, bytes] | None = None,
) -> None:
    """Put each output back byte-identical with its permission bits. Every blob is read and
    verified first (HELD_BYTES of them kept in hand, the others read again to be copied), so
    a corrupt store changes no file (CorruptCache); `held`: blobs whose
    bytes the caller holds, verified against their SHA-256 already (a remote hit's), which
    are not read back from the store.

    Each file is written below the working directory one directory at a time, never through a
    symbolic link (`out -> /elsewhere` in a cloned repository): such a path cannot be restored
    (CorruptCache, and the step runs). It is written whole under a temporary name in `temp`
    (planrun's own directory; without one, next to it), then renamed into place."""
    held = held or {}
    data: dict[str, bytes] = {}
    room = HELD_BYTES
    for o, needed in todo:
        if not needed or o.hash in data:
            continue
        if o.hash in held:
            data[o.hash] = held[o.hash]
        elif o.size <= INLINE_MAX and o.size <= room:
            data[o.hash] = store.read_blob(o.hash, o.size)
            room -= o.size
        else:
            store.copy_blob(o.hash, o.size, None)  # checked now, copied in chunks below
    own = RestoreTemp(cwd) if temp is None else None
    try:
        for o, needed in todo:
            write = None
            if needed and o.hash in data:
                write = functools.partial(_write_bytes, data[o.hash])
            elif needed:
                write = functools.partial(store.copy_blob, o.hash, o.size)
            try:
                _restore_one(cwd, o, write, temp or own)  # type: ignore[arg-type]
            except OSError as exc:
                raise CorruptCache(f"cannot restore {o.path}: {os_cause(exc)}") from None
            records.forget(o.path)
    finally:
        if own is not None:
            own.close()


def _write_bytes(data: bytes, out: BinaryIO) -> None:
    out.write(data)


def _restore_one(
    cwd: str, o: OutputFile, write: Callable[[BinaryIO], None] | None, temp: RestoreTemp
) -> None:
    """Write the file's bytes with `write` (None: only its mode) to `o.path` below `cwd`,
    following no link."""
    mode = o.mode & MODE_BITS
    *dirs, name = safe_relpath(o.path).split("/")
    fd = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in dirs:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            below = os.open(part, _DIR_FLAGS, dir_fd=fd)  # ELOOP for a link
            os.close(fd)
            fd = below
        if write is None:
            target = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            try:
                os.fchmod(target, mode)
            finally:
                os.close(target)
            return
        temp.write(fd, name, write, mode)  # EISDIR: a directory is in the way
    finally:
        os.close(fd)
