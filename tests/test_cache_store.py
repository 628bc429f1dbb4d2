"""The cache package on its own: globs, stat records, keys, the store, restore and prune."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planrun.cache.globs import PatternError, compile_patterns, match_files
from planrun.cache.keys import env_names
from planrun.cache.prune import cache_info, parse_size, prune
from planrun.cache.session import CacheOptions, CacheSession, Upstream
from planrun.cache.statcache import StatRecords


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def paths(root: Path, *patterns: str) -> list[str]:
    return [f.path for f in match_files(str(root), compile_patterns(patterns))]


def test_globs_double_star_excludes_and_directories(tmp_path: Path) -> None:
    tree(
        tmp_path,
        {
            "src/a.py": "a",
            "src/pkg/b.py": "b",
            "src/pkg/test_b.py": "t",
            "src/pkg/data.txt": "d",
            "src/.hidden/c.py": "c",
            "pyproject.toml": "p",
            ".planrun/state/x.json": "{}",
        },
    )
    assert paths(tmp_path, "src/**/*.py", "pyproject.toml", "!src/**/test_*.py") == [
        "pyproject.toml",
        "src/a.py",
        "src/pkg/b.py",
    ]
    # a directory matches every file below it, hidden ones too
    assert paths(tmp_path, "src/pkg") == ["src/pkg/b.py", "src/pkg/data.txt", "src/pkg/test_b.py"]
    assert paths(tmp_path, "src", "!src/pkg") == ["src/.hidden/c.py", "src/a.py"]
    assert paths(tmp_path, "./src/*.py") == ["src/a.py"]
    assert paths(tmp_path, "missing/**/*.py", "nope.txt") == []  # no match: an empty set
    assert ".planrun/state/x.json" not in paths(tmp_path, "**")


def test_globs_skip_fifos_and_reject_bad_patterns(tmp_path: Path) -> None:
    tree(tmp_path, {"in/a.txt": "a"})
    os.mkfifo(tmp_path / "in" / "pipe")
    assert paths(tmp_path, "in") == ["in/a.txt"]  # reading a FIFO would hang
    for bad in ("", "!", "/etc/passwd"):
        with pytest.raises(PatternError):
            compile_patterns((bad,))


def test_stat_records_skip_unchanged_files_and_notice_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planrun.cache import statcache

    monkeypatch.setattr(statcache, "RACY_NS", -1)  # the file cannot be made older than its ctime
    tree(tmp_path, {"f.txt": "one"})
    records = StatRecords.load(str(tmp_path / "rec.json"))
    (f,) = match_files(str(tmp_path), compile_patterns(("f.txt",)))
    first = records.digest(str(tmp_path), f)
    records.save()
    again = StatRecords.load(str(tmp_path / "rec.json"))
    assert again.lookup("f.txt") is not None and again.lookup("f.txt")[1] == first  # type: ignore[index]
    (tmp_path / "f.txt").write_text("two")
    (f2,) = match_files(str(tmp_path), compile_patterns(("f.txt",)))
    assert again.digest(str(tmp_path), f2) != first
    (tmp_path / "rec.json").write_text("{not json")
    assert StatRecords.load(str(tmp_path / "rec.json")).lookup("f.txt") is None


def test_a_freshly_written_file_is_not_trusted_by_its_stat(tmp_path: Path) -> None:
    tree(tmp_path, {"f.txt": "one"})
    records = StatRecords.load(str(tmp_path / "rec.json"))
    (f,) = match_files(str(tmp_path), compile_patterns(("f.txt",)))
    records.digest(str(tmp_path), f)
    assert records.lookup("f.txt") is None  # same clock tick: could change without mtime moving


def test_a_source_is_hashed_whole_whatever_its_size(tmp_path: Path) -> None:
    """Every byte counts: files around the read size, an empty one, and one whose size the file
    system does not know (fstat says 0: /proc)."""
    import hashlib

    from planrun.cache.statcache import hash_file

    for size in (0, 1, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (3 << 20) + 7):
        data = os.urandom(size)
        (tmp_path / "f").write_bytes(data)
        assert hash_file(str(tmp_path / "f")) == hashlib.sha256(data).hexdigest(), size
    proc = Path("/proc/self/cmdline")
    if proc.exists() and proc.stat().st_size == 0:
        assert hash_file(str(proc)) != hashlib.sha256(b"").hexdigest()


def test_a_file_growing_while_hashed_is_hashed_as_it_was_and_read_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source appended to while it is hashed (by another process, in lines of 32 bytes, which
    never straddle a page): every hash is of bytes the file held at one moment (whole lines of
    what it ends as), never a read cut short taken as whole; the record made with the walk's
    stat is not trusted once the file has grown."""
    import hashlib
    import subprocess
    import sys

    from planrun.cache import statcache
    from planrun.cache.statcache import hash_file

    monkeypatch.setattr(statcache, "RACY_NS", -1)  # (a file cannot be made older than its ctime)
    f = tmp_path / "grows.txt"
    f.write_bytes(b"start".ljust(31, b".") + b"\n")
    walked = {"grows.txt": os.stat(f)}
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys\n"
            "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
            "for i in range(30000):\n"
            "    os.write(fd, b'%06d' % i + b'.' * 25 + b'\\n')\n",
            str(f),
        ]
    )
    records = StatRecords.load(str(tmp_path / "rec"))
    seen = [records.digests_of(str(tmp_path), walked)["grows.txt"]]
    while writer.poll() is None:
        seen.append(hash_file(str(f)))
    assert writer.wait() == 0
    final = f.read_bytes()
    h = hashlib.sha256()
    whole_lines = set()
    for at in range(0, len(final), 32):
        h.update(final[at : at + 32])
        whole_lines.add(h.hexdigest())
    assert set(seen) <= whole_lines
    assert hash_file(str(f)) == hashlib.sha256(final).hexdigest()
    now = {"grows.txt": os.stat(f)}
    assert records.digests_of(str(tmp_path), now) == {
        "grows.txt": hashlib.sha256(final).hexdigest()
    }


