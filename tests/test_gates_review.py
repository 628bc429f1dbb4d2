"""An attacker's review of the gates and of the files under `.planrun/`: what a planner's answer
or a cloned repository's `.planrun/` can make planrun do must stay inside the rules (approval,
policy, the working directory), and a hostile file is a miss or one clear error, never a crash.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, assert_no_traceback

SERVERS = ROOT / "tests" / "mcp_servers"

CACHED = """
name: p
steps:
  - id: a
    tool: shell
    args: {cmd: "mkdir -p out && printf hi > out/f.txt"}
    outputs: ["out/f.txt"]
"""

DEEP = "[" * 100_000 + "]" * 100_000


def _entry(tmp_path: Path) -> Path:
    (entry,) = (tmp_path / ".planrun/cache/entries").iterdir()
    return entry


def _forge(entry: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite a cache entry as an attacker would: changed, with a matching checksum."""
    head, _, body = entry.read_bytes().partition(b"\n")
    doc = json.loads(body)
    change(doc)
    body = json.dumps(doc).encode()
    magic, fmt, _ = head.decode().split(" ")
    entry.write_bytes(f"{magic} {fmt} {hashlib.sha256(body).hexdigest()}\n".encode() + body)


def _cached_run(run: Any, write: Any, tmp_path: Path) -> Path:
    write("p.yaml", CACHED)
    assert run("run", "p.yaml", "-q").code == 0
    (tmp_path / "out/f.txt").unlink()
    return _entry(tmp_path)


# ---- the cache store ----------------------------------------------------------------------


def test_a_forged_blob_name_never_touches_a_file_outside_the_cache(run, write, tmp_path):
    entry = _cached_run(run, write, tmp_path)
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
    write("p.yaml", CACHED.replace('"mkdir -p out && printf hi > out/f.txt"', step))
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
    entry = _cached_run(run, write, tmp_path)
    _forge(entry, lambda d: d["outputs"][0].update(mode=2**70))
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert_no_traceback(r)
    (tmp_path / "out/f.txt").unlink()
    entry = _entry(tmp_path)
    _forge(entry, lambda d: d["outputs"][0].update(mode=0o6755))
    r = run("run", "p.yaml", "--output", "json")
    assert r.json["steps"][0]["status"] == "cached", r
    assert stat.S_IMODE((tmp_path / "out/f.txt").stat().st_mode) == 0o755


def test_a_deeply_nested_cache_entry_is_a_miss(run, write, tmp_path):
    entry = _cached_run(run, write, tmp_path)
    body = ('{"format": 2, "result": ' + DEEP + "}").encode()
    entry.write_bytes(f"planrun-cache-entry 2 {hashlib.sha256(body).hexdigest()}\n".encode() + body)
    r = run("run", "p.yaml")
    assert r.code == 0, r
    assert_no_traceback(r)
    assert "treated as a miss" in r.err, r
    r = run("cache", "prune", "--older-than", "1s")
    assert r.code == 0, r
    assert_no_traceback(r)


def test_a_deeply_nested_recent_file_is_ignored(run, write, tmp_path):
    _cached_run(run, write, tmp_path)
    (tmp_path / ".planrun/cache-recent.json").write_text(DEEP)
    r = run("run", "p.yaml", "--force")
    assert r.code == 0, r
    assert_no_traceback(r)


def test_a_deeply_nested_state_file_is_a_state_error(run, write, tmp_path):
    _cached_run(run, write, tmp_path)
    (tmp_path / ".planrun/state/p.json").write_text(DEEP)
    for command in ("status", "resume"):
        r = run(command, "p.yaml")
        assert r.code == 4, r
        assert_no_traceback(r)
        assert "corrupt" in r.err, r


def test_prune_and_clean_never_follow_a_linked_subdirectory(run, write, tmp_path):
    _cached_run(run, write, tmp_path)
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


# ---- the plan cache -----------------------------------------------------------------------


def test_a_shipped_plan_cache_entry_is_not_run_instead_of_the_file(run, write, tmp_path):
    """An attacker with the same planrun install makes the entry of the plan the user will
    read, edits the plan in it (its gate removed) and ships `.planrun/plans/` with the
    repository: the user's run must run the file, gate included."""
    write("g.yaml", "steps:\n  - {id: push, tool: shell, args: {cmd: touch RAN}, approval: true}\n")
    attacker = {"XDG_CACHE_HOME": str(tmp_path / "attacker-home")}
    assert run("validate", "g.yaml", env=attacker).code == 0
    (entry,) = (tmp_path / ".planrun/plans").iterdir()
    entry.write_text(entry.read_text().replace(',"approval":true', ""))
    assert "approval" not in entry.read_text()
    assert run("run", "g.yaml", env=attacker).code == 0  # the forged entry, where it was made
    (tmp_path / "RAN").unlink()
    r = run("run", "g.yaml", env={"XDG_CACHE_HOME": str(tmp_path / "user-home")})
    assert r.code == 5, r
    assert not (tmp_path / "RAN").exists()


