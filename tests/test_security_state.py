"""The state file is data, never code or a weapon: forged revisions, planted links, wrong --state."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, planrun_process
from tests.testkit import DEEP_JSON, cached_run

FAILING = """
name: p
steps:
  - {id: a, tool: echo, args: {value: 1}}
  - {id: b, tool: shell, args: {cmd: "exit 3"}, depends_on: [a]}
"""


def one_line_error(r) -> str:  # type: ignore[no-untyped-def]
    assert_no_traceback(r)
    lines = [x for x in r.err.splitlines() if x.strip()]
    assert len(lines) == 1, r
    return lines[0]


def forge_revision(state: Path, steps: list[dict]) -> None:  # type: ignore[type-arg]
    doc = json.loads(state.read_text())
    doc["revisions"] = [
        {
            "revision": 1,
            "diff": {"removed": ["b"], "added": ["evil"], "revised": []},
            "error": "x",
            "steps": steps,
        }
    ]
    state.write_text(json.dumps(doc))


EVIL = [
    {"id": "a", "tool": "echo", "args": {"value": 1}},
    {"id": "evil", "tool": "shell", "args": {"cmd": "touch PWNED"}},
]


def test_resume_refuses_stored_revisions_when_the_plan_has_no_planner(run, write, tmp_path):
    write("p.yaml", FAILING)
    assert run("run", "p.yaml").code == 1
    forge_revision(tmp_path / ".planrun/state/p.json", EVIL)
    r = run("resume", "p.yaml")
    assert r.code == 4, r
    assert "no 'replan:' planner" in one_line_error(r)
    assert not (tmp_path / "PWNED").exists()


def test_resume_refuses_stored_revisions_that_break_the_policy(run, write, tmp_path):
    write(
        "p.yaml",
        """
        name: p
        replan: {command: ["false"]}
        policy: {deny: [shell]}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: b, tool: http, args: {url: "http://127.0.0.1:9/"}, depends_on: [a]}
        """,
    )
    assert run("run", "p.yaml").code == 1
    forge_revision(tmp_path / ".planrun/state/p.json", EVIL)
    r = run("resume", "p.yaml")
    assert r.code == 4, r
    line = one_line_error(r)
    assert "revision 1" in line and "shell" in line, r
    assert not (tmp_path / "PWNED").exists()
    # a revision naming an unknown tool, or not even a step, is refused the same way
    forge_revision(tmp_path / ".planrun/state/p.json", [{"id": "x", "tool": "nope"}])
    r = run("resume", "p.yaml")
    assert r.code == 4 and "revision 1" in one_line_error(r), r
    forge_revision(tmp_path / ".planrun/state/p.json", ["not a step"])
    r = run("resume", "p.yaml")
    assert r.code == 4, r
    one_line_error(r)


def plant(tmp_path: Path, name: str) -> Path:
    """A precious file of the user's, and a symlink to it where planrun keeps state."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    state_dir = tmp_path / ".planrun" / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / name).symlink_to(victim)
    return victim


@pytest.mark.parametrize("name", ["p.json.lock", "p.json", "p.json.journal"])
def test_a_symlink_among_the_state_files_is_never_followed(run, write, tmp_path, name):
    write("p.yaml", FAILING)
    victim = plant(tmp_path, name)
    r = run("run", "p.yaml")
    assert r.code == 4, r
    assert "symbolic link" in one_line_error(r)
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert (tmp_path / ".planrun/state" / name).is_symlink()
    if name == "p.json":
        r = run("status", "p.yaml")
        assert r.code == 4 and "symbolic link" in one_line_error(r), r


def test_status_does_not_hang_on_a_fifo_lock(run, write, tmp_path):
    write("p.yaml", FAILING)
    assert run("run", "p.yaml").code == 1
    os.mkfifo(tmp_path / ".planrun/state/p.json.lock")
    r = run("status", "p.yaml")
    assert r.code == 0, r
    r = run("run", "p.yaml")
    assert r.code == 4 and "FIFO" in one_line_error(r), r


