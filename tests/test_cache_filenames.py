"""File names are bytes on Linux: a source or output named with a byte that is not UTF-8 (an
old Latin-1 name) or with a line feed is cached, keyed and restored like any other."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, planrun
from tests.test_cache_run import started_reasons, statuses
from tests.testkit import run_plan, write_indented_plan

PLAN = """\
name: names
steps:
  - id: copy
    tool: shell
    args: {cmd: "mkdir -p out && cp src/* out/"}
    sources: ["src"]
    outputs: ["out"]
"""
NAMES = (b"a\xffb.txt", b"new\nline.txt", "\u00e9t\u00e9.txt".encode())


def _settle(root: Path) -> None:
    """Wait until the files are older than planrun's 2 s racy window (a condition, not a
    fixed sleep), so the second run trusts their stat."""
    newest = max(os.stat(os.path.join(bytes(root), n)).st_mtime for n in os.listdir(bytes(root)))
    while time.time() < newest + 2.1:
        time.sleep(0.05)


@pytest.mark.slow  # two waits for the 2 s racy window
def test_names_that_are_not_utf8_are_cached_and_restored(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(PLAN)
    src = os.path.join(bytes(tmp_path), b"src")
    os.mkdir(src)
    for i, name in enumerate(NAMES):
        with open(os.path.join(src, name), "wb") as f:
            f.write(b"content %d\n" % i)
    _settle(Path(os.fsdecode(src)))

    first = planrun("run", "plan.yaml", "-q", cwd=tmp_path)
    assert first.code == 0, first
    assert "not stored" not in first.err, first
    out = os.path.join(bytes(tmp_path), b"out")
    _settle(Path(os.fsdecode(out)))

    second = planrun("run", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert second.code == 0, second
    assert second.json["steps"][0]["status"] == "cached", second

    for name in NAMES:
        os.unlink(os.path.join(out, name))
    third = planrun("run", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert_no_traceback(third)
    assert third.json["steps"][0]["status"] == "cached", third
    assert sorted(os.listdir(out)) == sorted(NAMES)
    for i, name in enumerate(NAMES):
        with open(os.path.join(out, name), "rb") as f:
            assert f.read() == b"content %d\n" % i


# ---- hostile input -------------------------------------------------------------------------


def test_a_changed_file_name_with_control_characters_stays_on_one_line(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo hi"}, sources: ["src"]}
    """,
    )
    (tmp_path / "src").mkdir()
    run_plan(tmp_path)
    (tmp_path / "src/a\nb\x1b[31m.py").write_text("x")
    r = run_plan(tmp_path, "--events", "e.jsonl")
    (line,) = [ln for ln in r.err.splitlines() if "s started" in ln]
    assert line.endswith("sources changed: src/a\\nb\\x1b[31m.py"), r
    assert "\x1b" not in r.err
    assert started_reasons(tmp_path / "e.jsonl")["s"] == "sources changed: src/a\\nb\\x1b[31m.py"
    (tmp_path / "src/a\nb\x1b[31m.py").write_text("y")
    dry = run_plan(tmp_path, "--dry-run")
    assert "cache: miss (sources changed: src/a\\nb\\x1b[31m.py)" in dry.out, dry


def test_an_undecodable_file_name_is_named_without_breaking_the_run(tmp_path: Path) -> None:
    write_indented_plan(
        tmp_path,
        """
    steps:
      - {id: s, tool: shell, args: {cmd: "echo hi"}, sources: ["src"]}
    """,
    )
    (tmp_path / "src").mkdir()
    run_plan(tmp_path)
    with open(os.path.join(os.fsencode(tmp_path), b"src/\xff.py"), "wb") as f:
        f.write(b"x")
    r = run_plan(tmp_path, "--output", "json", "--events", "e.jsonl")
    assert r.code == 0, r
    reason = started_reasons(tmp_path / "e.jsonl")["s"]
    assert reason.startswith("sources changed: src/") and reason.isprintable()
    assert statuses(run_plan(tmp_path, "--output", "json")) == {"s": "cached"}


def test_an_unproduced_pattern_with_a_newline_is_named_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(
        'steps:\n  - {id: w, tool: shell, args: {cmd: "true"}, outputs: ["dist/a\\nb.whl"]}\n'
    )
    r = run_plan(tmp_path, "--output", "json")
    assert r.code == 1
    assert r.json["steps"][0]["error"] == "declared output not produced: dist/a\\nb.whl"
    assert "w failed: declared output not produced: dist/a\\nb.whl" in r.err


def test_an_output_named_with_a_backslash_is_cached_and_restored(tmp_path: Path) -> None:
    # A backslash is an ordinary character of a name on Linux, not a separator: `a\b.txt` is
    # one file in the working directory, stored like any other, not a corrupt entry.
    (tmp_path / "plan.yaml").write_text(
        "steps:\n"
        "  - id: build\n"
        "    run: printf x > 'a\\b.txt' && mkdir -p 'd\\e' && printf y > 'd\\e/f.txt'\n"
        "    outputs: ['*.txt', 'd\\e']\n"
    )
    first = planrun("run", "plan.yaml", "-q", cwd=tmp_path)
    assert first.code == 0 and "not stored" not in first.err, first
    os.unlink(tmp_path / "a\\b.txt")
    os.unlink(tmp_path / "d\\e" / "f.txt")
    again = planrun("run", "plan.yaml", "--output", "json", cwd=tmp_path)
    assert_no_traceback(again)
    assert again.json["steps"][0]["status"] == "cached" and "corrupt" not in again.err, again
    assert (tmp_path / "a\\b.txt").read_text() == "x"
    assert (tmp_path / "d\\e" / "f.txt").read_text() == "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".planrun",
        "a\\b.txt",
        "d\\e",
        "plan.yaml",
    ]
