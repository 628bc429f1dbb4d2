"""A report file (`--events`, `--junit`, `--report`, `report -o`) never overwrites or appends to
a file the run reads (the plan, the vars file, the state, a dotenv file), nor another report
file: one line, exit 2, nothing run, the file unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, planrun, planrun_process

PLAN = """\
name: clobber
dotenv: [".env?"]
steps:
  - id: mark
    tool: shell
    args: {cmd: "echo ran > ran.txt"}
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "plan.yaml").write_text(PLAN)
    (tmp_path / "vars.yaml").write_text("x: 1\n")
    (tmp_path / ".env").write_text("A=1\n")
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        name: (root / name).read_bytes()
        for name in ("plan.yaml", "vars.yaml", ".env")
        if (root / name).exists()
    }


def _refused(root: Path, *args: str, names: tuple[str, ...]) -> str:
    before = _snapshot(root)
    r = planrun(*args, cwd=root)
    assert r.code == 2, r
    assert_no_traceback(r)
    lines = [ln for ln in r.err.splitlines() if ln.startswith("planrun:")]
    assert len(lines) == 1, r
    for name in names:
        assert name in lines[0], r
    assert "overwrite" in lines[0] or "same file" in lines[0], r
    assert _snapshot(root) == before
    assert not (root / "ran.txt").exists(), "a step ran"
    return lines[0]


@pytest.mark.parametrize("option", ["--junit", "--events", "--report"])
def test_a_report_file_naming_the_plan_file_is_refused(tree: Path, option: str) -> None:
    line = _refused(tree, "run", "plan.yaml", option, "plan.yaml", names=(option, "plan file"))
    assert "plan.yaml" in line


def test_the_plan_file_spelled_another_way_or_through_a_link_is_refused(tree: Path) -> None:
    (tree / "sub").mkdir()
    _refused(tree, "run", "plan.yaml", "--junit", "sub/../plan.yaml", names=("--junit",))
    _refused(tree, "run", "plan.yaml", "--junit", str(tree / "plan.yaml"), names=("--junit",))
    os.symlink("plan.yaml", tree / "link.yaml")
    _refused(tree, "run", "link.yaml", "--events", "plan.yaml", names=("--events",))


def test_a_report_file_naming_the_vars_file_is_refused(tree: Path) -> None:
    _refused(
        tree,
        "run",
        "plan.yaml",
        "--vars-file",
        "vars.yaml",
        "--junit",
        "vars.yaml",
        names=("--junit", "vars file"),
    )


def test_a_report_file_naming_the_state_file_is_refused(tree: Path) -> None:
    _refused(
        tree, "run", "plan.yaml", "--state", "s.json", "--events", "s.json", names=("--events",)
    )
    planrun("run", "plan.yaml", "-q", cwd=tree)  # the default state file now exists
    (tree / "ran.txt").unlink()
    state = ".planrun/state/clobber.json"
    before = (tree / state).read_bytes()
    _refused(tree, "run", "plan.yaml", "--junit", state, names=("--junit", "state file"))
    assert (tree / state).read_bytes() == before


def test_a_report_file_naming_a_dotenv_file_is_refused(tree: Path) -> None:
    _refused(tree, "run", "plan.yaml", "--events", ".env", names=("--events", "dotenv"))


@pytest.mark.parametrize(
    ("first", "second"),
    [("--junit", "--events"), ("--junit", "--report"), ("--events", "--report")],
)
def test_two_report_files_naming_one_file_are_refused(tree: Path, first: str, second: str) -> None:
    _refused(tree, "run", "plan.yaml", first, "out.txt", second, "out.txt", names=(first, second))
    assert not (tree / "out.txt").exists()


def test_report_command_output_naming_the_plan_or_its_state_is_refused(tree: Path) -> None:
    assert planrun("run", "plan.yaml", "-q", cwd=tree).code == 0
    (tree / "ran.txt").unlink()
    _refused(tree, "report", "plan.yaml", "-o", "plan.yaml", names=("-o", "plan file"))
    state = tree / ".planrun/state/clobber.json"
    before = state.read_bytes()
    _refused(
        tree, "report", "plan.yaml", "-o", ".planrun/state/clobber.json", names=("state file",)
    )
    assert state.read_bytes() == before


def test_distinct_report_files_still_work(tree: Path) -> None:
    r = planrun(
        "run",
        "plan.yaml",
        "-q",
        "--vars-file",
        "vars.yaml",
        "--junit",
        "j.xml",
        "--events",
        "e.jsonl",
        "--report",
        "r.html",
        cwd=tree,
    )
    assert r.code == 0, r
    assert (tree / "ran.txt").exists()
    assert (tree / "j.xml").read_text().startswith("<?xml")
    assert (tree / "e.jsonl").read_text().startswith("{")
    assert "<html" in (tree / "r.html").read_text()


