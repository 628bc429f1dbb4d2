"""Hostile inputs never hang, crash or print a traceback: FIFOs and devices as input files."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planrun.inputfiles import NotARegularFile, read_regular_file
from tests.conftest import assert_no_traceback
from tests.testkit import bounded_planrun, write_p_yaml

OK_PLAN = "steps:\n  - {id: a, tool: echo, args: {value: 1}}\n"


@pytest.mark.parametrize("command", ["run", "resume", "validate", "graph", "tools"])
def test_a_fifo_as_the_plan_is_refused_at_once(run, tmp_path: Path, command: str) -> None:
    os.mkfifo(tmp_path / "p.yaml")  # nobody ever writes to it: opening it blocking would hang
    result = run(command, "p.yaml")
    assert result.code == 3, result
    assert_no_traceback(result)
    lines = (result.out + result.err).strip().splitlines()
    # named as the user gave it, by every command alike
    assert lines == ["p.yaml:1:1: error: p.yaml is a FIFO, not a plan file"], result


def test_status_of_a_fifo_plan_does_not_hang(run, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.yaml")
    result = run("status", "p.yaml")
    assert result.code in (3, 4), result
    assert_no_traceback(result)


def test_a_fifo_as_vars_file_or_mcp_config_is_refused(run, write, tmp_path: Path) -> None:
    write("p.yaml", OK_PLAN)
    os.mkfifo(tmp_path / "v.yaml")
    os.mkfifo(tmp_path / "m.json")
    result = run("run", "p.yaml", "--vars-file", "v.yaml")
    assert (result.code, result.err) == (
        2,
        "planrun: error: vars file v.yaml is a FIFO, not a regular file\n",
    )
    result = run("validate", "p.yaml", "--vars-file", "v.yaml")
    assert result.code == 2 and "is a FIFO" in result.err, result
    result = run("run", "p.yaml", "--mcp-config", "m.json")
    assert result.code == 2 and result.err.endswith("cannot read MCP config: it is a FIFO\n"), (
        result
    )


def test_a_device_as_the_plan_is_refused(run) -> None:
    result = run("validate", "/dev/zero")  # would never end if read
    assert result.code == 3, result
    assert result.out.strip().endswith("/dev/zero is a character device, not a plan file"), result


def test_a_fifo_in_the_plans_directory_does_not_block_list(run, write, tmp_path: Path) -> None:
    write("plans/ok.yaml", OK_PLAN)
    os.mkfifo(tmp_path / "plans" / "f.yaml")
    result = run("list")
    assert result.code == 0, result
    assert "plans/ok.yaml" in result.out


def test_a_dangling_symlink_in_the_plans_directory_is_skipped_with_a_note(
    run, write, tmp_path: Path
) -> None:
    write("plans/ok.yaml", OK_PLAN)
    os.symlink(tmp_path / "gone.yaml", tmp_path / "plans" / "b.yaml")
    os.symlink("loop.yaml", tmp_path / "plans" / "loop.yaml")  # a link to itself
    result = run("list", "plans")
    assert result.code == 0, result
    assert "plans/ok.yaml" in result.out and "b.yaml" not in result.out
    notes = result.err.splitlines()
    assert notes == [
        "planrun: warning: skipped plans/b.yaml: a symbolic link to a missing file",
        "planrun: warning: skipped plans/loop.yaml: cannot read plan file: "
        + os.strerror(errno.ELOOP),
    ], result
    rows = run("list", "plans", "--output", "json")
    assert rows.code == 0, rows
    assert [r["path"] for r in rows.json] == ["plans/ok.yaml"]


def test_read_regular_file_checks_after_opening(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert read_regular_file(str(tmp_path / "f")) == b"x"
    os.mkfifo(tmp_path / "q")
    with pytest.raises(NotARegularFile) as exc:
        read_regular_file(str(tmp_path / "q"))
    assert exc.value.kind == "a FIFO"
    with pytest.raises(NotARegularFile) as exc:
        read_regular_file(str(tmp_path))
    assert exc.value.kind == "a directory"
    with pytest.raises(FileNotFoundError):
        read_regular_file(str(tmp_path / "missing"))


# --- corrupt state: one line naming the file, exit 4; `list` goes on ----------------------


def _corrupt_journal(tmp_path: Path, line: str) -> None:
    state = tmp_path / ".planrun/state/p.json"
    doc = json.loads(state.read_text())
    doc["journal"] = "t1"
    state.write_text(json.dumps(doc))
    (tmp_path / ".planrun/state/p.json.journal").write_text('{"journal": "t1"}\n' + line + "\n")


def _edit_state(tmp_path: Path, **changes: Any) -> None:
    state = tmp_path / ".planrun/state/p.json"
    doc = json.loads(state.read_text())
    doc.update(changes)
    state.write_text(json.dumps(doc))


CORRUPTIONS = [
    ("journal", '{"op": "run", "changes": 1}'),
    ("journal", '{"op": "run", "changes": {"duration_s": "soon"}}'),
    ("journal", '{"op": "revision", "revision": [1]}'),
    ("journal", '{"op": "step", "id": "a", "state": {"status": "succeeded", "error": 5}}'),
    ("journal", "[1, 2]"),
    ("state", {"revisions": [1]}),
    ("state", {"revisions": "x"}),
    ("state", {"revisions": [{"diff": {"removed": 3}}]}),
    ("state", {"steps": {"a": {"status": "succeeded", "title": ["x"]}}}),
    ("state", {"duration_s": "long"}),
    ("state", {"started_at": 5}),
    ("state", {"steps": []}),
    ("state", {"variables": []}),
    ("state", {"variables": None}),
    ("state", {"revisions": {}}),
    ("state", {"journal_held": "12"}),
    ("state", {"journal_held": -1}),
    ("state", {"journal_held": True}),
    ("held", '{"op": "run", "changes": {"status": "running"}}'),
]


@pytest.mark.parametrize(("where", "corruption"), CORRUPTIONS)
def test_corrupt_state_exits_4_with_one_line_naming_the_file(
    run, write, tmp_path: Path, where: str, corruption: Any
) -> None:
    write("p.yaml", OK_PLAN)
    assert run("run", "p.yaml", "-q").code == 0
    if where == "journal":
        _corrupt_journal(tmp_path, corruption)
        name = "p.json.journal"
    elif where == "held":  # the snapshot holds the journal up to the middle of a line
        _corrupt_journal(tmp_path, corruption)
        _edit_state(tmp_path, journal_held=len('{"journal": "t1"}\n') + 3)
        name = "p.json.journal"
    else:
        _edit_state(tmp_path, **corruption)
        name = "p.json"
    before = sorted((p.name, p.read_bytes()) for p in (tmp_path / ".planrun/state").iterdir())
    for command in (["status", "p.yaml"], ["graph", "p.yaml"], ["resume", "p.yaml"]):
        result = run(*command)
        assert result.code == 4, (command, result)
        assert_no_traceback(result)
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and name in lines[0] and "corrupt" in lines[0], (command, result)
        assert "internal error" not in result.err
    after = sorted((p.name, p.read_bytes()) for p in (tmp_path / ".planrun/state").iterdir())
    assert after == before  # left byte for byte as it was


def test_one_corrupt_state_does_not_break_list(run, write, tmp_path: Path) -> None:
    write("plans/p.yaml", OK_PLAN)
    write("plans/q.yaml", OK_PLAN)
    assert run("run", "plans/p.yaml", "-q").code == 0
    assert run("run", "plans/q.yaml", "-q").code == 0
    _corrupt_journal(tmp_path, '{"op": "run", "changes": 1}')
    result = run("list", "--output", "json")
    assert result.code == 0, result
    assert {row["name"]: row["last_status"] for row in result.json} == {
        "p": "unreadable",
        "q": "succeeded",
    }


# --- status has the run document's shape; a blocked run is recorded ------------------------


def test_status_json_has_the_shape_of_run_json(run, write) -> None:
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: b, tool: shell, args: {cmd: "exit 3"}, depends_on: [a]}
        """,
    )
    ran = run("run", "p.yaml", "--output", "json")
    assert ran.code == 1, ran
    status = run("status", "p.yaml", "--output", "json")
    assert status.code == 0, status
    assert list(status.json) == list(ran.json)
    assert status.json["error"] == ran.json["error"] and ran.json["error"]
    assert [list(s) for s in status.json["steps"]] == [list(s) for s in ran.json["steps"]]


