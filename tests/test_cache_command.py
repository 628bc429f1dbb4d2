"""`planrun cache info`, `prune` and `clean`: their documents, least-recently-used pruning, and
refused sizes and ages."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import planrun
from tests.test_cache_run import project, statuses
from tests.testkit import cache_entry_files, one_line_error, run_plan, write_indented_plan

# ---- planrun cache ---------------------------------------------------------------------------


def test_cache_info_shapes(tmp_path: Path) -> None:
    r = planrun("cache", "info", "--output", "json", cwd=tmp_path)  # no cache yet
    assert r.code == 0 and r.json == {
        "dir": str(tmp_path / ".planrun/cache"),
        "entries": 0,
        "bytes": 0,
    }
    project(tmp_path)
    run_plan(tmp_path)
    doc = planrun("cache", "info", "--output", "json", cwd=tmp_path).json
    assert set(doc) == {"dir", "entries", "bytes"}
    assert doc["entries"] == 2 and isinstance(doc["bytes"], int)
    on_disk = sum(p.lstat().st_blocks * 512 for p in Path(doc["dir"]).rglob("*"))
    assert doc["bytes"] >= on_disk  # the directory's size on disk, as du counts it
    text = planrun("cache", "info", cwd=tmp_path).out
    assert doc["dir"] in text and "2 entries" in text and f"{doc['bytes']} bytes" in text


@pytest.mark.parametrize("under", ["", "/sub/dir"])
def test_a_cache_directory_that_is_or_is_under_a_file_is_one_error_line(
    tmp_path: Path, under: str
) -> None:
    """PLANRUN_CACHE_DIR naming a regular file (or a path below one) made `cache info` show
    "0 entries" and exit 0, as if it were an empty cache: no cache can ever be there."""
    (tmp_path / "afile").write_text("not a cache\n")
    where = f"{tmp_path}/afile{under}"
    why = f"{where} is not a directory" if not under else f"{where}: {tmp_path}/afile is a file"
    env = {"PLANRUN_CACHE_DIR": where}
    for command, said in [
        (["info"], "no cache can be there (choose another with --cache-dir)"),
        (["info", "--output", "json"], "no cache can be there (choose another with --cache-dir)"),
        (["clean"], "refusing to remove anything from it"),
        (["prune", "--max-size", "1K"], "refusing to remove anything from it"),
    ]:
        r = planrun("cache", *command, cwd=tmp_path, env=env)
        assert r.code == 2, r
        assert one_line_error(r) == f"planrun: error: {why}: {said}", r
        json_doc = {"error": f"{why}: {said}", "exit_code": 2}
        assert (r.json == json_doc) if "json" in command else r.out == "", r
    # `--cache-dir` is refused as well (a file itself by the option's own check)
    r = planrun("cache", "info", "--cache-dir", f"afile{under}", cwd=tmp_path)
    said = "no cache can be there" if under else "Directory 'afile' is a file"
    assert r.code == 2 and said in r.err and r.out == "", r
    # A run goes on without the cache, with one warning, and its cached step runs each time.
    project(tmp_path)
    for _ in range(2):
        r = run_plan(tmp_path, "--output", "json", env=env)
        assert r.code == 0 and set(statuses(r).values()) == {"succeeded"}, r
        warned = [ln for ln in r.err.splitlines() if "the cache is not used" in ln]
        assert len(warned) == 1 and why in warned[0], r.err
    assert (tmp_path / "afile").read_text() == "not a cache\n"


def test_cache_info_says_one_entry_in_the_singular(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        'steps:\n  - {id: s, tool: shell, args: {cmd: "echo hi"}, cache: true}\n'
    )
    assert run_plan(tmp_path).code == 0
    text = planrun("cache", "info", cwd=tmp_path).out
    assert ": 1 entry, " in text, text


def lru_project(root: Path) -> Path:
    return write_indented_plan(
        root,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo ${n}"}, cache: true}
    """,
    )


