"""What planrun may touch in a cache directory: only a directory it marked (or one holding
nothing but its own files), only the files it wrote there, never through a symbolic link.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from planrun.cache.store import CacheStore, CorruptCache, Entry
from tests.conftest import assert_no_traceback
from tests.testkit import CACHED_OUTPUT_PLAN, cached_run

PLAN = CACHED_OUTPUT_PLAN  # one step whose output the cache stores

# What every planrun so far wrote as its mark.
LEGACY_TAG = (
    b"Signature: 8a477f597d28d172789f06886806bc55\n"
    b"# This directory is planrun's cache; `planrun cache clean` empties it.\n"
)
OLD = (0, 0)


def user_files(root: Path) -> dict[str, bytes]:
    """A folder of one's own: notes, a photo, a JSON file, all old."""
    files = {
        "entries/notes.txt": b"my notes",
        "entries/config.json": b'{"mine": true}',
        "blobs/photo.jpg": b"\xff\xd8\xff jpeg",
        "readme.txt": b"hello",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        os.utime(root / rel, OLD)
    return files


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def warnings(text: str) -> list[str]:
    """The console's warning lines (`HH:MM:SS.mmm ! text`), or stderr's `planrun: warning:`."""
    return [line for line in text.splitlines() if " ! " in line or "warning:" in line]


def statuses(r: Any) -> list[str]:
    return [s["status"] for s in r.json["steps"]]


# ---- a directory that is not a planrun cache -------------------------------------------------


@pytest.mark.parametrize(
    "args", [["clean"], ["prune", "--older-than", "1s"], ["prune", "--max-size", "0"]]
)
def test_clean_and_prune_refuse_a_folder_of_ones_own(run, tmp_path, args):
    files = user_files(tmp_path)
    r = run("cache", *args, "--cache-dir", ".")
    assert r.code == 2, r
    assert_no_traceback(r)
    assert len(r.err.strip().splitlines()) == 1 and "not a planrun cache" in r.err, r
    assert tree(tmp_path) == files


def test_a_run_in_a_folder_of_ones_own_goes_on_without_the_cache(run, write, tmp_path):
    files = user_files(tmp_path)
    write("p.yaml", PLAN)
    for _ in range(2):
        r = run("run", "p.yaml", "--cache-dir", ".", "--no-state", "--output", "json")
        assert r.code == 0, r
        assert statuses(r) == ["succeeded"], r  # never cached
        assert len(warnings(r.err)) == 1 and "not a planrun cache" in r.err, r
    assert not (tmp_path / "CACHEDIR.TAG").exists()
    assert {k: v for k, v in tree(tmp_path).items() if k in files} == files
    assert sorted(os.listdir(tmp_path / "entries")) == ["config.json", "notes.txt"]
    assert sorted(os.listdir(tmp_path / "blobs")) == ["photo.jpg"]


def test_another_tools_cachedir_tag_is_not_planruns_mark(run, write, tmp_path):
    shared = tmp_path / "target"
    shared.mkdir()
    (shared / "CACHEDIR.TAG").write_bytes(
        b"Signature: 8a477f597d28d172789f06886806bc55\n# created by cargo\n"
    )
    (shared / "debug").mkdir()
    write("p.yaml", PLAN)
    r = run("run", "p.yaml", "--cache-dir", "target", "--no-state")
    assert r.code == 0 and "not a planrun cache" in r.err, r
    assert sorted(os.listdir(shared)) == ["CACHEDIR.TAG", "debug"]
    assert run("cache", "clean", "--cache-dir", "target").code == 2


def test_a_linked_tag_is_not_planruns_mark(run, write, tmp_path):
    """planrun's own tag elsewhere, linked into a folder of one's own, marks nothing."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "CACHEDIR.TAG").write_bytes(LEGACY_TAG)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "CACHEDIR.TAG").symlink_to(tmp_path / "real" / "CACHEDIR.TAG")
    (mine / "entries").mkdir()
    (mine / "entries" / "notes.txt").write_text("x")
    write("p.yaml", PLAN)
    r = run("run", "p.yaml", "--cache-dir", "mine", "--no-state")
    assert r.code == 0 and "not a planrun cache" in r.err, r
    assert os.listdir(mine / "entries") == ["notes.txt"]
    assert run("cache", "clean", "--cache-dir", "mine").code == 2


# ---- planrun's own cache ---------------------------------------------------------------------


def test_clean_and_prune_remove_only_planruns_files_and_keep_the_mark(run, write, tmp_path):
    write("p.yaml", PLAN)
    cache = tmp_path / "c"
    assert run("run", "p.yaml", "--cache-dir", "c", "-q").code == 0
    tag = (cache / "CACHEDIR.TAG").read_bytes()
    assert tag.startswith(b"Signature: 8a477f597d28d172789f06886806bc55\n")
    files = user_files(cache)  # put there later, by hand
    hexname = "ab" * 32
    (cache / "entries" / f"{hexname}.json").write_text('{"not": "an entry"}')
    os.utime(cache / "entries" / f"{hexname}.json", OLD)
    files[f"entries/{hexname}.json"] = b'{"not": "an entry"}'
    for e in (cache / "entries").iterdir():
        os.utime(e, OLD)
    r = run("cache", "prune", "--older-than", "1s", "--cache-dir", "c")
    assert r.code == 0 and "removed 1 entry" in r.err, r
    assert run("run", "p.yaml", "--cache-dir", "c", "-q").code == 0
    r = run("cache", "clean", "--cache-dir", "c")
    assert r.code == 0 and "removed 1 entry" in r.err, r
    left = tree(cache)
    assert left == {**files, "CACHEDIR.TAG": tag}, sorted(left)
    r = run("run", "p.yaml", "--cache-dir", "c", "--no-state", "--output", "json")
    assert r.code == 0 and statuses(r) == ["succeeded"] and not warnings(r.err), r
    r = run("run", "p.yaml", "--cache-dir", "c", "--no-state", "--output", "json")
    assert statuses(r) == ["cached"], r


def test_a_cache_made_by_an_earlier_planrun_keeps_working(run, write, tmp_path):
    write("p.yaml", PLAN)
    assert run("run", "p.yaml", "-q").code == 0
    cache = tmp_path / ".planrun/cache"
    (cache / "CACHEDIR.TAG").write_bytes(LEGACY_TAG)
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert statuses(r) == ["cached"] and not warnings(r.err), r
    (cache / "CACHEDIR.TAG").unlink()  # a tag that could not be written: only planrun's files
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert statuses(r) == ["cached"] and not warnings(r.err), r
    r = run("cache", "clean")
    assert r.code == 0 and "removed 1 entry" in r.err, r


def test_an_empty_directory_becomes_a_marked_cache(run, write, tmp_path):
    (tmp_path / "ci-cache").mkdir()
    write("p.yaml", PLAN)
    r = run("run", "p.yaml", "--cache-dir", "ci-cache", "--no-state")
    assert r.code == 0 and not warnings(r.err), r
    assert sorted(os.listdir(tmp_path / "ci-cache")) == ["CACHEDIR.TAG", "blobs", "entries"]
    assert run("cache", "clean", "--cache-dir", "ci-cache").code == 0
    assert run("cache", "clean", "--cache-dir", "never-made").code == 0
    assert not (tmp_path / "never-made").exists()


# ---- symbolic links inside the cache ---------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    place = tmp_path.parent / f"{tmp_path.name}-outside"
    place.mkdir()
    return place


@pytest.mark.parametrize("linked", ["entries", "blobs", "both"])
@pytest.mark.parametrize("where", ["default", "named"])
def test_a_cache_whose_subdirectory_is_a_link_is_not_used(
    run, write, tmp_path, outside, linked, where
):
    write("p.yaml", PLAN)
    cache = tmp_path / (".planrun/cache" if where == "default" else "c")
    opts = [] if where == "default" else ["--cache-dir", "c"]
    cache.mkdir(parents=True)
    for sub in ("entries", "blobs"):
        if linked in (sub, "both"):
            (outside / sub).mkdir()
            (cache / sub).symlink_to(outside / sub)
    r = run("run", "p.yaml", "--no-state", "--output", "json", *opts)
    assert r.code == 0 and statuses(r) == ["succeeded"], r
    assert len(warnings(r.err)) == 1 and "symbolic link" in r.err, r
    assert [p for p in outside.rglob("*") if p.is_file()] == []
    assert not (cache / "CACHEDIR.TAG").exists()
    for args in (["clean"], ["prune", "--older-than", "1s"], ["info"]):
        r = run("cache", *args, *opts)
        if args != ["info"]:
            assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r
            assert "symbolic link" in r.err, r
        assert_no_traceback(r)
    assert [p for p in outside.rglob("*") if p.is_file()] == []


def test_a_subdirectory_linked_after_a_cache_was_made_is_not_followed(
    run, write, tmp_path, outside
):
    write("p.yaml", PLAN)
    assert run("run", "p.yaml", "-q").code == 0
    cache = tmp_path / ".planrun/cache"
    old = {p.name: p.read_bytes() for p in (cache / "entries").iterdir()}
    for name, data in old.items():
        (outside / name).write_bytes(data)
        os.utime(outside / name, OLD)
    os.rename(cache / "entries", cache / "entries.real")
    (cache / "entries").symlink_to(outside)
    before = {p.name: p.stat().st_mtime for p in outside.iterdir()}
    r = run("run", "p.yaml", "--force", "--no-state")
    assert r.code == 0 and "symbolic link" in r.err, r
    for args in (["clean"], ["prune", "--older-than", "1s"], ["prune", "--max-size", "0"]):
        assert run("cache", *args).code == 2
    assert {p.name: p.stat().st_mtime for p in outside.iterdir()} == before


def test_the_store_opens_nothing_through_a_link(tmp_path, outside):
    """Even when a subdirectory becomes a link after the directory was checked, the store
    writes, reads and touches nothing through it (no-follow opens below the cache)."""
    root = tmp_path / "c"
    seen: list[str] = []
    store = CacheStore(str(root), seen.append)
    key = hashlib.sha256(b"k").hexdigest()
    store.put(Entry(key, "p", "s", 1, 0, "", ""))
    assert store.get(key) is not None
    store.close()
    # planted: a blob name that is a link to a file of the user's, then linked subdirectories
    secret = outside / "secret"
    secret.write_bytes(b"mine")
    os.utime(secret, OLD)
    digest = hashlib.sha256(b"mine").hexdigest()
    (root / "blobs" / digest).symlink_to(secret)
    store = CacheStore(str(root), seen.append)
    with pytest.raises(CorruptCache):  # a miss, never a read through the link
        store.read_blob(digest)
    store.put_blob(b"mine", digest)
    assert secret.stat().st_mtime == 0
    store.close()
    for sub in ("entries", "blobs"):
        os.rename(root / sub, root / f"{sub}.real")
        (outside / sub).mkdir()
        (root / sub).symlink_to(outside / sub)
    store = CacheStore(str(root), seen.append)
    assert store.get(key) is None
    for write in (
        lambda: store.put(Entry(key, "p", "s", 2, 0, "", "")),
        lambda: store.put_blob(b"data"),
    ):
        with pytest.raises(OSError):
            write()
    store.touch(key, now=True)
    store.close()
    assert [p for p in outside.rglob("*") if p.is_file()] == [secret]


def test_only_planruns_temporary_files_are_swept(run, write, tmp_path):
    write("p.yaml", PLAN)
    assert run("run", "p.yaml", "--cache-dir", "c", "-q").code == 0
    cache = tmp_path / "c"
    digest = "cd" * 32
    stale = {
        "blobs": [f".{digest}.{'0' * 12}.tmp"],
        "entries": [f".{digest}.json.{'1' * 12}.tmp"],
    }
    foreign = {"blobs": [".photo.jpg.tmp", f".{digest}.tmp"], "entries": [".x.json.tmp"]}
    for sub in ("blobs", "entries"):
        for name in stale[sub] + foreign[sub]:
            (cache / sub / name).write_text("partial")
            os.utime(cache / sub / name, OLD)
    assert run("cache", "prune", "--older-than", "2400h", "--cache-dir", "c").code == 0
    for sub in ("blobs", "entries"):
        names = set(os.listdir(cache / sub))
        assert not names & set(stale[sub]) and set(foreign[sub]) <= names, names
    assert run("cache", "clean", "--cache-dir", "c").code == 0
    assert {sub: sorted(os.listdir(cache / sub)) for sub in ("blobs", "entries")} == {
        sub: sorted(foreign[sub]) for sub in ("blobs", "entries")
    }


def test_prune_and_clean_never_follow_a_linked_subdirectory(run, write, tmp_path):
    cached_run(run, write, tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    outside.mkdir()
    (outside / "old.json").write_text("{}")
    os.utime(outside / "old.json", (0, 0))
    (outside / "blob").write_text("x")
    os.utime(outside / "blob", (0, 0))
    cache = tmp_path / ".planrun/cache"
    for sub in ("entries", "blobs"):
        os.rename(cache / sub, cache / f"{sub}.real")
        (cache / sub).symlink_to(outside)
    for args in (["prune", "--older-than", "1s"], ["prune", "--max-size", "0"], ["clean"]):
        r = run("cache", *args)
        assert_no_traceback(r)
        assert sorted(p.name for p in outside.iterdir()) == ["blob", "old.json"], r


def test_a_linked_planrun_or_cache_directory_is_not_written_through(run, write, tmp_path):
    """A repository can ship `.planrun/cache -> ~/somewhere` (or `.planrun` itself): the cache
    is then not used, and `cache clean|prune` refuse it (exit 4), writing nothing there."""
    write("p.yaml", CACHED_OUTPUT_PLAN)
    outside = tmp_path.parent / f"{tmp_path.name}-linked"
    outside.mkdir()
    (outside / "entries").mkdir()
    (outside / "entries" / "keep.json").write_text("{}")
    os.utime(outside / "entries" / "keep.json", (0, 0))
    planrun_dir = tmp_path / ".planrun"
    planrun_dir.mkdir()
    (planrun_dir / "cache").symlink_to(outside)
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert "symbolic link" in r.err, r
    for args in (["clean"], ["prune", "--older-than", "1s"]):
        r = run("cache", *args)
        assert r.code == 4, r
        assert_no_traceback(r)
    assert sorted(p.name for p in outside.rglob("*")) == ["entries", "keep.json"]
    (planrun_dir / "cache").unlink()
    shutil.rmtree(planrun_dir)
    planrun_dir.symlink_to(outside)
    r = run("run", "p.yaml", "--no-state")
    assert r.code == 0, r
    assert sorted(p.name for p in outside.rglob("*")) == ["entries", "keep.json"]
    r = run("cache", "clean", "--cache-dir", str(tmp_path / "mine"))  # a directory of one's own
    assert r.code == 0, r


def test_a_file_another_writer_renames_while_the_directory_is_checked_is_not_foreign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two steps storing at once into a new cache: one checks the directory while the other
    renames its temporary file into place. The file the check listed is gone when it looks at
    it; that is a writer of planrun at work, not somebody else's file (the run stored nothing
    for one of its steps: "not a planrun cache (it holds other files ...)")."""
    from planrun.cache import cachedir

    root = tmp_path / "cache"
    (root / "entries").mkdir(parents=True)
    temp = root / "entries" / f".{'a' * 64}.json.{'0' * 12}.tmp"
    temp.write_text("{}")
    real_stat = os.stat

    def renamed_first(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        if path == temp.name:  # the other writer's rename lands between listing and stat
            temp.rename(root / "entries" / f"{'a' * 64}.json")
        return real_stat(path, *args, **kw)

    monkeypatch.setattr(cachedir.os, "stat", renamed_first)
    assert cachedir.refusal(str(root)) is None


def test_a_mark_another_writer_puts_while_the_directory_is_checked_is_planruns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other half of the same race: the directory had no mark when the check began, and
    the other writer's mark is in the listing."""
    from planrun.cache import cachedir

    root = tmp_path / "cache"
    (root / "entries").mkdir(parents=True)
    real_listdir = os.listdir

    def marked_first(path: Any = ".") -> list[str]:
        if not (root / cachedir.TAG_NAME).exists():  # the mark lands as the listing starts
            (root / cachedir.TAG_NAME).write_bytes(cachedir.TAG)
        return real_listdir(path)

    monkeypatch.setattr(cachedir.os, "listdir", marked_first)
    assert cachedir.refusal(str(root)) is None
