"""The cache's shortcuts stay correct: stat records, remembered walks, lazy decoding.

A no-change run looks at no file's bytes (only stats); every change a stat can see is still
seen, and a damaged record file only costs speed.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from planrun.cache import statcache
from planrun.cache.session import CacheOptions, CacheSession, Decision
from planrun.cache.statcache import StatRecords


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def step(**kw: Any) -> Any:
    base = {"tool": "shell", "args": {"cmd": "x"}, "sources": ["src"], "outputs": None}
    base |= {"run": None, "env": None, "cwd": None}  # a step without run, env or cwd
    return SimpleNamespace(**{**base, "cache": None, **kw})


def decide(root: Path, st: Any, sid: str = "s") -> Decision:
    s = CacheSession(CacheOptions(), "p", str(root), {}, print)
    try:
        return s.decide(sid, st, st.args, [])
    finally:
        s.close()


def store(root: Path, st: Any, result: Any = None, sid: str = "s") -> None:
    s = CacheSession(CacheOptions(), "p", str(root), {}, print)
    s.decide(sid, st, st.args, [])
    assert asyncio.run(s.after(sid, st, result)) is None
    s.close()


RACY_NS = 30_000_000  # 30 ms instead of 2 s: above any file system's clock tick


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short racy window, so that a test can wait it out (see settle)."""
    monkeypatch.setattr(statcache, "RACY_NS", RACY_NS)


