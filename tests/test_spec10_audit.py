"""An outside reading of the incremental-runs contract, rule by rule, through the command line.

Rules already pinned exactly by tests/test_cache_run.py (hits, replay, restore, each reason,
second checkout, corrupt store, concurrent runs...) are not repeated here: this file holds the
rules those tests cover loosely or not at all, the exact strings and shapes, and hostile input
on the same surface (odd sizes, durations, patterns and file names).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from tests.conftest import assert_no_traceback, planrun
from tests.test_cache_run import project, started_reasons, statuses


def plan(root: Path, text: str, name: str = "plan.yaml") -> Path:
    """Write a plan (its text dedented by the four spaces the tests indent it with)."""
    (root / name).write_text(text.replace("\n    ", "\n").lstrip())
    return root


def go(cwd: Path, *args: str, plan_file: str = "plan.yaml", **kw: Any) -> Any:
    r = planrun("run", plan_file, *args, cwd=cwd, **kw)
    assert_no_traceback(r)
    return r


def one_line_error(r: Any) -> str:
    """The single stderr line of a refused command (no traceback, nothing else)."""
    assert_no_traceback(r)
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1, r
    return lines[0]


def entry_files(root: Path) -> list[Path]:
    return sorted((root / ".planrun/cache/entries").glob("*.json"))


# ---- the key -------------------------------------------------------------------------------

GLOBS = """
    steps:
      - id: wheel
        tool: shell
        args: {cmd: "echo wheel"}
        sources: ["src/**/*.py", "pyproject.toml", "!src/**/test_*.py", "missing/**"]
"""


def test_globs_cross_directories_exclude_and_a_pattern_matching_nothing_is_fine(
    tmp_path: Path,
) -> None:
    plan(tmp_path, GLOBS)
    (tmp_path / "src/pkg/deep").mkdir(parents=True)
    (tmp_path / "src/pkg/deep/mod.py").write_text("a\n")
    (tmp_path / "src/pkg/test_mod.py").write_text("t\n")
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    assert go(tmp_path).code == 0  # `missing/**` matches nothing: an empty set, no error
    (tmp_path / "src/pkg/test_mod.py").write_text("changed test\n")  # excluded
    (tmp_path / "src/pkg/notes.txt").write_text("not a .py\n")
    assert statuses(go(tmp_path, "--output", "json")) == {"wheel": "cached"}
    (tmp_path / "src/pkg/deep/mod.py").write_text("b\n")  # `**` reaches it
    r = go(tmp_path, "--events", "e.jsonl")
    assert started_reasons(tmp_path / "e.jsonl") == {
        "wheel": "sources changed: src/pkg/deep/mod.py"
    }
    (tmp_path / "pyproject.toml").unlink()  # a removed source is a change too
    go(tmp_path, "--events", "f.jsonl")
    assert started_reasons(tmp_path / "f.jsonl") == {"wheel": "sources changed: pyproject.toml"}
    assert r.code == 0


def test_a_directory_source_matches_every_file_below_it(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo s"}, sources: ["src"]}
    """,
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.txt").write_text("a")
    go(tmp_path)
    (tmp_path / "src/x/y").mkdir(parents=True)
    (tmp_path / "src/x/y/new.bin").write_bytes(b"\0\1")
    go(tmp_path, "--events", "e.jsonl")
    assert started_reasons(tmp_path / "e.jsonl") == {"s": "sources changed: src/x/y/new.bin"}


def test_an_upstream_result_reached_by_a_data_flow_edge_is_in_the_key(tmp_path: Path) -> None:
    """No `depends_on`: the step reads `${up.exit_code}` (unchanged) of a step whose result
    (its stdout) changes; the key holds that step's result, so the step runs again."""
    plan(
        tmp_path,
        """
    steps:
      - {id: up, tool: shell, args: {cmd: "cat word.txt"}, result_variable: up}
      - {id: down, tool: shell, args: {cmd: "echo ${up.exit_code}"}, cache: true}
    """,
    )
    (tmp_path / "word.txt").write_text("one")
    go(tmp_path)
    assert statuses(go(tmp_path, "--output", "json"))["down"] == "cached"
    (tmp_path / "word.txt").write_text("two")
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r)["down"] == "succeeded"
    assert started_reasons(tmp_path / "e.jsonl")["down"] == "upstream changed: up"