def test_a_blocked_run_writes_state_events_and_junit(run, write, tmp_path: Path) -> None:
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}, approval: true}
          - {id: b, tool: echo, args: {value: 2}}
        """,
    )
    ran = run("run", "p.yaml", "--output", "json", "--events", "e.jsonl", "--junit", "j.xml")
    assert ran.code == 5, ran
    assert (ran.json["status"], ran.json["reason"]) == ("blocked", "approval_required")
    events = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["run.started", "run.finished"]
    assert (events[-1]["status"], events[-1]["reason"]) == ("blocked", "approval_required")
    status = run("status", "p.yaml", "--output", "json")
    assert status.code == 0, status
    assert status.json == ran.json
    from tests.test_consumers import check_junit

    suite = next(iter(check_junit(tmp_path / "j.xml")))
    assert {p.name: p.value for p in suite.properties()}["status"] == "blocked"
    assert suite.skipped == 2
    # and a later run is not refused because of it (the lock was released)
    assert run("run", "p.yaml", "--yes", "-q").code == 0


# --- --output json: one document on stdout whatever the exit code ------------------------


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run", "missing.yaml"], 2),
        (["run", "p.yaml", "--var", "novalue"], 2),
        (["status", "p.yaml", "--state", "none.json"], 4),
        (["resume", "p.yaml"], 4),
        (["run", "bad.yaml"], 3),
        (["run", "p.yaml"], 0),
    ],
)
def test_output_json_always_prints_one_document(run, write, args: list[str], code: int) -> None:
    write("p.yaml", OK_PLAN)
    write("bad.yaml", "steps:\n  - {id: a, tool: nope}\n")
    result = run(*args, "--output", "json")
    assert result.code == code, result
    doc = result.json  # exactly one JSON document
    if code in (2, 4):
        assert doc["exit_code"] == code and doc["error"] in result.err, result
    elif code == 3:
        assert doc["valid"] is False and doc["diagnostics"], result
    else:
        assert doc["status"] == "succeeded"


# --- a full disk: one line, a documented exit code, state finished, no temp files ---------


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 64 KiB tmpfs (needs root and mount); the test is skipped where there is none."""
    import subprocess

    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


