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

_MAGIC = re.compile(r"[*?\[\]{}]")
ALWAYS_SKIPPED = frozenset({".planrun"})  # planrun's own state and stat records, at the root


class PatternError(ValueError):
    """A pattern that cannot be used (empty, absolute, or escaping the working directory)."""


@dataclass(frozen=True)
class FileStat:
    """One matched regular file: its path relative to the working directory and its stat."""

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

    def included(self, rel: str) -> bool:
        return any(p.match(rel) for p in self.include) and not self.excluded(rel)

    def excluded(self, rel: str) -> bool:
        return any(p.match(rel) for p in self.exclude)


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
    from wcmatch import glob as wcglob

    includes, excludes = [], []
    for raw in patterns:
        problem = check_pattern(raw, output=False)
        if problem:
            raise PatternError(problem)
        if raw.startswith("!"):
            excludes.append(_normal(raw[1:]))
        else:
            includes.append(_normal(raw))
    flags = wcglob.GLOBSTAR | wcglob.BRACE
    inc = [re.compile(r) for r in wcglob.translate(includes, flags=flags)[0]] if includes else []
    exc = [re.compile(r) for r in wcglob.translate(excludes, flags=flags)[0]] if excludes else []
    roots = _roots(includes)
    hidden = any(
        seg.startswith(".") and seg not in (".", "..")
        for p in includes + excludes
        for seg in p.split("/")
    )
    return Matcher(tuple(patterns), tuple(inc), tuple(exc), roots, hidden)


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
    skipped = {os.path.realpath(s) for s in skip}
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
    return FileStat(
        rel, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, stat.S_IMODE(st.st_mode)
    )


def _walk(
    full: str,
    rel: str,
    matcher: Matcher,
    whole: bool,
    found: dict[str, FileStat],
    skipped: set[str],
) -> None:
    """Walk one directory (iteratively); `whole`: the directory itself matched, take all below."""
    stack = [(full, rel, whole)]
    while stack:
        dpath, drel, all_below = stack.pop()
        if skipped and os.path.realpath(dpath) in skipped:
            continue
        try:
            it = os.scandir(dpath)
        except OSError:
            continue
        with it:
            for entry in it:
                name = entry.name
                erel = f"{drel}/{name}" if drel else name
                try:
                    # Symlinked directories are not followed (no cycles); files are.
                    if entry.is_dir(follow_symlinks=False):
                        if not drel and name in ALWAYS_SKIPPED:
                            continue
                        if matcher.exclude and matcher.excluded(erel):
                            continue
                        if all_below:
                            stack.append((entry.path, erel, True))
                        elif name.startswith(".") and not matcher.hidden:
                            continue  # `*` and `**` do not match dot-directories
                        else:
                            stack.append((entry.path, erel, matcher.included(erel)))
                        continue
                    if not all_below and not matcher.included(erel):
                        continue
                    if all_below and matcher.exclude and matcher.excluded(erel):
                        continue
                    st = entry.stat()
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):  # never a FIFO, socket or device: reading could hang
                    found[erel] = _file(erel, st)