def test_the_first_reason_is_args_then_upstream_then_sources(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    variables: {flag: a}
    steps:
      - {id: up, tool: shell, args: {cmd: "cat up.txt"}}
      - id: s
        tool: shell
        args: {cmd: "echo ${flag}"}
        sources: ["src"]
        depends_on: [up]
    """,
    )
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.py").write_text("1")
    (tmp_path / "up.txt").write_text("1")
    go(tmp_path)
    # all three changed: args wins
    (tmp_path / "src/a.py").write_text("2")
    (tmp_path / "up.txt").write_text("2")
    go(tmp_path, "--var", "flag=b", "--events", "a.jsonl")
    assert started_reasons(tmp_path / "a.jsonl")["s"] == "args changed"
    # upstream and sources changed: upstream wins
    (tmp_path / "src/a.py").write_text("3")
    (tmp_path / "up.txt").write_text("3")
    go(tmp_path, "--var", "flag=b", "--events", "b.jsonl")
    assert started_reasons(tmp_path / "b.jsonl")["s"] == "upstream changed: up"
    # forced wins over a change; cache off wins over forced (nothing is looked up)
    (tmp_path / "src/a.py").write_text("4")
    go(tmp_path, "--var", "flag=b", "--force", "s", "--events", "c.jsonl")
    assert started_reasons(tmp_path / "c.jsonl")["s"] == "forced"
    go(tmp_path, "--var", "flag=b", "--force", "--no-cache", "--events", "d.jsonl")
    assert started_reasons(tmp_path / "d.jsonl")["s"] == "cache off"


def test_going_back_compares_with_the_most_recent_entry(tmp_path: Path) -> None:
    """The reason compares with the step's most recent entry, not the first one stored."""
    project(tmp_path)
    go(tmp_path)
    (tmp_path / "src/m1.py").write_text("print('b')\n")
    go(tmp_path)
    (tmp_path / "src/m2.py").write_text("print('c')\n")  # m1 as the most recent entry saw it
    go(tmp_path, "--events", "e.jsonl")
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m2.py"


# ---- hits and misses -----------------------------------------------------------------------


def test_failed_and_ignored_failures_are_never_stored(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: bad, tool: shell, args: {cmd: "exit 3"}, cache: true, on_failure: ignore}
      - {id: worse, tool: shell, args: {cmd: "exit 4"}, cache: true, on_failure: continue}
    """,
    )
    assert go(tmp_path).code == 1
    assert not entry_files(tmp_path)
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r) == {"bad": "ignored", "worse": "failed"}
    assert started_reasons(tmp_path / "e.jsonl") == {
        "bad": "no cache entry",
        "worse": "no cache entry",
    }


def test_a_hit_replays_stderr_too_and_counts_as_a_passed_junit_case(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: warn, tool: shell, args: {cmd: "echo to-out; echo to-err >&2"}, cache: true}
    """,
    )
    go(tmp_path)
    r = go(tmp_path, "--junit", "j.xml", "--output", "json")
    assert statuses(r) == {"warn": "cached"}
    assert "(replayed from the cache)" in r.err and "to-err" in r.err and "to-out" in r.err
    suite = ElementTree.parse(tmp_path / "j.xml").getroot()
    (case,) = suite.iter("testcase")
    assert case.get("name") == "warn"
    assert [child.tag for child in case if child.tag in ("failure", "error", "skipped")] == []
    assert suite.get("tests") == "1" and suite.get("failures") == "0"


