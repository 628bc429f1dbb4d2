"""Which files a step's `sources` / `outputs` globs match, relative to the working directory.

Patterns are glob patterns (`*`, `?`, `[...]`, `**` across directories) translated to regular
expressions by wcmatch, whose bash-like semantics (GLOBSTAR, `!` excludes) the standard library
lacks before Python 3.13. A pattern that names a directory matches every file below it. The walk
starts at each pattern's literal prefix, so `src/**/*.py` never looks outside `src/`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

_MAGIC = re.compile(r"[*?\[\]{}]")
ALWAYS_SKIPPED = frozenset({".planrun"})  # planrun's own state and stat records, at the root


class PatternError(ValueError):
    """A pattern that cannot be used (empty, absolute, or escaping the working directory)."""


class FileStat(NamedTuple):
    """One matched regular file: its path relative to the working directory and its stat.

    A tuple, not a dataclass: a walk makes one per file, and tuples are made fastest."""

    path: str
    size: int
    mtime_ns: int
    inode: int
    ctime_ns: int
    mode: int


@dataclass(frozen=True)
class Matcher:
    """Compiled include and exclude patterns, and the literal roots the walk starts from."""

    patterns: tuple[str, ...]
    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]
    roots: tuple[str, ...]
    hidden: bool  # a pattern names a dot-directory or dot-file on purpose: walk into them
    literal_include: frozenset[str] = frozenset()  # patterns without wildcards: plain paths
    literal_exclude: frozenset[str] = frozenset()
    has_excludes: bool = False

    def included(self, rel: str) -> bool:
        hit = rel in self.literal_include or any(p.match(rel) for p in self.include)
        return hit and not self.excluded(rel)

    def excluded(self, rel: str) -> bool:
        return rel in self.literal_exclude or any(p.match(rel) for p in self.exclude)


def check_pattern(pattern: str, *, output: bool) -> str | None:
    """Why `pattern` is unusable (a message), or None when it is fine."""
    body = pattern[1:] if pattern.startswith("!") else pattern
    if not body.strip():
        return "an empty pattern matches nothing"
    if body.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", body):
        return f"pattern {pattern!r} must be relative to the working directory"
    if output and (
        body == ".." or body.startswith("../") or "/../" in body or body.endswith("/..")
    ):
        return f"output pattern {pattern!r} must stay inside the working directory"
    return None


def _normal(pattern: str) -> str:
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern.rstrip("/") or "."


@lru_cache(maxsize=1024)
def compile_patterns(patterns: tuple[str, ...]) -> Matcher:
    """Compile globs (`!` marks an exclude); raises PatternError for an unusable pattern."""
    includes, excludes = [], []
    for raw in patterns:
        problem = check_pattern(raw, output=False)
        if problem:
            raise PatternError(problem)
        if raw.startswith("!"):
            excludes.append(_normal(raw[1:]))
        else:
            includes.append(_normal(raw))
    hidden = any(
        seg.startswith(".") and seg not in (".", "..")
        for p in includes + excludes
        for seg in p.split("/")
    )
    return Matcher(
        tuple(patterns),
        _translate([p for p in includes if _MAGIC.search(p)]),
        _translate([p for p in excludes if _MAGIC.search(p)]),
        _roots(includes),
        hidden,
        frozenset(p for p in includes if not _MAGIC.search(p)),
        frozenset(p for p in excludes if not _MAGIC.search(p)),
        bool(excludes),
    )


def _translate(globs: list[str]) -> tuple[re.Pattern[str], ...]:
    """Regular expressions for wildcard patterns (wcmatch is imported only when one is used)."""
    if not globs:
        return ()
    from wcmatch import glob as wcglob

    flags = wcglob.GLOBSTAR | wcglob.BRACE
    return tuple(re.compile(r) for r in wcglob.translate(globs, flags=flags)[0])


def _roots(includes: Iterable[str]) -> tuple[str, ...]:
    """The literal leading directories of the patterns, with nested roots folded away."""
    out: set[str] = set()
    for p in includes:
        parts = p.split("/")
        lit: list[str] = []
        for seg in parts:
            if _MAGIC.search(seg):
                break
            lit.append(seg)
        out.add("/".join(lit) if lit else ".")
    ordered = sorted(out, key=lambda r: (r.count("/"), r))
    kept: list[str] = []
    for r in ordered:
        if not any(k == "." or r == k or r.startswith(k + "/") for k in kept):
            kept.append(r)
    return tuple(kept)


def match_files(cwd: str, matcher: Matcher, skip: Iterable[str] = ()) -> list[FileStat]:
    """Every regular file the matcher selects under `cwd`, sorted by path; none is not an error.

    `skip` holds absolute directories never walked into (the cache directory).
    """
    found: dict[str, FileStat] = {}
    # Directories never walked into, by their path relative to `cwd` (compared as strings:
    # resolving every directory's real path would cost more than the walk).
    skipped = {os.path.relpath(s, cwd).replace(os.sep, "/") for s in skip}
    for root in matcher.roots:
        full = os.path.join(cwd, root) if root != "." else cwd
        try:
            st = os.stat(full)
        except OSError:
            continue  # no match is an empty set
        rel = "" if root == "." else root
        if stat.S_ISREG(st.st_mode):
            if matcher.included(rel):
                found[rel] = _file(rel, st)
        elif stat.S_ISDIR(st.st_mode):
            whole = bool(rel) and matcher.included(rel)
            _walk(full, rel, matcher, whole, found, skipped)
    return [found[k] for k in sorted(found)]


def _file(rel: str, st: os.stat_result) -> FileStat:
    return FileStat(rel, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_mode & 0o7777)


def _walk(
    full: str,
    rel: str,
    matcher: Matcher,
    whole: bool,
    found: dict[str, FileStat],
    skipped: set[str],
) -> None:
    """Walk one directory (iteratively); `whole`: the directory itself matched, take all below.

    The inner loop runs once per file of a source tree, so it is kept to the bare minimum."""
    included, excluded = matcher.included, matcher.excluded
    has_excludes, hidden = matcher.has_excludes, matcher.hidden
    is_reg = stat.S_ISREG
    stack = [(full, rel, whole)]
    while stack:
        dpath, drel, all_below = stack.pop()
        if drel in skipped:
            continue
        try:
            it = os.scandir(dpath)
        except OSError:
            continue
        prefix = f"{drel}/" if drel else ""
        with it:
            for entry in it:
                name = entry.name
                erel = prefix + name
                try:
                    # Symlinked directories are not followed (no cycles); files are.
                    if entry.is_dir(follow_symlinks=False):
                        if (not drel and name in ALWAYS_SKIPPED) or (
                            has_excludes and excluded(erel)
                        ):
                            continue
                        if all_below:
                            stack.append((entry.path, erel, True))
                        elif hidden or not name.startswith("."):  # `*`, `**` skip dot-dirs
                            stack.append((entry.path, erel, included(erel)))
                        continue
                    if all_below:
                        if has_excludes and excluded(erel):
                            continue
                    elif not included(erel):
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                if is_reg(st.st_mode):  # never a FIFO, socket or device: reading could hang
                    found[erel] = FileStat(
                        erel,
                        st.st_size,
                        st.st_mtime_ns,
                        st.st_ino,
                        st.st_ctime_ns,
                        st.st_mode & 0o7777,
                    )
