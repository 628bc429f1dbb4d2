"""Restoring a hit's outputs: only what the step's own `outputs` match, inside the working
directory, never through a link; foreach instances that share a glob; a restore killed midway."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_no_traceback, kill_9, planrun, spawn_planrun, wait_until
from tests.testkit import CACHED_OUTPUT_PLAN, DEEP_JSON, cached_run, only_cache_entry

BUILD = """
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out && echo built > out/app.txt"}
    outputs: ["out/app.txt"]
"""

POISON = b"#!/bin/sh\necho pwned > pwned.txt\n"


def go(cwd: Path, *args: str) -> Any:
    r = planrun("run", "plan.yaml", "--output", "json", *args, cwd=cwd)
    assert_no_traceback(r)
    assert r.code == 0, r
    return r


def statuses(result: Any) -> dict[str, str]:
    return {s["id"]: s["status"] for s in result.json["steps"]}


def entries(cwd: Path) -> list[Path]:
    return sorted((cwd / ".planrun/cache/entries").glob("*.json"))


def rewrite_entry(path: Path, change: Any) -> None:
    """Edit an entry's body with `change(doc)` and write it back with a valid checksum: what
    anyone who can write the cache directory can do."""
    _head, _, body = path.read_bytes().partition(b"\n")
    doc = json.loads(body)
    change(doc)
    new = json.dumps(doc).encode()
    path.write_bytes(
        f"planrun-cache-entry {doc['format']} {hashlib.sha256(new).hexdigest()}\n".encode() + new
    )


def poison(cwd: Path, target: str) -> None:
    """Add `target` (holding POISON, mode 755) to the manifest of every entry."""
    digest = hashlib.sha256(POISON).hexdigest()
    (cwd / ".planrun/cache/blobs" / digest).write_bytes(POISON)
    line = {"path": target, "hash": digest, "mode": 0o755, "size": len(POISON)}
    for path in entries(cwd):
        rewrite_entry(path, lambda doc: doc["outputs"].append(line))


@pytest.mark.parametrize(
    "target",
    [".git/hooks/pre-commit", "plan.yaml", "Makefile", "out/../Makefile", "out/./app2.txt"],
)
def test_an_entry_naming_a_path_outside_the_outputs_is_a_miss_and_writes_nothing(
    tmp_path: Path, target: str
) -> None:
    (tmp_path / "plan.yaml").write_text(BUILD.lstrip())
    (tmp_path / ".git/hooks").mkdir(parents=True)
    go(tmp_path)
    plan_before = (tmp_path / "plan.yaml").read_bytes()
    poison(tmp_path, target)
    (tmp_path / "out/app.txt").unlink()  # so that the hit has something to restore

    r = go(tmp_path)
    assert statuses(r) == {"build": "succeeded"}  # a miss: it ran
    assert "cache entry" in r.err, r  # a warning names the entry
    assert not (tmp_path / ".git/hooks/pre-commit").exists()
    assert not (tmp_path / "Makefile").exists()
    assert not (tmp_path / "out/app2.txt").exists()
    assert (tmp_path / "plan.yaml").read_bytes() == plan_before


def test_an_absolute_path_in_an_entry_writes_nothing(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "w", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "plan.yaml").write_text(BUILD.lstrip())
    go(work)
    poison(work, str(elsewhere / "evil.sh"))
    r = go(work)
    assert statuses(r) == {"build": "succeeded"}
    assert "cache entry" in r.err
    assert not (elsewhere / "evil.sh").exists()


def test_a_cache_true_step_without_outputs_restores_no_file(tmp_path: Path) -> None:
    plan = "steps:\n  - id: t\n    tool: shell\n    args: {cmd: 'echo hi'}\n    cache: true\n"
    (tmp_path / "plan.yaml").write_text(plan)
    go(tmp_path)
    poison(tmp_path, "Makefile")
    r = go(tmp_path)
    assert statuses(r) == {"t": "succeeded"}
    assert "Makefile" in r.err and "cache entry" in r.err
    assert not (tmp_path / "Makefile").exists()


def test_an_entry_is_not_restored_through_a_linked_directory(tmp_path: Path) -> None:
    plan = """
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out gen && echo built > out/app.txt && echo gen > gen/g.txt"}
    outputs: ["gen/g.txt", "out/app.txt"]