TWO_STEPS = """
steps:
  - {id: a, tool: echo, args: {value: 1}}
  - {id: b, tool: shell, args: {cmd: "echo hi"}, depends_on: [a]}
"""


def test_events_on_a_full_disk(run, write) -> None:
    write("p.yaml", TWO_STEPS)
    result = run("run", "p.yaml", "--events", "/dev/full")
    assert result.code == 1, result
    assert_no_traceback(result)
    assert (
        result.err.splitlines()[-1]
        == "planrun: error: cannot write /dev/full: No space left on device"
    )
    assert "internal error" not in result.err
    status = run("status", "p.yaml", "--output", "json")
    assert status.json["status"] == "succeeded"  # the run itself finished, and was recorded


def test_junit_on_a_full_disk_leaves_no_temp_file(run, write, tiny_disk: Path) -> None:
    write("p.yaml", TWO_STEPS)
    with open(tiny_disk / "fill", "wb") as fill, contextlib.suppress(OSError):
        fill.write(b"\0" * 100_000)  # more than fits: the disk is full
    result = run("run", "p.yaml", "--junit", str(tiny_disk / "j.xml"))
    assert result.code == 1, result
    assert_no_traceback(result)
    assert result.err.splitlines()[-1].startswith("planrun: error: cannot write ")
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["fill"]  # no .j.xml.PID.tmp
    assert run("status", "p.yaml", "--output", "json").json["status"] == "succeeded"