def test_prune_drops_the_least_recently_used_entry_first(tmp_path: Path) -> None:
    """Entries made for n=1, 2, 3 in that order, then n=1 hit again: trimming to what two
    entries need drops n=2, the least recently used, and keeps n=1."""
    lru_project(tmp_path)
    for n in (1, 2, 3):
        assert run_plan(tmp_path, "--var", f"n={n}").code == 0
    assert statuses(run_plan(tmp_path, "--var", "n=1", "--output", "json")) == {"s": "cached"}
    entries = cache_entry_files(tmp_path)
    assert len(entries) == 3
    size = planrun("cache", "info", "--output", "json", cwd=tmp_path).json["bytes"]
    smallest = min(e.lstat().st_blocks * 512 for e in entries)
    r = planrun("cache", "prune", "--max-size", str(size - smallest), cwd=tmp_path)
    assert r.code == 0, r
    assert "removed 1 entry" in r.err
    left = planrun("cache", "info", "--output", "json", cwd=tmp_path).json
    assert left["entries"] == 2 and left["bytes"] <= size - smallest
    after = {
        n: statuses(run_plan(tmp_path, "--var", f"n={n}", "--output", "json"))["s"] for n in (1, 3)
    }
    assert after == {1: "cached", 3: "cached"}
    assert statuses(run_plan(tmp_path, "--var", "n=2", "--output", "json")) == {"s": "succeeded"}


def test_prune_older_than_drops_only_entries_unused_that_long(tmp_path: Path) -> None:
    lru_project(tmp_path)
    for n in (1, 2):
        run_plan(tmp_path, "--var", f"n={n}")
    stale = time.time() - 7200
    by_n = {}
    for e in cache_entry_files(tmp_path):
        by_n["1" if '"stdout": "1\\n"' in e.read_text() else "2"] = e
    os.utime(by_n["1"], (stale, stale))
    r = planrun("cache", "prune", "--older-than", "1h", cwd=tmp_path)
    assert r.code == 0 and "removed 1 entry" in r.err, r
    assert cache_entry_files(tmp_path) == [by_n["2"]]


@pytest.mark.parametrize("size", ["-1", "lots", "1T", "1e3", "nan", "", "10 X", "0x10"])
def test_a_bad_max_size_is_one_line_and_exit_2(tmp_path: Path, size: str) -> None:
    r = planrun("cache", "prune", "--max-size", size, cwd=tmp_path)
    assert r.code == 2
    assert "size" in one_line_error(r)


@pytest.mark.parametrize("age", ["-5m", "soon", "nan", "inf", "", "1e999", "5 minutes"])
def test_a_bad_older_than_is_one_line_and_exit_2(tmp_path: Path, age: str) -> None:
    r = planrun("cache", "prune", "--older-than", age, cwd=tmp_path)
    assert r.code == 2
    assert "duration" in one_line_error(r)


@pytest.mark.parametrize("unit", ["K", "M", "G"])
def test_sizes_are_powers_of_1024(tmp_path: Path, unit: str) -> None:
    """The cache's exact size written with a unit keeps everything (a power of 1000 would be
    smaller than it and remove entries); one byte less removes them."""
    project(tmp_path)
    run_plan(tmp_path)
    used = planrun("cache", "info", "--output", "json", cwd=tmp_path).json["bytes"]
    power = {"K": 1, "M": 2, "G": 3}[unit]
    size = (
        f"{used / 1024**power:.20f}".rstrip("0").rstrip(".") + unit
    )  # exact: `used` is whole blocks
    r = planrun("cache", "prune", "--max-size", size, cwd=tmp_path)
    assert r.code == 0 and "removed 0 entries" in r.err, (size, r)
    r = planrun("cache", "prune", "--max-size", str(used - 1), cwd=tmp_path)
    assert r.code == 0 and "removed 0 entries" not in r.err, r