"""
    (tmp_path / "plan.yaml").write_text(plan.lstrip())
    go(tmp_path)
    (tmp_path / "gen/g.txt").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out/app.txt").unlink()
    (tmp_path / "out").rmdir()
    (tmp_path / "out").symlink_to(elsewhere)

    r = planrun("run", "plan.yaml", "--output", "json", "--events", "e.jsonl", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded"}
    assert "symbolic link" in r.err
    started = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert any(e["event"] == "step.started" for e in started)  # it ran: nothing was restored
    # the run wrote through the link itself; that file is not stored (with a warning)
    assert "not stored" in r.err, r
    for path in entries(tmp_path):
        doc = json.loads(path.read_bytes().partition(b"\n")[2])
        assert all(not o["path"].startswith("out/") for o in doc["outputs"])


def test_a_directory_where_an_output_goes_is_left_alone(tmp_path: Path) -> None:
    """The hit cannot restore out/app.txt over a directory: a warning, the step runs (and
    fails here, as its command cannot write there), the directory and what it holds stay."""
    (tmp_path / "plan.yaml").write_text(BUILD.lstrip())
    go(tmp_path)
    (tmp_path / "out/app.txt").unlink()
    (tmp_path / "out/app.txt").mkdir()
    (tmp_path / "out/app.txt/kept").write_text("mine")
    r = planrun("run", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert_no_traceback(r)
    assert "cannot restore out/app.txt: a directory is in the way" in r.err, r
    assert statuses(r) == {"build": "failed"}
    assert (tmp_path / "out/app.txt/kept").read_text() == "mine"
    temp = tmp_path / ".planrun/tmp"
    assert not temp.exists() or not list(temp.iterdir())  # no temporary file left


def test_a_file_where_an_output_s_directory_goes_is_said_in_plain_words(tmp_path: Path) -> None:
    """out/ is a file now: the hit cannot restore out/app.txt, and the warning says why in
    planrun's words, not the system's."""
    (tmp_path / "plan.yaml").write_text(BUILD.lstrip())
    go(tmp_path)
    (tmp_path / "out/app.txt").unlink()
    (tmp_path / "out").rmdir()
    (tmp_path / "out").write_text("mine")
    r = planrun("run", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert_no_traceback(r)
    assert "cannot restore out/app.txt: a file is in the way of a directory" in r.err, r
    assert "Not a directory" not in r.err and "Errno" not in r.err
    assert (tmp_path / "out").read_text() == "mine"


def test_outputs_behind_a_linked_file_are_not_stored(tmp_path: Path) -> None:
    plan = """
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out && echo built > out/app.txt && ln -sf ../target.txt out/link.txt"}
    outputs: ["out/*.txt"]
"""
    (tmp_path / "target.txt").write_text("target\n")
    (tmp_path / "plan.yaml").write_text(plan.lstrip())
    r = go(tmp_path)
    assert "out/link.txt" in r.err and "not stored" in r.err, r
    [entry] = entries(tmp_path)
    doc = json.loads(entry.read_bytes().partition(b"\n")[2])
    assert [o["path"] for o in doc["outputs"]] == ["out/app.txt"]


def test_an_output_in_planrun_s_own_directory_is_not_stored(tmp_path: Path) -> None:
    """A restore never writes into `.planrun/`, so an entry naming a file there would be
    refused at every hit: such an output is not stored (with a warning), and the rest is."""
    plan = """
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out && echo built > out/app.txt && echo own > .planrun/own.txt"}
    outputs: ["out/app.txt", ".planrun/own.txt"]
"""
    (tmp_path / "plan.yaml").write_text(plan.lstrip())
    r = go(tmp_path)
    assert ".planrun/own.txt" in r.err and "not stored" in r.err, r
    [entry] = entries(tmp_path)
    doc = json.loads(entry.read_bytes().partition(b"\n")[2])
    assert [o["path"] for o in doc["outputs"]] == ["out/app.txt"]
    (tmp_path / "out" / "app.txt").unlink()
    again = go(tmp_path)
    assert statuses(again) == {"build": "cached"}, again
    assert "not usable" not in again.err, again
    assert (tmp_path / "out" / "app.txt").read_text() == "built\n"


# ---- foreach instances sharing an output glob -----------------------------------------------

SHARED = """
variables: {versions: {p1: 1, p2: 1, p3: 1}}
steps:
  - id: gen
    tool: shell
    foreach: [p1, p2, p3]
    args: {cmd: "mkdir -p dist && echo ${item} v${versions[item]} > dist/${item}.txt"}
    outputs: ["dist/*.txt"]