def test_state_on_a_disk_that_fills_during_a_step(run, write, tiny_disk: Path) -> None:
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: a, tool: shell, args: {{cmd: "head -c 100000 /dev/zero > {tiny_disk}/fill; true"}}}}
          - {{id: b, tool: echo, args: {{value: 1}}, depends_on: [a]}}
        """,
    )
    result = run("run", "p.yaml", "--state", str(tiny_disk / "s.json"), "--output", "json")
    assert result.code == 4, result
    assert_no_traceback(result)
    assert "ExceptionGroup" not in result.err and "internal error" not in result.err
    assert result.json["exit_code"] == 4 and "No space left on device" in result.json["error"]


# --- NUL bytes, Python reprs and terminal escapes ----------------------------------------


def test_a_nul_byte_in_a_value_fails_the_step_in_one_clear_line(run, write) -> None:
    write(
        "p.yaml",
        """
        variables: {x: "a\\u0000b"}
        steps:
          - {id: w, tool: write_file, args: {path: "${x}", content: 1}}
          - {id: r, tool: read_file, args: {path: "${x}"}}
          - {id: c, tool: shell, args: {cmd: "true", cwd: "${x}"}}
          - {id: p, tool: plan, args: {path: "${x}"}}
        """,
    )
    result = run("run", "p.yaml", "--keep-going", "--output", "json")
    assert result.code == 1, result
    assert_no_traceback(result)
    errors = {s["id"]: s["error"] for s in result.json["steps"]}
    assert all(errors.values()), errors
    for error in errors.values():
        assert "NUL byte" in error and "ValueError" not in error and "\n" not in error, errors


def test_string_formatting_shows_values_as_json(run, write) -> None:
    write(
        "p.yaml",
        """
        variables: {d: {k: 1, n: null, t: true}, l: [1, "x"]}
        steps:
          - {id: a, tool: echo, args: {value: "${'%s' % d}"}}
          - {id: b, tool: echo, args: {value: "${'%s and %s' % (l, none)}"}}
          - {id: c, tool: echo, args: {value: "${'{} {}'.format(d, true)}"}}
          - {id: e, tool: echo, args: {value: "${'%d items' % 3}"}}
          - {id: s, tool: echo, args: {value: "${'%s' % steps.a}"}}
        """,
    )
    result = run("run", "p.yaml", "--output", "json")
    assert result.code == 0, result
    got = {s["id"]: s["result"] for s in result.json["steps"]}
    assert got["a"] == '{"k": 1, "n": null, "t": true}'
    assert got["b"] == '[1, "x"] and null'
    assert got["c"] == '{"k": 1, "n": null, "t": true} true'
    assert got["e"] == "3 items"
    assert json.loads(got["s"])["status"] == "succeeded"


def test_values_jinja2_makes_read_as_json_never_as_reprs(run, write) -> None:
    # A range, a mapping's items or a filter's generator is a list; `~`, `string` and `join`
    # turn values into text as a template does. Python's reprs (with a memory address, new
    # on every run) never reach a result.
    write(
        "p.yaml",
        """
        variables: {d: {k: true}, n: null}
        steps:
          - {id: r, tool: echo, args: {value: "${ range(3) }"}}
          - {id: i, tool: echo, args: {value: "${ d.items() }"}}
          - {id: m, tool: echo, args: {value: "${ [1, 2] | map('string') }"}}
          - {id: t, tool: echo, args: {value: "r=${ range(2) } m=${ [1] | reverse }"}}
          - {id: c, tool: echo, args: {value: "${ d ~ n } ${ n | string } ${ [d, n] | join(' ') }"}}
          - {id: o, tool: echo, args: {value: "${ cycler(1, 2) }"}}
          - {id: f, tool: echo, args: {value: "x ${ 'abc'.upper }"}}
        """,
    )
    result = run("run", "p.yaml", "--keep-going", "--output", "json")
    assert result.code == 1, result
    assert_no_traceback(result)
    steps = {s["id"]: s for s in result.json["steps"]}
    got = {k: s["result"] for k, s in steps.items()}
    assert got["r"] == [0, 1, 2]
    assert got["i"] == [["k", True]]
    assert got["m"] == ["1", "2"]
    assert got["t"] == "r=[0, 1] m=[1]"
    assert got["c"] == '{"k": true}null null {"k": true} null'
    assert steps["o"]["error"] == (
        "step 'o': args.value: in '${ cycler(1, 2) }': the value is a Cycler, which is not JSON"
    )
    assert steps["f"]["error"].endswith(
        "the value is a builtin_function_or_method, which is not JSON"
    )


def test_terminal_safe_removes_sequences_and_shows_controls() -> None:
    from planrun.reporters.termsafe import terminal_safe

    assert terminal_safe("plain text\tand tab") == "plain text\tand tab"
    assert terminal_safe("\x1b[31mred\x1b[0m \x1b[2J\x1b[H") == "red "
    assert terminal_safe("\x1b]0;title\x07a\x1b]52;c;Zm9v\x1b\\b") == "ab"
    assert terminal_safe("bell\x07 nul\x00 del\x7f c1\x9b2J") == "bell^G nul^@ del^? c1"


def test_step_output_reaches_a_terminal_without_escape_sequences(write, tmp_path: Path) -> None:
    import pty
    import subprocess

    from tests.conftest import spawn_planrun

    write(
        "p.yaml",
        r"""
        steps:
          - {id: a, tool: shell, args: {cmd: 'printf "A\033]0;pwned\007B\033]52;c;Zm9v\007C\033[2JD\n"'}}
        """,
    )
    leader, follower = pty.openpty()
    proc = spawn_planrun(
        "run",
        "p.yaml",
        "--yes",
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "NO_COLOR": "1"},
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 0, seen
    assert b"ABCD" in seen, seen
    assert b"\x1b]" not in seen and b"\x1b[2J" not in seen and b"pwned" not in seen, seen


def test_titles_and_plan_names_reach_a_terminal_without_escape_sequences(write, tmp_path):
    """A title rendered from data (a foreach element, a result) and the plan's name are shown
    at a terminal like step output: in the progress lines and in the live view alike."""
    import pty
    import select
    import time

    from tests.conftest import spawn_planrun

    write(
        "p.yaml",
        r"""
        name: "plan\e]0;pwned-name\a"
        variables:
          names: ["A\e]0;pwned-title\aB\e[2JC\e]52;c;Zm9v\aD"]
        steps:
          - id: s
            title: "t ${item}"
            foreach: "${names}"
            tool: shell
            args: {cmd: "while [ ! -e go ]; do sleep 0.05; done; exit 1"}
        """,
    )
    leader, follower = pty.openpty()
    proc = spawn_planrun(
        "run",
        "p.yaml",
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    released = False
    while time.monotonic() < deadline:
        if not released and b"ABCD" in seen:  # the live view shows the running instance
            (tmp_path / "go").touch()
            released = True
        ready, _, _ = select.select([leader], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    (tmp_path / "go").touch()
    proc.wait(timeout=30)
    os.close(leader)
    assert proc.returncode == 1, seen
    assert released and b"s[0] (t ABCD) failed" in seen, seen
    assert b"run plan started" in seen, seen
    assert b"\x1b]" not in seen and b"\x1b[2J" not in seen and b"\x07" not in seen, seen


def test_a_huge_plan_or_vars_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    # Sparse: a gigabyte on paper, nothing on disk. Reading it whole ate all memory.
    with (tmp_path / "big.yaml").open("wb") as f:
        f.truncate(1 << 30)
    r = bounded_planrun(tmp_path, "validate", "big.yaml")
    assert r.code == 3 and "internal error" not in r.out + r.err, r
    assert r.out.startswith("big.yaml:1:1: error:") and "larger than" in r.out, r
    assert_no_traceback(r)
    write_p_yaml(tmp_path, "steps: []\n")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--vars-file", "big.yaml", "--no-state")
    assert r.code == 2 and "internal error" not in r.err and "larger than" in r.err, r
    assert len(r.err.strip().splitlines()) == 1, r
    assert_no_traceback(r)
    (tmp_path / "mcp.json").symlink_to(tmp_path / "big.yaml")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--mcp-config", "mcp.json", "--no-state")
    assert r.code == 2 and "internal error" not in r.err and "larger than" in r.err, r
    assert_no_traceback(r)


def test_an_mcp_config_with_a_huge_number_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        '{"mcpServers": {"a": {"command": "x", "n": 1' + "0" * 5000 + "}}}"
    )
    write_p_yaml(tmp_path, "steps: []\n")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--mcp-config", "mcp.json", "--no-state")
    assert r.code == 2 and "internal error" not in r.err, r
    assert r.err.startswith("planrun: error: ") and "mcp.json" in r.err, r
    assert len(r.err.strip().splitlines()) == 1, r
    assert_no_traceback(r)


def test_a_planner_printing_a_huge_number_or_deep_json_fails_the_replan(tmp_path: Path) -> None:
    for i, body in enumerate(["[1" + "0" * 5000 + "]", "[" * 100000 + "]" * 100000]):
        (tmp_path / "planner.py").write_text(f"print({body!r})\n")
        write_p_yaml(
            tmp_path,
            f"""
            replan: {{command: ["{sys.executable}", "planner.py"], timeout: 20s}}
            limits: {{max_replans: 1}}
            steps:
              - {{id: a, tool: shell, args: {{cmd: "exit 9"}}, on_failure: replan}}
            """,
        )
        r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
        assert r.code == 1 and "internal error" not in r.out + r.err, (i, r)
        assert json.loads(r.out)["reason"] == "replan_budget", (i, r)
        assert_no_traceback(r)


def test_a_lone_surrogate_escape_in_json_is_an_error_at_its_position(tmp_path: Path) -> None:
    # YAML refuses "\ud800"; JSON read it, and printing or storing it was an internal error.
    (tmp_path / "p.json").write_text(
        '{"name": "t",\n "steps": [{"id": "a", "tool": "echo", "args": {"value": "x\\ud800"}}]}'
    )
    for args in (["validate", "p.json"], ["run", "p.json", "--output", "json"]):
        r = bounded_planrun(tmp_path, *args)
        assert r.code == 3 and "internal error" not in r.out + r.err, r
        assert_no_traceback(r)
    r = bounded_planrun(tmp_path, "validate", "p.json")
    assert r.out.startswith("p.json:2:60: error:") and "surrogate" in r.out, r
    # A pair is one character; an escaped backslash before 'ud800' is no escape at all.
    ok = '{"steps": [{"id": "a", "tool": "echo", "args": {"value": "\\ud83d\\ude00 \\\\ud800"}}]}'
    (tmp_path / "p.json").write_text(ok)
    r = bounded_planrun(tmp_path, "run", "p.json", "--output", "json", "--no-state")
    assert r.code == 0 and json.loads(r.out)["steps"][0]["result"] == "\U0001f600 \\ud800", r
    (tmp_path / "v.json").write_text('{"x": "\\udc00"}')
    write_p_yaml(tmp_path, "steps: []\n")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--vars-file", "v.json", "--output", "json")
    assert r.code == 2 and "internal error" not in r.out + r.err and "surrogate" in r.err, r


def test_a_plan_that_writes_and_runs_a_new_copy_of_itself_stops(tmp_path: Path) -> None:
    # Every level is a different file, so "includes itself" never fired: it nested forever.
    write_p_yaml(
        tmp_path,
        """
        variables: {n: 0}
        steps:
          - {id: copy, tool: shell, args: {cmd: "cp p.yaml p${n + 1}.yaml"}}
          - id: deeper
            tool: plan
            args: {path: "p${n + 1}.yaml", variables: {n: "${n + 1}"}}
            depends_on: [copy]
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json", timeout=60)
    assert r.code == 1 and "internal error" not in r.out + r.err, r
    assert_no_traceback(r)
    assert "nested more than" in json.loads(r.out)["steps"][-1]["error"], r
    assert len(list(tmp_path.glob("p*.yaml"))) <= 40