def test_a_directory_squatting_a_blob_s_name_is_named_with_a_hint_and_kept_by_clean(
    tmp_path: Path,
) -> None:
    """A directory planrun did not write, under a blob's name: the step is not stored, with one
    warning naming the path in plain words and saying what to do; `cache clean` removes only
    what planrun wrote (the directory stays) and says so."""
    import hashlib

    plan = 'steps:\n  - id: b\n    tool: shell\n    args: {cmd: "echo WORD > out.txt"}\n'
    (tmp_path / "plan.yaml").write_text(plan.replace("WORD", "first") + "    outputs: [out.txt]\n")
    assert planrun("run", "plan.yaml", cwd=tmp_path).code == 0  # the cache is planrun's
    (tmp_path / "plan.yaml").write_text(plan.replace("WORD", "hi") + "    outputs: [out.txt]\n")
    squat = tmp_path / ".planrun/cache/blobs" / hashlib.sha256(b"hi\n").hexdigest()
    squat.mkdir()
    r = planrun("run", "plan.yaml", cwd=tmp_path)
    assert r.code == 0, r
    warning = [line for line in r.err.splitlines() if "not stored in the cache" in line]
    assert len(warning) == 1, r
    assert "Errno" not in warning[0] and "Is a directory" not in warning[0]
    assert str(squat) in warning[0] or f".planrun/cache/blobs/{squat.name}" in warning[0]
    assert "a directory planrun did not write" in warning[0]
    assert "remove it" in warning[0]
    c = planrun("cache", "clean", cwd=tmp_path)
    assert c.code == 0, c
    assert squat.is_dir()
    assert squat.name in c.err and "not planrun's" in c.err, c


@contextlib.contextmanager
def read_only(where: Path) -> Iterator[None]:
    """`where` bound read-only onto itself (needs root and mount; the test is skipped where
    there is none)."""
    bind = subprocess.run(["mount", "--bind", str(where), str(where)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        ro = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(where)], capture_output=True, check=False
        )
        if ro.returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.parametrize(
    "args", [["clean"], ["prune", "--max-size", "0"], ["prune", "--older-than", "0s"]]
)
def test_a_cache_that_cannot_be_emptied_says_so_and_exits_1(
    tmp_path: Path, args: list[str]
) -> None:
    """On a read-only file system nothing can be removed: `clean` and `prune` name the first
    file they could not remove, in plain words, and exit 1, instead of `removed 0 entries`
    and success with every entry still there."""
    project(tmp_path)
    run_plan(tmp_path)
    cache = tmp_path / ".planrun/cache"
    before = len(cache_entry_files(tmp_path))
    assert before == 2
    with read_only(cache):
        r = planrun("cache", *args, cwd=tmp_path)
    assert r.code == 1, r
    assert "Traceback" not in r.err and "Errno" not in r.err, r
    error = [line for line in r.err.splitlines() if line.startswith("planrun: error:")]
    assert len(error) == 1 and "the file system is read-only" in error[0], r
    assert str(cache / "entries") in error[0], r
    assert len(cache_entry_files(tmp_path)) == before


def test_a_directory_nested_deeper_than_the_recursion_limit_is_counted(tmp_path: Path) -> None:
    """Someone's tree 1,100 directories deep inside the cache directory: `info` counts it and
    `prune` measures it, instead of ending with an internal RecursionError."""
    project(tmp_path)
    run_plan(tmp_path)
    before = planrun("cache", "info", "--output", "json", cwd=tmp_path).json["bytes"]
    junk = deep = tmp_path / ".planrun/cache/junk"
    try:
        for _ in range(1100):
            deep /= "d"
            deep.mkdir(parents=True)
        r = planrun("cache", "info", "--output", "json", cwd=tmp_path)
        assert r.code == 0 and r.json["entries"] == 2, r
        assert r.json["bytes"] > before  # its directories are counted
        r = planrun("cache", "prune", "--max-size", "0", cwd=tmp_path)
        assert r.code == 0 and "removed 2 entries" in r.err, r
        assert deep.is_dir()  # not planrun's: kept
    finally:  # by rm: pytest's own removal of old temporary directories recurses
        subprocess.run(["rm", "-rf", str(junk)], check=True)