def test_a_walk_hashed_at_once_is_recorded_and_its_young_files_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from planrun.cache import statcache

    tree(tmp_path, {"a.txt": "a", "b.txt": "b", "c.txt": "c"})
    records = StatRecords.load(str(tmp_path / "rec"))
    found = {n: os.stat(tmp_path / n) for n in ("a.txt", "b.txt", "c.txt")}
    got = records.digests_of(str(tmp_path), found)
    assert got == {n: hashlib_hex((tmp_path / n).read_bytes()) for n in found}
    assert all(records.lookup(n) is None for n in found)  # written in this clock tick
    monkeypatch.setattr(statcache, "RACY_NS", -1)  # (a file cannot be made older than its ctime)
    records.digests_of(str(tmp_path), found)
    assert {n for n in found if records.lookup(n) is not None} == set(found)


def hashlib_hex(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_env_names_read_by_args() -> None:
    assert env_names(["${env.HOME}/x", "${env['A_B']}"]) == {"HOME", "A_B"}
    assert env_names(["${env | tojson}"]) == {"*"}
    assert env_names(["plain"]) == set()


def step(**kw: Any) -> Any:
    base = {"tool": "shell", "args": {"cmd": "x"}, "sources": None, "outputs": None, "cache": None}
    base |= {"run": None, "env": None, "cwd": None}  # a step without run, env or cwd
    return SimpleNamespace(**{**base, **kw})


def session(cwd: Path, **kw: Any) -> CacheSession:
    warnings: list[str] = []
    s = CacheSession(CacheOptions(**kw), "p", str(cwd), {}, warnings.append)
    s.warnings = warnings  # type: ignore[attr-defined]
    return s


def run_and_store(s: CacheSession, sid: str, st: Any, result: Any) -> str | None:
    s.decide(sid, st, st.args, [])
    error = asyncio.run(s.after(sid, st, result))
    s.close()
    return error


def test_hit_restores_outputs_with_mode_and_a_corrupt_blob_is_a_miss(tmp_path: Path) -> None:
    tree(tmp_path, {"src/a.txt": "a", "out/r.bin": "x"})
    os.chmod(tmp_path / "out/r.bin", 0o751)
    st = step(sources=["src"], outputs=["out/*.bin"])
    assert run_and_store(session(tmp_path), "b", st, {"stdout": "hi"}) is None
    (tmp_path / "out/r.bin").unlink()
    d = session(tmp_path).decide("b", st, st.args, [])
    assert (d.status, d.reason) == ("hit", "cached")
    assert (tmp_path / "out/r.bin").read_text() == "x"
    assert (tmp_path / "out/r.bin").stat().st_mode & 0o7777 == 0o751
    blob = next((tmp_path / ".planrun/cache/blobs").iterdir())
    for b in (tmp_path / ".planrun/cache/blobs").iterdir():
        if b.read_bytes() == b"x":
            blob = b
    blob.write_bytes(b"y")
    (tmp_path / "out/r.bin").unlink()
    s = session(tmp_path)
    d = s.decide("b", st, st.args, [])
    assert d.status == "miss" and not (tmp_path / "out/r.bin").exists()
    assert any("not usable" in w for w in s.warnings)  # type: ignore[attr-defined]


def test_declared_output_not_produced(tmp_path: Path) -> None:
    st = step(outputs=["dist/*.whl"])
    assert run_and_store(session(tmp_path), "w", st, None) == (
        "declared output not produced: dist/*.whl"
    )


def test_reasons_compare_with_the_most_recent_entry(tmp_path: Path) -> None:
    tree(tmp_path, {"src/a.py": "1", "src/b.py": "1", "src/c.py": "1"})
    st = step(sources=["src/*.py"])
    run_and_store(session(tmp_path), "s", st, None)
    assert session(tmp_path).decide("s", st, st.args, []).status == "hit"
    for name in ("a", "b", "c"):
        (tmp_path / f"src/{name}.py").write_text("2")
    d = session(tmp_path).decide("s", st, st.args, [])
    assert d.reason == "sources changed: src/a.py (+2 more)"
    other = step(sources=["src/*.py"], args={"cmd": "y"})
    assert session(tmp_path).decide("s", other, other.args, []).reason == "args changed"
    up = [Upstream("build", "succeeded", 1)]
    run_and_store(session(tmp_path), "t", st, None)
    s = session(tmp_path)
    s.decide("t", st, st.args, up)
    asyncio.run(s.after("t", st, None))
    s.close()
    d = session(tmp_path).decide("t", st, st.args, [Upstream("build", "succeeded", 2)])
    assert d.reason == "upstream changed: build"
    assert session(tmp_path, force_all=True).decide("t", st, st.args, up).reason == "forced"
    assert session(tmp_path, enabled=False).decide("t", st, st.args, up).reason == "cache off"
    new = step(sources=["src/*.py"], args={"cmd": "new"})
    assert session(tmp_path).decide("new", new, new.args, []).reason == "no cache entry"


def test_an_earlier_source_state_hits_its_entry(tmp_path: Path) -> None:
    tree(tmp_path, {"src/a.py": "v1"})
    st = step(sources=["src"])
    run_and_store(session(tmp_path), "s", st, "one")
    (tmp_path / "src/a.py").write_text("v2")
    run_and_store(session(tmp_path), "s", st, "two")
    (tmp_path / "src/a.py").write_text("v1")
    d = session(tmp_path).decide("s", st, st.args, [])
    assert d.status == "hit" and d.entry is not None and d.entry.result == "one"


def test_corrupt_and_truncated_entries_are_misses(tmp_path: Path) -> None:
    st = step(cache=True)
    run_and_store(session(tmp_path), "s", st, {"k": 1})
    (entry,) = (tmp_path / ".planrun/cache/entries").iterdir()
    good = entry.read_bytes()
    for damaged in (good[: len(good) // 2], good.replace(b'"k"', b'"j"'), b"", b"\xff\xfe"):
        entry.write_bytes(damaged)
        s = session(tmp_path)
        assert s.decide("s", st, st.args, []).status == "miss"
        assert len(s.warnings) == 1  # type: ignore[attr-defined]


def test_results_that_hold_a_secret_are_not_stored(tmp_path: Path) -> None:
    st = step(cache=True)
    s = session(tmp_path)
    s.secret_values = lambda: ["hunter2"]
    run_and_store(s, "s", st, {"stdout": "token hunter2"})
    assert cache_info(str(tmp_path / ".planrun/cache"))["entries"] == 0


def test_prune_sizes_and_least_recently_used_first(tmp_path: Path) -> None:
    assert parse_size("10K") == 10240 and parse_size("1M") == 1024**2 and parse_size("5") == 5
    with pytest.raises(ValueError):
        parse_size("ten")
    root = tmp_path / ".planrun/cache"
    for n in range(3):
        tree(tmp_path, {f"out{n}/f": "x" * 50_000})
        st = step(cache=True, args={"cmd": str(n)}, outputs=[f"out{n}/f"])
        run_and_store(session(tmp_path), f"s{n}", st, n)
    entries = sorted((root / "entries").iterdir())
    assert cache_info(str(root))["entries"] == 3
    old = time.time() - 3600
    for i, e in enumerate(entries):
        os.utime(e, (old + i, old + i))
    keep = entries[-1]
    os.utime(keep, None)  # used just now
    before = cache_info(str(root))["bytes"]
    assert prune(str(root), max_size=int(before) - 1) >= 1
    assert keep.exists()
    assert prune(str(root), older_than=60) >= 1
    assert [p.name for p in (root / "entries").iterdir()] == [keep.name]


def test_a_pattern_whose_braces_expand_too_far_is_a_pattern_error() -> None:
    # wcmatch's own limit (an exception without a public name) becomes planrun's PatternError,
    # for every caller of compile_patterns, not only validation.
    with pytest.raises(PatternError, match="more than 1000 patterns"):
        compile_patterns(("src/" + "{a,b}" * 11 + "*.py",))