def test_report_to_stdout_with_a_dash(tree: Path) -> None:
    assert planrun("run", "plan.yaml", "-q", cwd=tree).code == 0
    r = planrun("report", "plan.yaml", "-o", "-", cwd=tree)
    assert r.code == 0, r
    assert r.out.startswith("<!DOCTYPE html>") and "</html>" in r.out, r.out[:200]
    assert not (tree / "-").exists()


def test_a_step_error_quoting_a_value_with_a_line_feed_is_shown_whole_on_one_line(
    tmp_path: Path,
) -> None:
    # The error quotes the plan's path value: the console, its summary and `status` showed
    # only "no such file: no" (the first line), as if the file were called "no".
    (tmp_path / "p.yaml").write_text(
        'name: nl\nsteps:\n  - {id: a, tool: read_file, args: {path: "no\\nfile"}}\n'
    )
    r = planrun("run", "p.yaml", cwd=tmp_path)
    assert r.code == 1, r
    shown = [ln for ln in r.err.splitlines() if "no such file" in ln]
    assert shown and all(ln.endswith("no such file: no\\nfile") for ln in shown), r.err
    status = planrun("status", "p.yaml", cwd=tmp_path)
    assert "no such file: no\\nfile" in status.out, status


def test_a_secret_with_a_control_character_quoted_in_an_error_stays_masked(
    tmp_path: Path,
) -> None:
    # The error is made one line (the ESC escaped as \x1b): the secret in that form is masked.
    (tmp_path / "p.yaml").write_text(
        'name: sec\nsecrets: [tok]\nvariables: {tok: "s3cr\\u001bet"}\n'
        'steps:\n  - {id: a, tool: read_file, args: {path: "${tok}"}}\n'
    )
    r = planrun("run", "p.yaml", "--output", "json", cwd=tmp_path)
    assert r.code == 1, r
    assert "s3cr" not in r.out + r.err, r
    assert "no such file: ***" in r.json["steps"][0]["error"], r.json


def test_events_to_a_fifo_without_a_reader_is_one_line_not_a_hang(tree: Path) -> None:
    os.mkfifo(tree / "ev.fifo")
    r = planrun_process("run", "plan.yaml", "--events", "ev.fifo", cwd=tree, timeout=60)
    assert r.code == 2, r
    assert "ev.fifo" in r.err and "no reader" in r.err and "Traceback" not in r.err, r
    assert not (tree / "ran.txt").exists()


def test_events_to_a_fifo_with_a_reader_stream_to_it(tree: Path) -> None:
    os.mkfifo(tree / "ev.fifo")
    reader = os.open(tree / "ev.fifo", os.O_RDONLY | os.O_NONBLOCK)
    try:
        r = planrun_process("run", "plan.yaml", "--events", "ev.fifo", cwd=tree, timeout=60)
        assert r.code == 0, r
        got = os.read(reader, 1 << 16).decode()
    finally:
        os.close(reader)
    assert '"event": "run.started"' in got and '"event": "run.finished"' in got, got


def test_junit_never_replaces_a_fifo_or_a_symlink(tree: Path) -> None:
    """The report is a temporary file renamed over FILE: over a FIFO, a device (`/dev/null`
    for root) or a link it would put a plain file in their place. As for `--report`, such a
    FILE is refused before anything runs (exit 2, one line) and left as it was."""
    os.mkfifo(tree / "j.fifo")
    (tree / "real.xml").write_text("<kept/>")
    (tree / "link.xml").symlink_to("real.xml")
    for name in ("j.fifo", "link.xml"):
        r = planrun("run", "plan.yaml", "--junit", name, cwd=tree)
        assert r.code == 2, r
        assert_no_traceback(r)
        lines = [ln for ln in r.err.splitlines() if ln.startswith("planrun:")]
        assert len(lines) == 1 and name in lines[0] and "not replacing it" in lines[0], r
        assert not (tree / "ran.txt").exists(), "a step ran"
    assert (tree / "j.fifo").is_fifo()
    assert (tree / "link.xml").is_symlink() and (tree / "real.xml").read_text() == "<kept/>"


@pytest.mark.skipif(
    not (os.geteuid() == 0 and os.path.exists("/proc/version")), reason="root and /proc only"
)
def test_an_events_file_that_opens_but_cannot_be_appended_to_is_named(tree: Path) -> None:
    # Root may open /proc/version for writing; seeking to its end then fails (EINVAL), an
    # OSError that carries no file name: the line names the file all the same.
    r = planrun("run", "plan.yaml", "--events", "/proc/version", cwd=tree)
    assert r.code == 2, r
    assert_no_traceback(r)
    lines = [ln for ln in r.err.splitlines() if ln.startswith("planrun:")]
    assert len(lines) == 1 and "cannot write /proc/version: " in lines[0], r
    assert "None" not in lines[0] and not (tree / "ran.txt").exists(), r