@pytest.mark.slow  # two plans of 600,000 values
def test_a_yaml_plan_with_millions_of_values_is_refused_early(tmp_path: Path) -> None:
    # 14 MB of "[1,1,1,...]" took 3.3 GB and 35 s to compose (libyaml nodes are heavy).
    items = ",".join(["1"] * 600_000)
    (tmp_path / "p.yaml").write_text(f"steps: []\nvariables:\n  x: [{items}]\n")
    r = bounded_planrun(tmp_path, "validate", "p.yaml", timeout=60)
    assert r.code == 3 and "internal error" not in r.out + r.err, r
    assert r.out.startswith("p.yaml:3:6: error:") and "too many values" in r.out, r
    assert_no_traceback(r)
    block = "".join("  - 1\n" for _ in range(600_000))
    (tmp_path / "p.yaml").write_text(f"steps: []\nvariables:\n x:\n{block}")
    r = bounded_planrun(tmp_path, "validate", "p.yaml", timeout=60)
    assert r.code == 3 and "too many values" in r.out, r


def test_sleep_refuses_nan_and_infinity(tmp_path: Path) -> None:
    # NaN slept not at all and succeeded; infinity (1e308 * 10) slept forever. (YAML's
    # .nan and .inf are refused as the plan is read.)
    write_p_yaml(
        tmp_path,
        """
        variables: {big: 1.0e+308}
        steps:
          - {id: b, tool: sleep, args: {seconds: "${ big * 10 }"}, on_failure: continue}
          - {id: c, tool: sleep, args: {seconds: "${ 2 ** 1100 }"}}
        """,
    )
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--no-state", "--output", "json")
    assert r.code == 1, r
    assert_no_traceback(r)
    b, c = json.loads(r.out)["steps"]
    assert c["status"] == "failed" and "sleep: 'seconds'" in c["error"], c
    # infinity made by an expression fails as the expression's value, before sleep sees it
    assert b["status"] == "failed" and "the value is infinity" in b["error"], b