"""


def dist(cwd: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((cwd / "dist").glob("*.txt"))}


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_foreach_sharing_a_glob_keeps_the_rebuilt_files(tmp_path: Path, jobs: str) -> None:
    (tmp_path / "plan.yaml").write_text(SHARED.lstrip())
    go(tmp_path, "-j", jobs)
    bumped = ("--var", "versions={p1: 2, p2: 2, p3: 1}", "-j", jobs)
    r = go(tmp_path, *bumped)
    assert statuses(r)["gen[2]"] == "cached"
    want = {"p1.txt": "p1 v2\n", "p2.txt": "p2 v2\n", "p3.txt": "p3 v1\n"}
    assert dist(tmp_path) == want
    for _ in range(2):  # later runs hit every instance and keep the files right
        r = go(tmp_path, *bumped)
        assert set(statuses(r).values()) == {"succeeded", "cached"}
        assert statuses(r)["gen[0]"] == "cached" and statuses(r)["gen[1]"] == "cached"
        assert dist(tmp_path) == want


def test_foreach_sharing_a_glob_restores_each_instance_s_own_files(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(SHARED.lstrip())
    go(tmp_path, "-j", "1")
    bumped = ("--var", "versions={p1: 2, p2: 2, p3: 1}", "-j", "1")
    go(tmp_path, *bumped)
    for p in (tmp_path / "dist").iterdir():
        p.unlink()
    r = go(tmp_path, *bumped)
    assert {s for k, s in statuses(r).items() if k != "gen"} == {"cached"}
    assert dist(tmp_path) == {"p1.txt": "p1 v2\n", "p2.txt": "p2 v2\n", "p3.txt": "p3 v1\n"}


TEMPLATED = """
variables: {dir: dist}
steps:
  - id: gen
    tool: shell
    foreach: [p1, p2, p3]
    args: {cmd: "mkdir -p ${dir} && cp src/${item}.in ${dir}/${item}.txt"}
    sources: ["src/${item}.in"]
    outputs: ["${dir}/${item}.txt"]
"""


def test_foreach_outputs_and_sources_are_rendered_per_instance(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for p in ("p1", "p2", "p3"):
        (tmp_path / "src" / f"{p}.in").write_text(f"{p} old\n")
    (tmp_path / "plan.yaml").write_text(TEMPLATED.lstrip())
    r = go(tmp_path)
    assert set(statuses(r).values()) == {"succeeded"}
    (tmp_path / "src/p1.in").write_text("p1 new\n")
    (tmp_path / "src/p2.in").write_text("p2 new\n")
    r = go(tmp_path)
    assert statuses(r) == {
        "gen": "succeeded", "gen[0]": "succeeded", "gen[1]": "succeeded", "gen[2]": "cached"
    }  # fmt: skip
    want = {"p1.txt": "p1 new\n", "p2.txt": "p2 new\n", "p3.txt": "p3 old\n"}
    assert dist(tmp_path) == want
    for p in (tmp_path / "dist").iterdir():
        p.unlink()
    r = go(tmp_path)
    assert {s for k, s in statuses(r).items() if k != "gen"} == {"cached"}
    assert dist(tmp_path) == want
    for path in entries(tmp_path):  # each instance stored its own file only
        doc = json.loads(path.read_bytes().partition(b"\n")[2])
        assert len(doc["outputs"]) == 1


def test_a_plain_step_s_outputs_read_variables(tmp_path: Path) -> None:
    plan = """
variables: {name: app}
steps:
  - id: build
    tool: shell
    args: {cmd: "mkdir -p out && echo built > out/${name}.txt"}
    outputs: ["out/${name}.txt"]
"""
    (tmp_path / "plan.yaml").write_text(plan.lstrip())
    go(tmp_path, "--var", "name=tool")
    (tmp_path / "out/tool.txt").unlink()
    r = go(tmp_path, "--var", "name=tool")
    assert statuses(r) == {"build": "cached"}
    assert (tmp_path / "out/tool.txt").read_text() == "built\n"


@pytest.mark.parametrize("field", ["outputs", "sources"])
def test_an_undefined_name_in_outputs_or_sources_is_a_validation_error(
    tmp_path: Path, field: str
) -> None:
    plan = f"""
steps:
  - id: build
    tool: shell
    args: {{cmd: "echo hi"}}
    {field}: ["out/${{nope}}.txt"]
"""
    (tmp_path / "plan.yaml").write_text(plan.lstrip())
    r = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert r.code == 3, r
    assert "plan.yaml:5:" in r.out + r.err
    assert f"{field}[0]: undefined name 'nope'" in r.out + r.err


# ---- a restore killed midway ----------------------------------------------------------------

BIG = """
steps:
  - id: big
    tool: shell
    args: {cmd: "mkdir -p out && head -c 400000000 /dev/urandom > out/big.bin"}
    outputs: ["out/big.bin"]
