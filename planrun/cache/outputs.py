"""A step's declared outputs: collected into the store after a run, restored on a hit."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat

from planrun.cache.globs import Matcher, compile_patterns, match_files
from planrun.cache.keys import sources_part
from planrun.cache.safeio import read_regular
from planrun.cache.statcache import StatRecords
from planrun.cache.store import MODE_BITS, CacheStore, CorruptCache, OutputFile, safe_relpath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class OutputMissing(Exception):
    """A declared output pattern matched nothing after a successful run."""


class Collected:
    """A run's output files: their manifest and their bytes."""

    __slots__ = ("files", "contents")

    def __init__(self, files: list[OutputFile], contents: dict[str, bytes]) -> None:
        self.files = files
        self.contents = contents  # hash -> bytes, to be stored as blobs


def collect_outputs(
    cwd: str, patterns: list[str], skip: list[str], records: StatRecords
) -> Collected:
    """Read every file the `outputs` patterns match; OutputMissing names a pattern that matched
    nothing (each pattern on its own must match, `!` excludes apply to all)."""
    excludes = tuple(p for p in patterns if p.startswith("!"))
    files: dict[str, OutputFile] = {}
    contents: dict[str, bytes] = {}
    for pattern in (p for p in patterns if not p.startswith("!")):
        found = match_files(cwd, compile_patterns((pattern, *excludes)), skip)
        if not found:
            raise OutputMissing(f"declared output not produced: {pattern}")
        for f in found:
            if f.path in files:
                continue
            data = read_regular(os.path.join(cwd, f.path))
            digest = hashlib.sha256(data).hexdigest()
            contents[digest] = data
            files[f.path] = OutputFile(f.path, digest, f.mode, len(data))
            records.forget(f.path)  # just written: its stat is racy; hash it afresh next time
    return Collected([files[k] for k in sorted(files)], contents)


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
    cwd: str, store: CacheStore, todo: list[tuple[OutputFile, bool]], records: StatRecords
) -> None:
    """Put each output back byte-identical with its permission bits. Every blob is read and
    verified first, so a corrupt store changes no file (CorruptCache).

    Each file is written below the working directory one directory at a time, never through a
    symbolic link (`out -> /elsewhere` in a cloned repository): such a path cannot be restored
    (CorruptCache, and the step runs)."""
    data = {o.hash: store.read_blob(o.hash, o.size) for o, needed in todo if needed}
    for o, needed in todo:
        try:
            _restore_one(cwd, o, data.get(o.hash) if needed else None)
        except OSError as exc:
            why = "a symbolic link is in the way" if exc.errno == errno.ELOOP else exc.strerror
            raise CorruptCache(f"cannot restore {o.path}: {why}") from None
        records.forget(o.path)


def _restore_one(cwd: str, o: OutputFile, data: bytes | None) -> None:
    """Write `data` (None: only the mode) to `o.path` below `cwd`, following no link."""
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
        if data is None:
            target = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            try:
                os.fchmod(target, mode)
            finally:
                os.close(target)
            return
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise CorruptCache(f"cannot restore {o.path}: a directory is in the way")
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), mode)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)  # a link there is replaced
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
    finally:
        os.close(fd)