# --- standard output that cannot be written: one line, never a traceback -------------------


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        # the run succeeded, its document is lost: what CI asked for is missing
        (["run", "p.yaml", "--output", "json"], 1, "No space left on device"),
        (["validate", "p.yaml", "--format", "json"], 1, "No space left on device"),
        (["graph", "p.yaml"], 1, "No space left on device"),
        # an error's JSON document is lost: its line on stderr and its exit code stay
        (["run", "missing.yaml", "--output", "json"], 2, "plan file not found"),
        (["status", "p.yaml", "--output", "json"], 4, "no state for plan"),
    ],
)
def test_standard_output_on_a_full_disk_is_one_line(
    write, tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    write("p.yaml", OK_PLAN)
    env = {**os.environ, "NO_COLOR": "1"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "planrun", *args],
            cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            text=True, env=env, timeout=60,
        )  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("planrun: error:")]
    assert len(lines) == 1 and says in lines[0], proc.stderr


def _at_a_terminal(tmp_path: Path, *args: str) -> bytes:
    """What `planrun ARGS` writes to a pseudo-terminal (stdout and stderr), whole."""
    import pty

    from tests.conftest import spawn_planrun

    leader, follower = pty.openpty()
    proc = spawn_planrun(
        *args,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=60)
    os.close(leader)
    return seen