def _targets(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    config = tmp_path / "config.json"
    config.write_text('{"debug": true}\n')
    link = tmp_path / "link.json"
    link.symlink_to(config)
    text = tmp_path / "notes.txt"
    text.write_text("not json at all\n")
    empty = tmp_path / "empty.json"
    empty.write_text("")
    return {"fifo": fifo, "config": config, "link": link, "text": text, "empty": empty}


def test_state_option_never_overwrites_a_file_that_is_not_this_plans_state(run, write, tmp_path):
    write("p.yaml", FAILING)
    write("other.yaml", "name: other\nsteps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    assert run("run", "other.yaml", "--state", "other-state.json").code == 0
    targets = {**_targets(tmp_path), "other": tmp_path / "other-state.json"}
    before = {
        k: (os.lstat(p).st_mode, p.read_bytes() if k != "fifo" else b"") for k, p in targets.items()
    }
    for key, target in targets.items():
        for command in ("run", "resume"):
            r = run(command, "p.yaml", "--state", str(target))
            assert r.code == 4, (key, command, r)
            one_line_error(r)
            mode = os.lstat(target).st_mode
            content = target.read_bytes() if key != "fifo" else b""
            assert (mode, content) == before[key], (key, command)
            assert not Path(str(target) + ".lock").exists()
    # A path that does not exist yet, then this plan's own state, are fine.
    fresh = tmp_path / "sub" / "mine.json"
    assert run("run", "p.yaml", "--state", str(fresh)).code == 1
    assert json.loads(fresh.read_text())["plan"] == "p"
    assert run("run", "p.yaml", "--state", str(fresh)).code == 1
    assert run("resume", "p.yaml", "--state", str(fresh)).code == 1


def test_a_hard_link_as_the_lock_file_is_refused(run, write, tmp_path):
    write("p.yaml", FAILING)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    state_dir = tmp_path / ".planrun" / "state"
    state_dir.mkdir(parents=True)
    os.link(victim, state_dir / "p.json.lock")
    r = run("run", "p.yaml")
    assert r.code == 4 and "hard link" in one_line_error(r), r
    assert victim.read_text() == "precious\n"


def test_a_revision_cannot_lift_an_approval_gate(run, write, tmp_path):
    write(
        "p.yaml",
        """
        name: p
        replan: {command: ["false"]}
        steps:
          - {id: a, tool: shell, args: {cmd: "exit 3"}}
          - {id: deploy, tool: shell, args: {cmd: "touch DEPLOYED"}, approval: true, depends_on: [a]}
        """,
    )
    assert run("run", "p.yaml", "--yes").code == 1
    forge_revision(
        tmp_path / ".planrun/state/p.json",
        [{"id": "deploy", "tool": "shell", "args": {"cmd": "touch DEPLOYED"}}],
    )
    r = run("resume", "p.yaml")
    assert r.code == 5, r
    assert not (tmp_path / "DEPLOYED").exists()
    assert run("resume", "p.yaml", "--yes").code == 0
    assert (tmp_path / "DEPLOYED").exists()


@pytest.mark.parametrize("link", [".planrun", ".planrun/state"])
def test_a_symlinked_state_directory_is_refused(run, write, tmp_path, link):
    write("p.yaml", FAILING)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if link != ".planrun":
        (tmp_path / ".planrun").mkdir()
    (tmp_path / link).symlink_to(elsewhere)
    r = run("run", "p.yaml")
    assert r.code == 4 and "symbolic link" in one_line_error(r), r
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", ["p.json", "p.json.journal"])
@pytest.mark.parametrize("command", ["status", "resume"])
def test_a_huge_state_file_is_refused_without_reading_it(write, tmp_path, name, command):
    """A state file (or journal) a repository ships can be any size: memory stays bounded."""
    write("p.yaml", FAILING)
    states = tmp_path / ".planrun" / "state"
    states.mkdir(parents=True)
    if name != "p.json":
        (states / "p.json").write_text(json.dumps({"version": 1, "plan": "p", "steps": {}}))
    with open(states / name, "wb") as f:
        f.truncate(1 << 30)  # sparse: costs no disk
    r = planrun_process(command, "p.yaml", cwd=tmp_path, capped=True)
    assert r.code == 4, r
    line = one_line_error(r)
    assert "larger than" in line and name in line, line


def test_an_error_naming_a_hostile_file_name_is_one_line(run, tmp_path):
    # File names are input too: a line feed or an escape sequence in one must not split the
    # error into lines (a forged second "planrun:" line) or reach the terminal raw.
    name = "no\nplanrun: done\x1b[2J.yaml"
    r = run("run", name)
    assert r.code == 2, r
    line = one_line_error(r)
    assert "\x1b" not in line and "\\n" in line and "\\x1b" in line, line


def test_a_deeply_nested_state_file_is_a_state_error(run, write, tmp_path):
    cached_run(run, write, tmp_path)
    (tmp_path / ".planrun/state/p.json").write_text(DEEP_JSON)
    for command in ("status", "resume"):
        r = run(command, "p.yaml")
        assert r.code == 4, r
        assert_no_traceback(r)
        assert "corrupt" in r.err, r