def test_outputs_in_nested_directories_come_back_with_their_directories(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "mkdir -p out/a/b && printf x > out/a/b/one.txt && printf y > out/two.txt"}
        outputs: ["out/**/*.txt"]
    """,
    )
    go(tmp_path)
    shutil.rmtree(tmp_path / "out")
    r = go(tmp_path, "--output", "json")
    assert statuses(r) == {"gen": "cached"}
    assert (tmp_path / "out/a/b/one.txt").read_text() == "x"
    assert (tmp_path / "out/two.txt").read_text() == "y"


def test_the_unproduced_pattern_is_named_when_another_matched(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - id: two
        tool: shell
        args: {cmd: "mkdir -p dist && touch dist/a.tar.gz"}
        outputs: ["dist/*.tar.gz", "dist/*.whl"]
    """,
    )
    r = go(tmp_path, "--output", "json")
    assert r.code == 1
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/*.whl"


def test_cache_true_alone_keys_on_tool_args_and_upstream_and_false_turns_it_off(
    tmp_path: Path,
) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: pure, tool: shell, args: {cmd: "echo pure"}, cache: true}
      - {id: off, tool: shell, args: {cmd: "echo off"}, sources: ["src"], cache: false}
      - {id: plain, tool: shell, args: {cmd: "echo plain"}}
    """,
    )
    (tmp_path / "src").mkdir()
    go(tmp_path)
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r) == {"pure": "cached", "off": "succeeded", "plain": "succeeded"}
    assert started_reasons(tmp_path / "e.jsonl") == {"off": "cache off", "plain": "cache off"}


def test_status_and_resume_agree_on_cached_steps(tmp_path: Path) -> None:
    """A run that failed after hits: resume keeps the cached steps as done, and `status`,
    `--output json` and JUnit say `cached` for them, never `pending`."""
    plan(
        tmp_path,
        """
    steps:
      - {id: a, tool: shell, args: {cmd: "echo a"}, cache: true}
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [a]}
    """,
    )
    assert go(tmp_path).code == 1
    assert go(tmp_path).code == 1  # a is cached this time
    status = planrun("status", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert {s["id"]: s["status"] for s in status.json["steps"]} == {"a": "cached", "gate": "failed"}
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--output", "json", "--events", "e.jsonl", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"a": "cached", "gate": "succeeded"}
    assert "a" not in started_reasons(tmp_path / "e.jsonl")  # not run again
    status = planrun("status", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert {s["id"]: s["status"] for s in status.json["steps"]} == {
        "a": "cached",
        "gate": "succeeded",
    }


# ---- dry-run -------------------------------------------------------------------------------


def test_a_dry_run_restores_nothing_and_records_nothing(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    shutil.rmtree(tmp_path / "out")
    state = tmp_path / ".planrun/state/plan.json"
    state_before = state.read_bytes()
    recent = tmp_path / ".planrun/cache-recent.json"
    recent_before = recent.read_bytes()
    hour_ago = time.time() - 3600
    for e in entry_files(tmp_path):
        os.utime(e, (hour_ago, hour_ago))
    r = go(tmp_path, "--dry-run", "--output", "json")
    assert r.code == 0, r
    assert {s["id"]: s["cache"]["status"] for s in r.json["steps"]}["build"] == "hit"
    assert not (tmp_path / "out").exists()  # a hit in a dry-run restores nothing
    assert state.read_bytes() == state_before and recent.read_bytes() == recent_before
    assert all(abs(e.stat().st_mtime - hour_ago) < 1 for e in entry_files(tmp_path))


def test_dry_run_json_gives_every_step_a_cache_status_and_reason(tmp_path: Path) -> None:
    project(tmp_path)
    r = go(tmp_path, "--dry-run", "--output", "json")
    caches = {s["id"]: s["cache"] for s in r.json["steps"]}
    assert caches == {
        "build": {"status": "miss", "reason": "no cache entry"},
        "pack": {"status": "miss", "reason": "no cache entry"},  # never stored: says so
        "show": {"status": "off", "reason": "cache off"},
    }
    r = go(tmp_path, "--dry-run", "--output", "json", "--no-cache")
    assert {s["cache"]["status"] for s in r.json["steps"]} == {"off"}
    r = go(tmp_path, "--dry-run", "--output", "json", "--force=build")
    assert {s["id"]: s["cache"] for s in r.json["steps"]}["build"] == {
        "status": "miss",
        "reason": "forced",
    }


# ---- flags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("plan.yaml", "--force", "--output", "json"),  # followed by another option
        ("plan.yaml", "--output", "json", "--force"),  # last
    ],
)
def test_a_bare_force_runs_every_step(tmp_path: Path, args: tuple[str, ...]) -> None:
    project(tmp_path)
    go(tmp_path)
    r = planrun("run", *args, cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded", "show": "succeeded"}


def test_force_equals_takes_the_id_and_a_following_target_stays_a_target(tmp_path: Path) -> None:
    project(tmp_path)
    go(tmp_path)
    r = planrun("run", "plan.yaml", "--force=build", "pack", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "pack": "cached"}  # `pack` is the target
    r = planrun("run", "plan.yaml", "--force", "build", "pack", "--output", "json", cwd=tmp_path)
    assert statuses(r) == {"build": "succeeded", "pack": "succeeded"}  # two forced targets


def test_no_cache_writes_no_stat_records_and_no_recent_entries(tmp_path: Path) -> None:
    project(tmp_path)
    old = time.time() - 3600
    for f in (tmp_path / "src").iterdir():
        os.utime(f, (old, old))  # old enough to be recorded by a run that records
    go(tmp_path, "--no-cache")
    names = {p.name for p in (tmp_path / ".planrun").iterdir()}
    assert not names & {"cache", "stat-records", "listings", "cache-recent.json"}, names


def test_stat_records_stay_in_the_working_directory_with_a_cache_dir(tmp_path: Path) -> None:
    work = project(tmp_path / "work")
    old = time.time() - 3600
    for f in (work / "src").iterdir():
        os.utime(f, (old, old))
    shared = tmp_path / "shared"
    assert go(work, "--cache-dir", str(shared)).code == 0
    assert (work / ".planrun/stat-records").is_file()
    assert not (work / ".planrun/cache").exists()
    assert sorted(p.name for p in shared.iterdir()) == ["CACHEDIR.TAG", "blobs", "entries"]


def test_a_relative_cache_dir_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    work = project(tmp_path / "work")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = planrun("-C", str(work), "run", "plan.yaml", "--cache-dir", "ci-cache", cwd=elsewhere)
    assert r.code == 0, r
    assert len(list((work / "ci-cache/entries").iterdir())) == 2
    assert not (elsewhere / "ci-cache").exists()
    info = planrun(
        "-C",
        str(work),
        "cache",
        "info",
        "--output",
        "json",
        "--cache-dir",
        "ci-cache",
        cwd=elsewhere,
    )
    assert info.json == {
        "dir": info.json["dir"],
        "entries": 2,
        "bytes": info.json["bytes"],
    }
    assert Path(info.json["dir"]).resolve() == (work / "ci-cache").resolve()


# ---- planrun cache ---------------------------------------------------------------------------


def test_cache_info_shapes(tmp_path: Path) -> None:
    r = planrun("cache", "info", "--output", "json", cwd=tmp_path)  # no cache yet
    assert r.code == 0 and r.json == {
        "dir": str(tmp_path / ".planrun/cache"),
        "entries": 0,
        "bytes": 0,
    }
    project(tmp_path)
    go(tmp_path)
    doc = planrun("cache", "info", "--output", "json", cwd=tmp_path).json
    assert set(doc) == {"dir", "entries", "bytes"}
    assert doc["entries"] == 2 and isinstance(doc["bytes"], int)
    on_disk = sum(p.lstat().st_blocks * 512 for p in Path(doc["dir"]).rglob("*"))
    assert doc["bytes"] >= on_disk  # the directory's size on disk, as du counts it
    text = planrun("cache", "info", cwd=tmp_path).out
    assert doc["dir"] in text and "2 entries" in text and f"{doc['bytes']} bytes" in text


def lru_project(root: Path) -> Path:
    return plan(
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
        assert go(tmp_path, "--var", f"n={n}").code == 0
    assert statuses(go(tmp_path, "--var", "n=1", "--output", "json")) == {"s": "cached"}
    entries = entry_files(tmp_path)
    assert len(entries) == 3
    size = planrun("cache", "info", "--output", "json", cwd=tmp_path).json["bytes"]
    smallest = min(e.lstat().st_blocks * 512 for e in entries)
    r = planrun("cache", "prune", "--max-size", str(size - smallest), cwd=tmp_path)
    assert r.code == 0, r
    assert "removed 1 entry" in r.err
    left = planrun("cache", "info", "--output", "json", cwd=tmp_path).json
    assert left["entries"] == 2 and left["bytes"] <= size - smallest
    after = {n: statuses(go(tmp_path, "--var", f"n={n}", "--output", "json"))["s"] for n in (1, 3)}
    assert after == {1: "cached", 3: "cached"}
    assert statuses(go(tmp_path, "--var", "n=2", "--output", "json")) == {"s": "succeeded"}


def test_prune_older_than_drops_only_entries_unused_that_long(tmp_path: Path) -> None:
    lru_project(tmp_path)
    for n in (1, 2):
        go(tmp_path, "--var", f"n={n}")
    stale = time.time() - 7200
    by_n = {}
    for e in entry_files(tmp_path):
        by_n["1" if '"stdout": "1\\n"' in e.read_text() else "2"] = e
    os.utime(by_n["1"], (stale, stale))
    r = planrun("cache", "prune", "--older-than", "1h", cwd=tmp_path)
    assert r.code == 0 and "removed 1 entry" in r.err, r
    assert entry_files(tmp_path) == [by_n["2"]]


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
    go(tmp_path)
    used = planrun("cache", "info", "--output", "json", cwd=tmp_path).json["bytes"]
    power = {"K": 1, "M": 2, "G": 3}[unit]
    size = (
        f"{used / 1024**power:.20f}".rstrip("0").rstrip(".") + unit
    )  # exact: `used` is whole blocks
    r = planrun("cache", "prune", "--max-size", size, cwd=tmp_path)
    assert r.code == 0 and "removed 0 entries" in r.err, (size, r)
    r = planrun("cache", "prune", "--max-size", str(used - 1), cwd=tmp_path)
    assert r.code == 0 and "removed 0 entries" not in r.err, r


# ---- hostile input -------------------------------------------------------------------------


def test_a_changed_file_name_with_control_characters_stays_on_one_line(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo hi"}, sources: ["src"]}
    """,
    )
    (tmp_path / "src").mkdir()
    go(tmp_path)
    (tmp_path / "src/a\nb\x1b[31m.py").write_text("x")
    r = go(tmp_path, "--events", "e.jsonl")
    (line,) = [ln for ln in r.err.splitlines() if "s started" in ln]
    assert line.endswith("sources changed: src/a\\nb\\x1b[31m.py"), r
    assert "\x1b" not in r.err
    assert started_reasons(tmp_path / "e.jsonl")["s"] == "sources changed: src/a\\nb\\x1b[31m.py"
    (tmp_path / "src/a\nb\x1b[31m.py").write_text("y")
    dry = go(tmp_path, "--dry-run")
    assert "cache: miss (sources changed: src/a\\nb\\x1b[31m.py)" in dry.out, dry


def test_an_undecodable_file_name_is_named_without_breaking_the_run(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo hi"}, sources: ["src"]}
    """,
    )
    (tmp_path / "src").mkdir()
    go(tmp_path)
    with open(os.path.join(os.fsencode(tmp_path), b"src/\xff.py"), "wb") as f:
        f.write(b"x")
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert r.code == 0, r
    reason = started_reasons(tmp_path / "e.jsonl")["s"]
    assert reason.startswith("sources changed: src/") and reason.isprintable()
    assert statuses(go(tmp_path, "--output", "json")) == {"s": "cached"}


@pytest.mark.parametrize("field", ["sources", "outputs"])
def test_a_nul_in_a_pattern_is_a_validation_error(tmp_path: Path, field: str) -> None:
    (tmp_path / "plan.yaml").write_text(
        f'steps:\n  - {{id: s, tool: shell, args: {{cmd: "echo hi"}}, {field}: ["src/\\u0000x"]}}\n'
    )
    for args in (
        ("validate", "plan.yaml"),
        ("run", "plan.yaml"),
        ("run", "plan.yaml", "--dry-run"),
    ):
        r = planrun(*args, cwd=tmp_path)
        assert_no_traceback(r)
        assert r.code == 3, r
        assert "plan.yaml:2:" in r.out and f"{field}[0]" in r.out and "internal error" not in r.err


def test_an_overlap_warning_names_an_odd_output_on_one_line(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "printf x > 'src/new\\nline.py'"}
        sources: ["src"]
        outputs: ["src/*.py"]
    """,
    )
    (tmp_path / "src").mkdir()
    r = go(tmp_path)
    assert r.code == 0, r
    (line,) = [ln for ln in r.err.splitlines() if "outputs are also its sources" in ln]
    assert "src/new\\nline.py" in line


# ---- foreach -------------------------------------------------------------------------------

FANNED = """
    variables: {pkgs: [a, b]}
    steps:
      - {id: lint, tool: shell, foreach: "${pkgs}", args: {cmd: "echo ${item}"}, cache: true}
      - {id: other, tool: shell, args: {cmd: "echo other"}, cache: true}
"""


def test_force_on_a_foreach_step_runs_each_of_its_instances(tmp_path: Path) -> None:
    plan(tmp_path, FANNED)
    go(tmp_path)
    r = go(tmp_path, "--force=lint", "--output", "json", "--events", "e.jsonl")
    assert r.code == 0, r
    assert statuses(r) == {
        "lint": "succeeded",
        "lint[0]": "succeeded",
        "lint[1]": "succeeded",
        "other": "cached",
    }
    reasons = started_reasons(tmp_path / "e.jsonl")
    assert reasons["lint[0]"] == reasons["lint[1]"] == "forced"
    r = go(tmp_path, "--force=lint[1]", "--output", "json")
    assert r.code == 0, r
    assert statuses(r)["lint[0]"] == "cached" and statuses(r)["lint[1]"] == "succeeded"
    r = go(tmp_path, "--force=other[0]")
    assert r.code == 2 and "other[0]" in one_line_error(r)


# ---- cache off: each step that runs says why -------------------------------------------------


def test_no_cache_says_cache_off_on_the_console_and_in_the_dry_run(tmp_path: Path) -> None:
    """With `--no-cache` every step runs because the cache is off, and says so (chosen: the
    console and the text dry-run show `cache off` only under --no-cache or --explain, so that
    plans that cache a few steps do not print it under every other one)."""
    project(tmp_path)
    go(tmp_path)
    r = go(tmp_path, "--no-cache")
    assert "build started [shell]: cache off" in r.err, r
    assert "show started [echo]: cache off" in r.err
    plain = go(tmp_path, "--force")
    assert "show started [echo]" in plain.err
    assert "show started [echo]: cache off" not in plain.err  # not asked for
    dry = go(tmp_path, "--dry-run", "--no-cache")
    assert dry.out.count("cache: miss (cache off)") == 3, dry
    dry = go(tmp_path, "--dry-run")
    assert "cache: hit" in dry.out and "cache off" not in dry.out
    dry = go(tmp_path, "--dry-run", "--explain")
    assert dry.out.count("cache: miss (cache off)") == 1  # `show`, which caches nothing


# ---- overlap, before anything runs ---------------------------------------------------------

OVERLAP = """
    steps:
      - id: gen
        tool: shell
        args: {cmd: "echo x > src/gen.py"}
        sources: ["src/**/*.py", "!src/skip/**"]
        outputs: ["dist/a.txt", "src/gen.py", "src/skip/x.py"]
      - id: fine
        tool: shell
        args: {cmd: "echo y"}
        sources: ["src"]
        outputs: ["dist/*.whl"]
"""


def test_outputs_overlapping_their_own_sources_warn_at_validation(tmp_path: Path) -> None:
    plan(tmp_path, OVERLAP)
    r = planrun("validate", "plan.yaml", "--format", "json", cwd=tmp_path)
    assert r.code == 0, r
    (d,) = r.json["diagnostics"]
    assert d["severity"] == "warning" and (d["line"], d["col"]) == (6, 29), d
    assert "step 'gen'" in d["message"] and "src/gen.py" in d["message"]
    assert "never hit" in d["message"]
    text = planrun("validate", "plan.yaml", cwd=tmp_path)
    assert text.code == 0 and "plan.yaml:6:29: warning: step 'gen'" in text.out, text


def test_a_hit_under_stream_replays_its_output_as_streamed_lines(tmp_path: Path) -> None:
    """`--stream` shows a running step's output as `[ID] line`; a hit's recorded output is
    shown the same way, marked as replayed."""
    plan(
        tmp_path,
        """
    steps:
      - {id: warn, tool: shell, args: {cmd: "echo to-out; echo to-err >&2"}, cache: true}
    """,
    )
    ran = go(tmp_path, "--stream")
    assert "[warn] to-out" in ran.err, ran
    hit = go(tmp_path, "--stream")
    assert "warn cached" in hit.err
    assert "[warn] (replayed from the cache)\n[warn] to-out\n[warn] to-err\n" in hit.err, hit


def test_sources_and_a_relative_cache_dir_variable_follow_minus_c(tmp_path: Path) -> None:
    """Globs, `.planrun/` and a relative PLANRUN_CACHE_DIR are relative to the working
    directory, which `-C DIR` sets."""
    work = project(tmp_path / "work")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PLANRUN_CACHE_DIR": "ci"}

    def run(*args: str) -> Any:
        r = planrun("-C", str(work), "run", "plan.yaml", *args, cwd=elsewhere, env=env)
        assert_no_traceback(r)
        return r

    assert run().code == 0
    assert (work / "ci/entries").is_dir() and not (elsewhere / "ci").exists()
    assert statuses(run("--output", "json"))["build"] == "cached"
    (work / "src/m2.py").write_text("print('two')\n")
    run("--events", str(tmp_path / "e.jsonl"))
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m2.py"
    info = planrun("-C", str(work), "cache", "info", "--output", "json", cwd=elsewhere, env=env)
    assert Path(info.json["dir"]).resolve() == (work / "ci").resolve()
    assert info.json["entries"] == 4  # build and pack, before and after the change


def test_a_dry_run_previews_each_foreach_instance(tmp_path: Path) -> None:
    plan(tmp_path, FANNED)
    go(tmp_path)
    r = go(tmp_path, "--dry-run", "--output", "json", "--var", "pkgs=[a, c]")
    caches = {s["id"]: s["cache"] for s in r.json["steps"]}
    assert caches["lint[0]"] == {"status": "hit", "reason": "cached"}
    assert caches["lint[1]"]["status"] == "miss"


def test_a_renamed_source_with_the_same_content_changes_the_key(tmp_path: Path) -> None:
    """The key covers each source's path as well as its content."""
    project(tmp_path)
    go(tmp_path)
    (tmp_path / "src/m0.py").rename(tmp_path / "src/z0.py")
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r)["build"] == "succeeded"
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m0.py (+1 more)"


def test_outputs_alone_make_a_step_cached(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    steps:
      - {id: gen, tool: shell, args: {cmd: "mkdir -p o && echo x > o/f"}, outputs: ["o/f"]}
    """,
    )
    go(tmp_path)
    (tmp_path / "o/f").unlink()
    r = go(tmp_path, "--output", "json")
    assert statuses(r) == {"gen": "cached"} and (tmp_path / "o/f").read_text() == "x\n"


# ---- bounded memory ------------------------------------------------------------------------


def _capped_run(cwd: Path, *args: str, cap: int) -> Any:
    import resource
    import subprocess
    import sys

    from tests.conftest import Result

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    proc = subprocess.run(
        [sys.executable, "-m", "planrun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
        preexec_fn=limit,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow  # writes a few hundred MB
@pytest.mark.e2e
def test_an_output_larger_than_memory_allows_is_stored_and_restored(tmp_path: Path) -> None:
    """Outputs are streamed into the cache and back: a 320 MB artifact under a 256 MiB address
    space cap is stored, then restored byte-identical (it was read whole: MemoryError)."""
    import hashlib

    size = 320_000_000
    plan(
        tmp_path,
        f"""
    steps:
      - id: big
        tool: shell
        args: {{cmd: "mkdir -p o && head -c {size} /dev/zero | tr '\\\\0' x > o/big && echo end >> o/big"}}
        outputs: ["o/big"]
    """,
    )
    cap = 256 << 20
    r = _capped_run(tmp_path, "run", "plan.yaml", "--output", "json", cap=cap)
    assert_no_traceback(r)
    assert r.code == 0 and statuses(r) == {"big": "succeeded"}, r
    assert "not stored" not in r.err, r

    def digest(path: Path) -> str:
        h = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    before = digest(tmp_path / "o/big")
    (tmp_path / "o/big").unlink()
    r = _capped_run(tmp_path, "run", "plan.yaml", "--output", "json", cap=cap)
    assert r.code == 0 and statuses(r) == {"big": "cached"}, r
    assert digest(tmp_path / "o/big") == before
    with (tmp_path / "o/big").open("r+b") as f:  # same size, other bytes: restored again
        f.write(b"y")
    r = _capped_run(tmp_path, "run", "plan.yaml", "--output", "json", cap=cap)
    assert r.code == 0 and statuses(r) == {"big": "cached"}, r
    assert digest(tmp_path / "o/big") == before


def test_large_outputs_holding_a_secret_are_not_stored_and_a_damaged_one_is_a_miss(
    tmp_path: Path,
) -> None:
    """Outputs over the in-memory size are scanned for secrets in chunks (a value straddling
    two chunks included) and checked against their hash before anything is restored."""
    script = (
        "import sys\n"
        "data = bytearray(b'x' * (9 << 20))\n"
        "if sys.argv[1] == 'leak':\n"
        "    data[(1 << 20) - 3:(1 << 20) + 7] = b'hunter2-42'\n"
        "open(sys.argv[2], 'wb').write(data)\n"
    )
    (tmp_path / "make.py").write_text(script)
    plan(
        tmp_path,
        """
    variables: {token: hunter2-42}
    secrets: [token]
    steps:
      - {id: leak, tool: shell, args: {cmd: "python3 make.py leak leak.bin"}, outputs: [leak.bin]}
      - {id: safe, tool: shell, args: {cmd: "python3 make.py safe safe.bin"}, outputs: [safe.bin]}
    """,
    )
    r = go(tmp_path)
    assert r.code == 0, r
    assert "step 'leak': result held a secret: not stored in the cache" in r.err
    for blob in (tmp_path / ".planrun/cache/blobs").iterdir():
        assert b"hunter2-42" not in blob.read_bytes()
    (blob,) = [b for b in (tmp_path / ".planrun/cache/blobs").iterdir() if b.stat().st_size > 1e6]
    damaged = bytearray(blob.read_bytes())
    damaged[5 << 20] = ord("y")
    blob.write_bytes(damaged)
    (tmp_path / "safe.bin").unlink()
    r = go(tmp_path, "--output", "json")
    assert statuses(r) == {"leak": "succeeded", "safe": "succeeded"}, r
    assert "corrupt" in r.err
    assert (tmp_path / "safe.bin").read_bytes() == b"x" * (9 << 20)


def test_hits_are_not_charged_to_tool_caps(tmp_path: Path) -> None:
    steps = """
    steps:
      - {id: a, tool: shell, args: {cmd: "echo a"}, cache: true}
      - {id: b, tool: shell, args: {cmd: "echo b"}, cache: true}
      - {id: c, tool: shell, args: {cmd: "echo c"}}
    """
    plan(tmp_path, "\n    limits: {tool_caps: {shell: 3}}" + steps)
    assert go(tmp_path).code == 0
    plan(tmp_path, "\n    limits: {tool_caps: {shell: 1}}" + steps)
    r = go(tmp_path, "--output", "json")
    assert r.code == 0, r
    assert statuses(r) == {"a": "cached", "b": "cached", "c": "succeeded"}


def test_env_read_with_get_is_in_the_key(tmp_path: Path) -> None:
    """`env.get('FLAG')` reads FLAG: its value is in the key even when the resolved args do
    not show it (here only whether it is set)."""
    plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo ${'on' if env.get('FLAG') else 'off'}"}, cache: true}
    """,
    )
    go(tmp_path, env={"FLAG": "1"})
    assert statuses(go(tmp_path, "--output", "json", env={"FLAG": "1"})) == {"s": "cached"}
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl", env={"FLAG": "2"})
    assert statuses(r) == {"s": "succeeded"}
    assert started_reasons(tmp_path / "e.jsonl") == {"s": "args changed"}


def test_the_dry_run_agrees_with_the_run_on_a_step_reading_a_hits_status(tmp_path: Path) -> None:
    """A hit counts as succeeded for expressions: `steps.build.status` is `succeeded` in the
    run, so the dry-run's preview (which resolves args the same way) says hit too."""
    plan(
        tmp_path,
        """
    steps:
      - {id: build, tool: shell, args: {cmd: "echo b"}, cache: true}
      - {id: c, tool: shell, args: {cmd: "echo ${steps.build.status}"}, depends_on: [build], cache: true}
    """,
    )
    go(tmp_path)
    r = go(tmp_path, "--output", "json")
    assert statuses(r) == {"build": "cached", "c": "cached"}
    assert r.json["steps"][1]["result"]["stdout"] == "succeeded\n"
    dry = go(tmp_path, "--dry-run", "--output", "json")
    assert {s["id"]: s["cache"]["status"] for s in dry.json["steps"]} == {
        "build": "hit",
        "c": "hit",
    }


# ---- resume and --force --------------------------------------------------------------------

GATED = """
    steps:
      - {id: build, tool: shell, args: {cmd: "echo built"}, cache: true}
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [build]}
      - {id: after, tool: shell, args: {cmd: "echo after"}, depends_on: [gate]}
"""


@pytest.mark.parametrize("force", [("--force",), ("--force=build",)])
def test_resume_with_force_runs_the_forced_steps_again(
    tmp_path: Path, force: tuple[str, ...]
) -> None:
    """`--force` runs every selected step and `--force=ID` that step, on resume too: a forced step is
    not kept from the previous run, and what depends on it runs again."""
    plan(tmp_path, GATED)
    assert go(tmp_path).code == 1
    (tmp_path / "ok").write_text("")
    r = planrun(
        "resume", "plan.yaml", *force, "--output", "json", "--events", "e.jsonl", cwd=tmp_path
    )
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "gate": "succeeded", "after": "succeeded"}
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "forced"
    assert "running 'build' again: forced" in r.err


def test_resume_without_force_still_keeps_what_succeeded(tmp_path: Path) -> None:
    plan(tmp_path, GATED)
    assert go(tmp_path).code == 1
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--force=after", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {"build": "succeeded", "gate": "succeeded", "after": "succeeded"}
    assert "build kept from the previous run" in r.err


def test_resume_with_force_on_a_foreach_step_runs_its_instances(tmp_path: Path) -> None:
    plan(
        tmp_path,
        """
    variables: {pkgs: [a, b]}
    steps:
      - {id: lint, tool: shell, foreach: "${pkgs}", args: {cmd: "echo ${item}"}, cache: true}
      - {id: gate, tool: shell, args: {cmd: "test -f ok"}, depends_on: [lint]}
    """,
    )
    assert go(tmp_path).code == 1
    (tmp_path / "ok").write_text("")
    r = planrun("resume", "plan.yaml", "--force=lint[1]", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert statuses(r) == {
        "lint": "succeeded",
        "lint[0]": "succeeded",  # kept from the previous run
        "lint[1]": "succeeded",
        "gate": "succeeded",
    }
    assert "running 'lint[1]' again: forced" in r.err and "lint[0] kept" in r.err
    assert "running 'lint[0]'" not in r.err


def test_completion_offers_step_ids_after_force(tmp_path: Path) -> None:
    from tests.test_completion import PLAN, complete

    (tmp_path / "planrun.yaml").write_text(PLAN)
    assert complete(tmp_path, "run --force b") == ["build", "bench"]
    assert complete(tmp_path, "run planrun.yaml --force t") == ["test"]


def test_an_unproduced_pattern_with_a_newline_is_named_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        'steps:\n  - {id: w, tool: shell, args: {cmd: "true"}, outputs: ["dist/a\\nb.whl"]}\n'
    )
    r = go(tmp_path, "--output", "json")
    assert r.code == 1
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/a\\nb.whl"
    assert "w failed: declared output not produced: dist/a\\nb.whl" in r.err


@pytest.mark.parametrize(
    "flags, cache", [(("--no-cache",), ""), ((), ", cache: false")], ids=["no-cache", "false"]
)
def test_a_declared_output_is_checked_with_the_cache_off_too(
    tmp_path: Path, flags: tuple[str, ...], cache: str
) -> None:
    """Whether a step produced what it declares does not depend on the cache: a CI job that
    runs `--no-cache` fails on a missing artifact like any other run."""
    (tmp_path / "plan.yaml").write_text(
        "steps:\n"
        f'  - {{id: w, tool: shell, args: {{cmd: "true"}}, outputs: ["dist/*.whl"]{cache}}}\n'
    )
    r = go(tmp_path, "--output", "json", *flags)
    assert r.code == 1, r
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/*.whl"
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist/a.whl").write_text("")
    assert go(tmp_path, *flags).code == 0


@pytest.mark.parametrize("recent", ["a\u0000b", "../../../../outside", "x" * 5000, "", 7])
def test_a_hostile_recent_entry_file_only_costs_the_reason(tmp_path: Path, recent: Any) -> None:
    """`.planrun/cache-recent.json` may come with a repository: a key in it that is not a
    SHA-256 names no entry (`no cache entry`), never a file elsewhere, never an error."""
    project(tmp_path)
    go(tmp_path)
    (tmp_path / ".planrun/cache-recent.json").write_text(
        json.dumps({"plan": {"build": recent, "pack": recent}})
    )
    (tmp_path / "src/m0.py").write_text("print('changed')\n")
    dry = go(tmp_path, "--dry-run")
    assert dry.code == 0 and "cache: miss (no cache entry)" in dry.out, dry
    r = go(tmp_path, "--events", "e.jsonl")
    assert r.code == 0, r
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "no cache entry"


def test_content_not_mtime_decides(tmp_path: Path) -> None:
    """A touched source (new mtime, same bytes) still hits; same size and mtime with other
    bytes is a change."""
    project(tmp_path)
    go(tmp_path)
    src = tmp_path / "src/m0.py"
    later = time.time() + 5
    os.utime(src, (later, later))
    assert statuses(go(tmp_path, "--output", "json"))["build"] == "cached"
    st = src.stat()
    src.write_text("print(9)\n")  # same length as "print(0)\n"
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = go(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert statuses(r)["build"] == "succeeded"
    assert started_reasons(tmp_path / "e.jsonl")["build"] == "sources changed: src/m0.py"


def test_a_dry_run_previews_a_foreach_over_a_hits_result(tmp_path: Path) -> None:
    """The list of a foreach over a cached step's result is known in a dry-run once that step
    hits: its `ID[*]` line says hit when every instance would, else the first miss's reason."""
    plan(
        tmp_path,
        """
    variables: {extra: ""}
    steps:
      - {id: list, tool: shell, args: {cmd: "echo a b ${extra}"}, result_variable: files, cache: true}
      - {id: lint, tool: shell, foreach: "${files.stdout.split()}", args: {cmd: "echo ${item}"}, cache: true}
    """,
    )
    go(tmp_path)
    dry = go(tmp_path, "--dry-run", "--output", "json")
    assert {s["id"]: s["cache"] for s in dry.json["steps"]}["lint[*]"] == {
        "status": "hit",
        "reason": "cached",
    }
    assert statuses(go(tmp_path, "--output", "json"))["lint[1]"] == "cached"
    dry = go(tmp_path, "--dry-run", "--output", "json", "--var", "extra=c")
    caches = {s["id"]: s["cache"] for s in dry.json["steps"]}
    assert caches["list"]["status"] == "miss"
    assert caches["lint[*]"] == {"status": "miss", "reason": "upstream changed: list"}


def test_streamed_lines_of_foreach_instances_carry_their_bare_id(tmp_path: Path) -> None:
    plan(tmp_path, FANNED)
    ran = go(tmp_path, "--stream")
    assert "[lint[0]] a\n" in ran.err and "[  lint" not in ran.err, ran
    hit = go(tmp_path, "--stream")
    assert "[lint[1]] (replayed from the cache)\n[lint[1]] b\n" in hit.err, hit


def test_a_pattern_whose_braces_expand_past_the_limit_is_a_validation_error(
    tmp_path: Path,
) -> None:
    pattern = "src/" + "{a,b}" * 30  # 2**30 alternatives
    (tmp_path / "plan.yaml").write_text(
        f'steps:\n  - {{id: s, tool: shell, args: {{cmd: "true"}}, sources: ["{pattern}"]}}\n'
    )
    for args in (("validate", "plan.yaml"), ("run", "plan.yaml")):
        r = planrun(*args, cwd=tmp_path)
        assert_no_traceback(r)
        assert r.code == 3, r
        assert "plan.yaml:2:" in r.out and "sources[0]" in r.out and "braces" in r.out, r