@pytest.mark.parametrize(
    "command",
    [
        ["status", "p.yaml"],
        ["list", "p.yaml"],
        ["list", "--all", "p.yaml"],
        ["show", "p.yaml", "s"],
        ["graph", "p.yaml"],
        ["graph", "p.yaml", "--format", "mermaid"],
        ["graph", "p.yaml", "--format", "dot"],
        ["run", "p.yaml", "--dry-run"],
    ],
)
def test_views_of_a_plan_reach_a_terminal_without_escape_sequences(write, tmp_path, command):
    """Titles, descriptions and names are the plan's text or data (a foreach element): the
    text views print them at a terminal as the console prints step output."""
    write(
        "p.yaml",
        r"""
        name: "nm\e]0;pwned\a"
        title: "pt\e]0;pwned\a"
        variables: {xs: ["el\e]52;c;Zm9v\a\e[2J"]}
        steps:
          - id: s
            title: "st\e]0;pwned\a ${item}"
            description: "de\e]0;pwned\a"
            foreach: "${xs}"
            tool: shell
            args: {cmd: "exit 1"}
        """,
    )
    (tmp_path / "p.yaml").chmod(0o644)
    _at_a_terminal(tmp_path, "run", "p.yaml")  # a state for status and graph to show
    seen = _at_a_terminal(tmp_path, *command)
    assert b"st" in seen and b"Traceback" not in seen, seen
    assert b"\x1b]" not in seen and b"\x1b[2J" not in seen and b"\x07" not in seen, seen