"""


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp") if ".planrun/cache" not in str(p)]


@pytest.mark.slow
@pytest.mark.e2e
def test_a_restore_killed_midway_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(BIG.lstrip())
    go(tmp_path)
    digest = hashlib.sha256((tmp_path / "out/big.bin").read_bytes()).hexdigest()
    (tmp_path / "out/big.bin").unlink()

    proc = spawn_planrun(
        "run", "plan.yaml", cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: _temp_files(tmp_path), 60, 0.005, "a restore's temporary file")
    finally:
        kill_9(proc)
    assert proc.returncode == -signal.SIGKILL
    assert not [p for p in (tmp_path / "out").iterdir()]  # nothing in the output folder

    r = go(tmp_path)
    assert statuses(r) == {"big": "cached"}
    assert not _temp_files(tmp_path)  # what the killed run left is gone too
    with open(tmp_path / "out/big.bin", "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == digest
    assert os.listdir(tmp_path / "out") == ["big.bin"]


@pytest.mark.parametrize("where", ["..", "/tmp"])
def test_an_output_template_rendering_outside_the_working_directory_fails_the_step(
    tmp_path: Path, where: str
) -> None:
    plan = """
variables: {dir: out}
steps:
  - id: build
    tool: shell
    args: {cmd: "echo hi"}
    outputs: ["${dir}/app.txt"]
"""
    (tmp_path / "plan.yaml").write_text(plan.lstrip())
    r = planrun("run", "plan.yaml", "--var", f"dir={where}", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.code == 1, r
    assert "outputs[0] renders as" in r.out + r.err


def test_a_dry_run_renders_each_instance_s_patterns(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for p in ("p1", "p2", "p3"):
        (tmp_path / "src" / f"{p}.in").write_text(f"{p}\n")
    (tmp_path / "plan.yaml").write_text(TEMPLATED.lstrip())
    go(tmp_path)
    (tmp_path / "src/p2.in").write_text("p2 new\n")
    r = planrun("run", "plan.yaml", "--dry-run", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    cache = {s["id"]: s["cache"]["status"] for s in r.json["steps"]}
    assert cache == {"gen[0]": "hit", "gen[1]": "miss", "gen[2]": "hit"}


def _forge(entry: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite a cache entry as an attacker would: changed, with a matching checksum."""
    head, _, body = entry.read_bytes().partition(b"\n")
    doc = json.loads(body)
    change(doc)
    body = json.dumps(doc).encode()
    magic, fmt, _ = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {hashlib.sha256(body).hexdigest()}\n".encode() + body)


# ---- the cache store ----------------------------------------------------------------------


def test_a_forged_blob_name_never_touches_a_file_outside_the_cache(run, write, tmp_path):
    entry = cached_run(run, write, tmp_path)
    victim = tmp_path.parent / f"{tmp_path.name}-victim.txt"
    victim.write_text("keep me")
    try:
        for name in (str(victim), f"../../../{victim.name}"):
            _forge(entry, lambda d, n=name: d["outputs"][0].update(hash=n))
            r = run("run", "p.yaml")
            assert r.code == 0, r  # a miss: the step runs
            assert_no_traceback(r)
            assert victim.read_text() == "keep me"
    finally:
        victim.unlink(missing_ok=True)


def test_restore_never_writes_through_a_symlinked_directory(run, write, tmp_path):
    step = '"[ -L out ] || { mkdir -p out && printf hi > out/f.txt; }"'  # never via a link
    write("p.yaml", CACHED_OUTPUT_PLAN.replace('"mkdir -p out && printf hi > out/f.txt"', step))
    assert run("run", "p.yaml", "-q").code == 0
    (tmp_path / "out/f.txt").unlink()
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "out").rmdir()
    (tmp_path / "out").symlink_to(outside)
    r = run("run", "p.yaml")
    assert_no_traceback(r)
    assert list(outside.iterdir()) == [], r
    assert "cannot restore out/f.txt" in r.err, r


def test_a_forged_mode_is_a_miss_and_set_id_bits_are_never_restored(run, write, tmp_path):
    entry = cached_run(run, write, tmp_path)
    _forge(entry, lambda d: d["outputs"][0].update(mode=2**70))
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert_no_traceback(r)
    (tmp_path / "out/f.txt").unlink()
    entry = only_cache_entry(tmp_path)
    _forge(entry, lambda d: d["outputs"][0].update(mode=0o6755))
    r = run("run", "p.yaml", "--output", "json")
    assert r.json["steps"][0]["status"] == "cached", r
    assert stat.S_IMODE((tmp_path / "out/f.txt").stat().st_mode) == 0o755