def settle(root: Path) -> None:
    """Wait until every file and directory under `root` is older than the racy window (a
    condition on their own times): what the cache then remembers is trusted."""
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in [root, *root.rglob("*")])
    while time.time_ns() - newest <= RACY_NS:
        time.sleep(0.005)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The files whose bytes the cache hashes (a spy around the real hash_file)."""
    seen: list[str] = []
    real = statcache.hash_file

    def spy(path: str) -> str:
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(statcache, "hash_file", spy)
    yield seen


def test_an_unchanged_tree_reads_no_file_and_rewrites_no_record(
    tmp_path: Path, trusted: None, reads: list[str]
) -> None:
    write(tmp_path, {f"src/d{n}/f{m}.txt": f"{n}{m}" for n in range(3) for m in range(4)})
    write(tmp_path, {"out/r.txt": "result"})
    st = step(outputs=["out/r.txt"])
    settle(tmp_path)
    store(tmp_path, st)
    decide(tmp_path, st)  # the first hit remembers the outputs' walk too
    records = tmp_path / ".planrun/stat-records"
    before = records.stat()
    reads.clear()
    d = decide(tmp_path, st)
    assert (d.status, reads) == ("hit", [])
    after = records.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_same_size_and_mtime_but_a_new_ctime_is_a_miss(tmp_path: Path, trusted: None) -> None:
    write(tmp_path, {"src/a.txt": "one", "src/b.txt": "two"})
    st = step()
    settle(tmp_path)
    store(tmp_path, st)
    assert decide(tmp_path, st).status == "hit"
    a = tmp_path / "src/a.txt"
    old = a.stat()
    a.write_text("ONE")  # same size, same inode
    os.utime(a, ns=(old.st_atime_ns, old.st_mtime_ns))  # mtime put back; ctime moves on
    assert a.stat().st_mtime_ns == old.st_mtime_ns and a.stat().st_size == old.st_size
    d = decide(tmp_path, st)
    assert (d.status, d.reason) == ("miss", "sources changed: src/a.txt")


def test_a_file_too_recent_to_trust_is_hashed_again(tmp_path: Path, reads: list[str]) -> None:
    write(tmp_path, {"src/a.txt": "one"})
    st = step()
    store(tmp_path, st)
    reads.clear()
    assert decide(tmp_path, st).status == "hit"
    assert reads == ["a.txt"]  # written within the racy window: neither record nor walk kept


def test_an_output_changed_in_place_is_restored(tmp_path: Path, trusted: None) -> None:
    write(tmp_path, {"src/a.txt": "a", "out/r.txt": "good"})
    st = step(outputs=["out/r.txt"])
    settle(tmp_path)
    store(tmp_path, st)
    assert decide(tmp_path, st).status == "hit"  # remembered: outputs as in the manifest
    out = tmp_path / "out/r.txt"
    old = out.stat()
    out.write_text("evil")
    os.utime(out, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert decide(tmp_path, st).status == "hit"
    assert out.read_text() == "good"


def test_undecodable_file_names_round_trip_through_the_records(
    tmp_path: Path, trusted: None, reads: list[str]
) -> None:
    write(tmp_path, {"src/a.txt": "a"})
    fd = os.open(os.fsencode(tmp_path / "src") + b"/\xff\xfe.txt", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"odd")
    os.close(fd)
    st = step()
    settle(tmp_path)
    store(tmp_path, st)
    decide(tmp_path, st)
    reads.clear()
    assert decide(tmp_path, st).status == "hit" and reads == []
    records = StatRecords.load(str(tmp_path / ".planrun/stat-records"))
    assert records.lookup(os.fsdecode(b"src/\xff\xfe.txt")) is not None


@pytest.mark.parametrize(
    "damage",
    [
        b"planrun-stat-records 4\n-1 0\n",
        b"planrun-stat-records 4\n5 99999999\n" + b"x" * 10,
        b"planrun-stat-records 4\n2 0\n" + b"\0" * 128 + b"only-one-name",
        b"planrun-stat-records 4\nten one\n",
        b"planrun-stat-records 4\n1 1\n" + b"\xff" * 200,
        b"\x00\x01 not records at all",
    ],
)
def test_damaged_stat_records_only_cost_speed(tmp_path: Path, trusted: None, damage: bytes) -> None:
    write(tmp_path, {"src/a.txt": "a", "src/b.txt": "b"})
    st = step()
    settle(tmp_path)
    store(tmp_path, st, result="r")
    (tmp_path / ".planrun/stat-records").write_bytes(damage)
    d = decide(tmp_path, st)
    assert d.status == "hit" and d.entry is not None and d.entry.result == "r"
    (tmp_path / "src/a.txt").write_text("A")
    (tmp_path / ".planrun/stat-records").write_bytes(damage)
    assert decide(tmp_path, st).reason == "sources changed: src/a.txt"


def test_a_hit_marks_its_entry_used_at_most_once_a_minute(tmp_path: Path) -> None:
    write(tmp_path, {"src/a.txt": "a"})
    st = step()
    store(tmp_path, st)
    (entry,) = (tmp_path / ".planrun/cache/entries").iterdir()
    hour_ago = entry.stat().st_mtime - 3600
    os.utime(entry, (hour_ago, hour_ago))
    assert decide(tmp_path, st).status == "hit"
    used = entry.stat().st_mtime_ns
    assert used / 1e9 > hour_ago + 3000  # marked used: least recently used pruning sees it
    assert decide(tmp_path, st).status == "hit"
    assert entry.stat().st_mtime_ns == used  # used seconds ago: not written again


def test_a_huge_stat_record_file_is_not_loaded(tmp_path: Path, trusted: None) -> None:
    write(tmp_path, {"src/a.txt": "a"})
    st = step()
    settle(tmp_path)
    store(tmp_path, st, result="r")
    for name in ("stat-records", "cache-recent.json"):
        with open(tmp_path / ".planrun" / name, "r+b") as f:
            f.truncate(300 << 20)  # sparse: no disk used, but far too large to be ours
    d = decide(tmp_path, st)
    assert d.status == "hit" and d.entry is not None and d.entry.result == "r"


@pytest.mark.parametrize("change", ["add", "remove", "rename", "replace by a directory"])
def test_a_remembered_directory_listing_sees_every_change_of_its_names(
    tmp_path: Path, trusted: None, change: str
) -> None:
    write(tmp_path, {"src/a.txt": "a", "src/b.txt": "b", "src/sub/c.txt": "c"})
    st = step()
    settle(tmp_path)
    store(tmp_path, st)
    assert decide(tmp_path, st).status == "hit"
    assert (tmp_path / ".planrun/listings").stat().st_size > 0  # the directories remembered
    src = tmp_path / "src"
    if change == "add":
        (src / "new.txt").write_text("n")
    elif change == "remove":
        (src / "b.txt").unlink()
    elif change == "rename":
        (src / "b.txt").rename(src / "z.txt")
    else:
        (src / "b.txt").unlink()
        write(tmp_path, {"src/b.txt/inner.txt": "b"})
    d = decide(tmp_path, st)
    assert d.status == "miss" and d.reason.startswith("sources changed: src/")


def test_a_directory_changed_a_moment_ago_is_listed_again(tmp_path: Path) -> None:
    write(tmp_path, {"src/a.txt": "a"})
    st = step()
    store(tmp_path, st)
    decide(tmp_path, st)
    listings = tmp_path / ".planrun/listings"
    assert not listings.exists() or b"src" not in listings.read_bytes()


@pytest.mark.parametrize(
    "damage",
    [b"planrun-listings 1\n" + b"\xff" * 40, b"planrun-listings 1\n" + b"\0" * 3, b"junk"],
)
def test_damaged_listings_only_cost_speed(tmp_path: Path, trusted: None, damage: bytes) -> None:
    write(tmp_path, {"src/a.txt": "a"})
    st = step()
    settle(tmp_path)
    store(tmp_path, st, result="r")
    decide(tmp_path, st)
    (tmp_path / ".planrun/listings").write_bytes(damage)
    assert decide(tmp_path, st).status == "hit"
    (tmp_path / "src/b.txt").write_text("b")
    (tmp_path / ".planrun/listings").write_bytes(damage)
    assert decide(tmp_path, st).reason == "sources changed: src/b.txt"


def test_directories_where_the_shortcut_files_belong_only_cost_speed(
    tmp_path: Path, trusted: None
) -> None:
    write(tmp_path, {"src/a.txt": "a"})
    settle(tmp_path)
    st = step()
    store(tmp_path, st, result="r")
    for name in ("stat-records", "listings", "cache-recent.json"):
        (tmp_path / ".planrun" / name).unlink(missing_ok=True)
        (tmp_path / ".planrun" / name).mkdir()
    d = decide(tmp_path, st)
    assert d.status == "hit" and d.entry is not None and d.entry.result == "r"
    (tmp_path / "src/a.txt").write_text("A")
    assert decide(tmp_path, st).reason == "no cache entry"  # no recent entry to compare with