def test_without_a_home_for_the_secret_the_plan_cache_is_off(run, write, tmp_path):
    write("g.yaml", "steps:\n  - {id: a, tool: echo}\n")
    (tmp_path / "file").write_text("")
    r = run("run", "g.yaml", env={"XDG_CACHE_HOME": str(tmp_path / "file")})
    assert r.code == 0, r
    assert not (tmp_path / ".planrun/plans").exists() or not any(
        (tmp_path / ".planrun/plans").iterdir()
    )
    secret = tmp_path / "home/planrun/secret"
    assert run("run", "g.yaml", env={"XDG_CACHE_HOME": str(tmp_path / "home")}).code == 0
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and len(secret.read_bytes()) == 32


# ---- replanning ---------------------------------------------------------------------------

PLANNER = """
import json, sys
json.load(sys.stdin)
print(json.dumps([{"id": "push", "tool": "shell", "args": {"cmd": "touch PUSHED"},
                   "approval": False}]))
"""


def test_a_live_revision_cannot_lift_an_approval_gate(run, write, tmp_path):
    write("planner.py", PLANNER)
    write(
        "r.yaml",
        f"""
        name: r
        replan: {{command: "{sys.executable} planner.py"}}
        variables: {{ship: false}}
        steps:
          - {{id: build, tool: shell, args: {{cmd: "exit 1"}}, on_failure: replan}}
          - id: push
            tool: shell
            approval: true
            when: "${{ship}}"
            depends_on: [build]
            args: {{cmd: "touch ORIGINAL"}}
        """,
    )
    r = run("run", "r.yaml", "--output", "json")
    assert not (tmp_path / "PUSHED").exists(), r
    assert r.code == 5, r
    assert r.json["reason"] == "approval_required", r


def test_policy_deny_covers_the_planner_tool(run, write, tmp_path):
    """`replan: {tool: SERVER.TOOL}` is a tool call like a step's: a denied one is an invalid
    plan (exit 3), also when the denial comes from an enclosing plan."""
    server = f'{{command: "{sys.executable}", args: ["{SERVERS / "crashy_server.py"}"]}}'
    plan = f"""
        name: m
        servers: {{srv: {server}}}
        replan: {{tool: srv.echo}}
        steps:
          - {{id: a, tool: echo, args: {{value: 1}}, on_failure: replan}}
        """
    write("m.yaml", plan.replace("name: m", "name: m\n        policy: {deny: ['srv.*']}"))
    r = run("validate", "m.yaml")
    assert r.code == 3, r
    assert "planner tool 'srv.echo' is denied by policy (deny: 'srv.*')" in r.out + r.err, r
    write("child.yaml", plan)
    write(
        "parent.yaml",
        """
        policy: {deny: ["srv.echo"]}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
        """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert "planner tool 'srv.echo' is denied by policy of the enclosing plan" in str(r.json), r


def test_a_huge_cache_entry_or_blob_is_not_read(run, write, tmp_path):
    """Sparse files, so nothing is written: reading either whole would take 300 MB."""
    entry = _cached_run(run, write, tmp_path)
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


def test_a_linked_planrun_or_cache_directory_is_not_written_through(run, write, tmp_path):
    """A repository can ship `.planrun/cache -> ~/somewhere` (or `.planrun` itself): the cache
    is then not used, and `cache clean|prune` refuse it (exit 4), writing nothing there."""
    write("p.yaml", CACHED)
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


COUNTING_PLANNER = """
import json, sys
json.load(sys.stdin)
with open("CALLS", "a") as f:
    f.write("call\\n")
print("not a list of steps")
"""


def test_a_sub_plan_cannot_call_its_planner_more_than_the_parent_allows(run, write, tmp_path):
    write("planner.py", COUNTING_PLANNER)
    write(
        "child.yaml",
        f"""
        name: child
        replan: {{command: "{sys.executable} planner.py"}}
        limits: {{max_replans: 5}}
        steps:
          - {{id: a, tool: shell, args: {{cmd: "exit 1"}}, on_failure: replan}}
        """,
    )
    write(
        "parent.yaml",
        """
        limits: {max_replans: 1}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
        """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert (tmp_path / "CALLS").read_text().count("call") == 1, r
    assert "limits.max_replans is 1 (in the enclosing plan" in r.json["error"], r


def test_a_bad_step_id_is_never_printed_raw(run, write):
    """An id with a line feed and an escape sequence: one line, no escape reaches the terminal."""
    write("p.json", '{"steps": [{"id": "a\\n\\u001b]0;owned\\u0007x", "tool": "echo"}]}')
    r = run("validate", "p.json")
    assert r.code == 3, r
    assert "\x1b" not in r.out + r.err and len((r.out + r.err).strip().splitlines()) == 1, r
    assert "bad step id" in r.out + r.err, r


def test_a_diagnostic_naming_plan_text_stays_one_line(run, write):
    write("t.json", '{"steps": [{"id": "a", "tool": "sh\\nell\\u001b[2J"}]}')
    r = run("validate", "t.json")
    assert r.code == 3, r
    assert len(r.out.strip().splitlines()) == 1 and "\x1b" not in r.out + r.err, r
    assert "unknown tool 'sh\\nell\\x1b[2J'" in r.out, r