def test_a_deeply_nested_cache_entry_is_a_miss(run, write, tmp_path):
    entry = cached_run(run, write, tmp_path)
    body = ('{"format": 2, "result": ' + DEEP_JSON + "}").encode()
    entry.write_bytes(f"planrun-cache-entry 2 {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert_no_traceback(r)
    assert "treated as a miss" in r.err, r
    r = run("cache", "prune", "--older-than", "1s")
    assert r.code == 0, r
    assert_no_traceback(r)


def test_a_deeply_nested_recent_file_is_ignored(run, write, tmp_path):
    cached_run(run, write, tmp_path)
    (tmp_path / ".planrun/cache-recent.json").write_text(DEEP_JSON)
    r = run("run", "p.yaml", "--force")
    assert r.code == 0, r
    assert_no_traceback(r)


def test_a_huge_cache_entry_or_blob_is_not_read(run, write, tmp_path):
    """Sparse files, so nothing is written: reading either whole would take 300 MB."""
    entry = cached_run(run, write, tmp_path)
    os.truncate(entry, 300 << 20)
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert "too large" in r.err, r
    (tmp_path / "out/f.txt").unlink()
    blob = tmp_path / ".planrun/cache/blobs" / hashlib.sha256(b"hi").hexdigest()
    os.truncate(blob, 300 << 20)
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert "too large" in r.err, r


PLAIN = [["out"], ["out/app.txt"], ["./out/"], ["."], ["out", "gen/g.txt"], ["out/app.txt", "."]]
PATHS = [
    "out/app.txt", "out/sub/deep.txt", "out", "outer/x", "out2/app.txt", "gen/g.txt", "gen/h.txt",
    "Makefile", ".git/hooks/pre-commit", ".planrun/cache/x", "out/../Makefile", "out/./app.txt",
    "out//app.txt", "/etc/passwd",
]  # fmt: skip


@pytest.mark.parametrize("patterns", PLAIN, ids=["+".join(p) for p in PLAIN])
def test_plain_outputs_take_the_paths_their_matcher_takes(patterns: list[str]) -> None:
    """Plain `outputs` paths are checked against a manifest without compiling a matcher: each
    path gets the verdict the compiled patterns give it (an exclude that matches nothing makes
    them compiled)."""
    from planrun.cache.outputs import foreign_output
    from planrun.cache.store import OutputFile

    for path in PATHS:
        manifest = [OutputFile(path, "0" * 64, 0o644, 1)]
        compiled = foreign_output(manifest, [*patterns, "!no-such-*"], [".planrun/cache"])
        assert foreign_output(manifest, patterns, [".planrun/cache"]) == compiled, path


@pytest.mark.slow
def test_many_small_outputs_are_restored_without_holding_them_all(tmp_path: Path) -> None:
    """An entry may list any number of outputs each small enough to be held in memory (8 MiB):
    a restore holds at most outputs.HELD_BYTES of them at once (and so does storing them), so a run capped far below
    their sum (100 x 8 MiB) stores and restores them all, byte-identical."""
    from tests.testkit import bounded_planrun

    count, size = 100, 8 << 20
    # Each file: its own 8-byte number, then 8 MiB less 8 of random bytes they share. Distinct
    # contents (so distinct entries), made at disk speed (800 MiB from /dev/urandom cost ~3 s of
    # CPU) and checked by comparison (hashing them twice cost as much again).
    seed = os.urandom(size - 8)
    (tmp_path / "seed").write_bytes(seed)
    cmd = f'mkdir -p out && for n in $(seq {count}); do {{ printf "%07d\\n" $n; cat seed; }} > out/$n; done'
    (tmp_path / "plan.yaml").write_text(
        f"steps:\n  - id: many\n    tool: shell\n    args: {{cmd: '{cmd}'}}\n"
        '    outputs: ["out/*"]\n'
    )

    def expected(name: str) -> bytes:
        return b"%07d\n" % int(name) + seed

    stored = bounded_planrun(tmp_path, "run", "plan.yaml")
    assert stored.code == 0, stored
    made = sorted((tmp_path / "out").iterdir())
    assert len(made) == count and all(p.read_bytes() == expected(p.name) for p in made)
    for p in made:
        p.unlink()
    r = bounded_planrun(tmp_path, "run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    assert_no_traceback(r)
    assert json.loads(r.out)["steps"][0]["status"] == "cached", r
    restored = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in restored] == [p.name for p in made]
    assert all(p.read_bytes() == expected(p.name) for p in restored)
