"""The plan cache (planrun/plan/cache.py): a hit prints and does exactly what a miss does, only
what the check depends on is in the key, and a damaged or planted entry is a plain miss."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Result, assert_no_traceback, planrun

WARNED = """\
name: warned
variables: {who: world}
steps:
  - {id: a, tool: shell, args: {cmd: "echo ${who}"}, on_failure: replan}
  - {id: b, tool: echo, args: {value: "${steps.a.result.stdout}"}, depends_on: [a]}
  - {id: c, tool: echo, args: {value: "${who | upper}"}, result_variable: out}
  - {id: d, tool: echo, args: {value: "${who}"}, result_variable: out}
"""

NEEDS_VAR = """\
steps:
  - {id: a, tool: echo, args: {value: "${who}"}}
"""

NO_CACHE = {"PLANRUN_NO_PLAN_CACHE": "1"}


def entries(cwd: Path) -> list[Path]:
    d = cwd / ".planrun" / "plans"
    return sorted(d.glob("*.json")) if d.is_dir() else []


def same(a: Result, b: Result) -> None:
    assert (a.code, a.out, a.err) == (b.code, b.out, b.err), f"{a}\n=====\n{b}"


def three_ways(cwd: Path, *args: str) -> Result:
    """Uncached, then a miss that stores, then a hit: all three alike; the hit's result."""
    for entry in entries(cwd):
        entry.unlink()
    off = planrun(*args, cwd=cwd, env=NO_CACHE)
    assert not entries(cwd)
    miss = planrun(*args, cwd=cwd)
    stored = [(e, e.stat().st_ino) for e in entries(cwd)]
    hit = planrun(*args, cwd=cwd)
    assert stored and [(e, e.stat().st_ino) for e in entries(cwd)] == stored  # not written again
    same(off, miss)
    same(miss, hit)
    assert_no_traceback(hit)
    return hit


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_validate_prints_the_same_warnings_on_a_hit(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "p.yaml").write_text(WARNED)
    r = three_ways(tmp_path, "validate", "p.yaml", "--format", fmt)
    assert r.code == 0 and "replan" in r.out + r.err and "concurrently" in r.out + r.err, r
    assert len(entries(tmp_path)) == 1


def test_a_hit_replays_the_stored_entry(tmp_path: Path) -> None:
    """The second call really is a hit: what it prints comes from the entry."""
    (tmp_path / "p.yaml").write_text(WARNED)
    planrun("validate", "p.yaml", cwd=tmp_path)
    [entry] = entries(tmp_path)
    doc = json.loads(entry.read_text())
    doc["diagnostics"][0][4] = "from the cache entry"
    entry.write_text(json.dumps(doc))
    r = planrun("validate", "p.yaml", cwd=tmp_path)
    assert "from the cache entry" in r.out, r
    assert (
        "from the cache entry" not in planrun("validate", "p.yaml", cwd=tmp_path, env=NO_CACHE).err
    )


def test_run_and_dry_run_are_the_same_on_a_hit(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(WARNED)
    three_ways(tmp_path, "run", "p.yaml", "--dry-run")
    three_ways(tmp_path, "run", "p.yaml", "--dry-run", "--output", "json")
    runs = [
        planrun("run", "p.yaml", "--no-state", "--output", "json", cwd=tmp_path) for _ in (1, 2)
    ]
    for r in runs:
        assert r.code == 0, r
        assert [s["status"] for s in r.json["steps"]] == ["succeeded"] * 4
    a, b = ([(s["id"], s["result"]) for s in r.json["steps"]] for r in runs)
    assert a == b


def test_run_and_resume_with_state_hit_the_entry_a_dry_run_made(tmp_path: Path) -> None:
    """--state and --no-state are not in the key: one entry serves every way of running."""
    (tmp_path / "p.yaml").write_text(WARNED)
    assert planrun("run", "p.yaml", "--dry-run", cwd=tmp_path).code == 0
    [(entry, inode)] = [(e, e.stat().st_ino) for e in entries(tmp_path)]
    for args in (["run", "p.yaml"], ["resume", "p.yaml"], ["run", "p.yaml", "--state", "s.json"]):
        r = planrun(*args, cwd=tmp_path)
        assert r.code == 0, r
    assert (tmp_path / ".planrun" / "state" / "warned.json").is_file()
    assert [(e, e.stat().st_ino) for e in entries(tmp_path)] == [(entry, inode)]


def test_infinity_and_nan_are_refused_cached_or_not(tmp_path: Path) -> None:
    """YAML's .inf and .nan are numbers JSON has not: refused as read, never stored."""
    (tmp_path / "p.yaml").write_text(
        "variables: {big: .inf}\n"
        "steps:\n  - {id: a, tool: echo, args: {value: [-.inf, .nan, '${big}']}}\n"
    )
    for _ in range(2):  # nothing is stored for a plan that is refused
        r = planrun("run", "p.yaml", "--dry-run", "--output", "json", cwd=tmp_path)
        assert r.code == 3, r
        found = [(d["line"], d["col"]) for d in r.json["diagnostics"]]
        assert found == [(1, 18), (3, 40), (3, 47)], r
    assert not entries(tmp_path)


def test_a_plan_with_errors_is_never_stored(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: nope}\n")
    for args in (["validate", "p.yaml"], ["run", "p.yaml", "--no-state"]):
        first, second = (planrun(*args, cwd=tmp_path) for _ in (1, 2))
        same(first, second)
        assert first.code == 3 and "unknown tool 'nope'" in first.out + first.err, first
    assert not entries(tmp_path)


def test_variable_names_are_in_the_key_and_values_are_never_stored(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(NEEDS_VAR)
    given = planrun("validate", "p.yaml", "--var", "who=s3cr3t-value", cwd=tmp_path)
    assert given.code == 0, given
    assert len(entries(tmp_path)) == 1
    # Another value: the same entry (names only); no name: undefined, as without a cache.
    assert planrun("validate", "p.yaml", "--var", "who=other", cwd=tmp_path).code == 0
    assert len(entries(tmp_path)) == 1
    missing = planrun("validate", "p.yaml", cwd=tmp_path)
    same(missing, planrun("validate", "p.yaml", cwd=tmp_path, env=NO_CACHE))
    assert missing.code == 3 and "undefined name 'who'" in missing.out + missing.err, missing
    r = planrun("run", "p.yaml", "--no-state", "--var", "who=s3cr3t-value", cwd=tmp_path)
    assert r.code == 0, r
    for f in (tmp_path / ".planrun").rglob("*"):
        assert not f.is_file() or b"s3cr3t-value" not in f.read_bytes(), f


def test_secret_values_written_in_the_plan_are_not_stored(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "secrets: [token]\nvariables: {token: s3cr3t-value}\n"
        "steps:\n  - {id: a, tool: echo, args: {value: '${token}'}}\n"
    )
    assert planrun("validate", "p.yaml", cwd=tmp_path).code == 0
    assert not entries(tmp_path)


def test_an_mcp_config_change_is_a_miss_and_its_entries_are_not_stored(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: srv.hello}\n")
    server = {"command": "true", "env": {"TOKEN": "s3cr3t-token"}}
    (tmp_path / "a.json").write_text(json.dumps({"mcpServers": {"srv": server}}))
    (tmp_path / "b.json").write_text(json.dumps({"mcpServers": {"other": server}}))
    ok = three_ways(tmp_path, "validate", "p.yaml", "--mcp-config", "a.json")
    assert ok.code == 0, ok
    three_ways(tmp_path, "run", "p.yaml", "--dry-run", "--mcp-config", "a.json")
    bad = planrun("validate", "p.yaml", "--mcp-config", "b.json", cwd=tmp_path)
    assert bad.code == 3 and "unknown MCP server 'srv'" in bad.out + bad.err, bad
    assert len(entries(tmp_path)) == 1
    assert b"s3cr3t-token" not in entries(tmp_path)[0].read_bytes()


def test_servers_from_the_config_are_in_the_plan_on_a_hit(tmp_path: Path) -> None:
    """In process: a hit's plan has the --mcp-config servers merged under its own, as a miss."""
    from planrun.plan.cache import check_plan_file

    (tmp_path / "p.yaml").write_text(
        "servers:\n  own: {command: own-server}\n  srv: {url: 'http://127.0.0.1:1/mcp'}\n"
        "steps:\n  - {id: a, tool: srv.hello}\n  - {id: b, tool: extra.hello}\n"
    )
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "extra": {"command": "x", "args": ["--flag"], "env": {"K": "v"}},
                    "srv": {"command": "loses to the plan's own"},
                }
            }
        )
    )
    from planrun.mcp.config import parse_mcp_config
    from planrun.plan.loader import LazyDocument

    servers = parse_mcp_config(str(tmp_path / "mcp.json"))
    path = str(tmp_path / "p.yaml")
    miss = check_plan_file(path, {}, servers, file="p.yaml", cwd=str(tmp_path))
    [(entry, inode)] = [(e, e.stat().st_ino) for e in entries(tmp_path)]
    hit = check_plan_file(path, {}, servers, file="p.yaml", cwd=str(tmp_path))
    assert entry.stat().st_ino == inode and isinstance(hit.doc, LazyDocument)
    assert len(entries(tmp_path)) == 1
    assert miss.plan is not None and hit.plan is not None
    assert list(hit.plan.servers) == list(miss.plan.servers) == ["extra", "srv", "own"]
    assert hit.plan == miss.plan
    assert hit.diagnostics == miss.diagnostics


RICH = """\
version: 1
id: rich
title: every field
description: set to something, or to its default
variables: {n: 3, items: [a, b], nested: {x: 1.5, y: null}, flag: false}
defaults: {timeout: 1m30s, retries: 0, retry_delay: 1, on_failure: continue}
limits: {max_steps: 50, max_replans: 2, max_concurrency: 4, tool_caps: {shell: 2}}
policy: {require_approval: ["srv.*"], deny: []}
replan: {command: [planner, --json], timeout: 60}
secrets: []
executor: {type: local}
dotenv: [".env?"]
servers:
  srv: {command: srv, args: [-v], env: {A: b}, connect_timeout: 5s}
  web: {url: "http://127.0.0.1:1/mcp", headers: {X: y}}
steps:
  - index: a
    title: "first ${n}"
    tool: shell
    args: {cmd: "echo ${item}", env: {K: "1"}}
    foreach: "${items}"
    as: item
    timeout: 500ms
    retries: 2
    retry_delay: 0
    on_failure: ignore
    when: false
    approval: false
    resources: {cpu: 1}
    sources: ["src/**", "!src/x"]
    outputs: [out.txt]
    cache: true
  - {id: b, tool: srv.hello, args: {}, depends_on: [a], when: "${steps.a.status == 'ok'}",
     result_variable: got, expected_outcome: done, description: d, approval: true}
  - {id: c, tool: echo, args: {value: [1, 2.5, "x", null, true, {k: v}]}, foreach: {a: 1}}
"""


def test_a_hit_gives_the_plan_a_miss_gives(tmp_path: Path) -> None:
    """In process, a plan with every field: the hit's plan equals the miss's."""
    from planrun.plan.cache import check_plan_file

    (tmp_path / "rich.yaml").write_text(RICH)
    path = str(tmp_path / "rich.yaml")
    miss = check_plan_file(path, {}, None, file="rich.yaml", cwd=str(tmp_path))
    assert miss.ok, miss.diagnostics
    hit = check_plan_file(path, {}, None, file="rich.yaml", cwd=str(tmp_path))
    assert len(entries(tmp_path)) == 1 and hit.doc.__class__.__name__ == "LazyDocument"
    assert hit.plan == miss.plan and hit.diagnostics == miss.diagnostics
    assert hit.plan is not None and miss.plan is not None
    assert hit.plan.to_dict() == miss.plan.to_dict()


def test_the_file_content_is_in_the_key_not_its_size_and_mtime(tmp_path: Path) -> None:
    plan = tmp_path / "p.yaml"
    plan.write_text("steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    assert planrun("validate", "p.yaml", cwd=tmp_path).code == 0
    st = plan.stat()
    plan.write_text("steps:\n  - {id: a, tool: ecko, args: {value: 1}}\n")  # same size
    os.utime(plan, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert plan.stat().st_size == st.st_size and plan.stat().st_mtime_ns == st.st_mtime_ns
    r = planrun("validate", "p.yaml", cwd=tmp_path)
    assert r.code == 3 and "unknown tool 'ecko'" in r.out + r.err, r


def test_the_name_as_given_is_in_the_key(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "p.yaml").write_text("steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    names = set()
    for given in ("sub/p.yaml", "./sub/p.yaml"):
        for _ in (1, 2):
            r = planrun("run", given, "--dry-run", "--output", "json", cwd=tmp_path)
            assert r.code == 0, r
            names.add(r.json["plan"])
    assert names == {"p"}
    assert len(entries(tmp_path)) == 2


def damage(entry: Path, how: str, other: Path) -> None:
    if how == "garbage":
        entry.write_bytes(b"\x00\xffnot json at all")
    elif how == "truncated":
        entry.write_bytes(entry.read_bytes()[:40])
    elif how == "wrong version":
        doc = json.loads(entry.read_text())
        doc["planrun_plan_cache"] += 1
        entry.write_text(json.dumps(doc))
    elif how == "foreign":  # another plan's entry under this key
        entry.write_bytes(other.read_bytes())
    elif how == "bad plan data":
        doc = json.loads(entry.read_text())
        doc["plan"]["steps"] = [{"id": 1}]
        entry.write_text(json.dumps(doc))
    elif how == "symlink":
        entry.unlink()
        entry.symlink_to(other)
    elif how == "fifo":
        entry.unlink()
        os.mkfifo(entry)
    elif how == "directory":
        entry.unlink()
        entry.mkdir()


@pytest.mark.parametrize(
    "how",
    [
        "garbage",
        "truncated",
        "wrong version",
        "foreign",
        "bad plan data",
        "symlink",
        "fifo",
        "directory",
    ],
)
def test_a_damaged_entry_is_a_silent_miss(tmp_path: Path, how: str) -> None:
    (tmp_path / "p.yaml").write_text(WARNED)
    (tmp_path / "q.yaml").write_text("steps:\n  - {id: other, tool: echo, args: {value: 1}}\n")
    planrun("validate", "q.yaml", cwd=tmp_path)
    [other] = entries(tmp_path)
    other_copy = tmp_path / "other.json"
    other_copy.write_bytes(other.read_bytes())
    planrun("validate", "p.yaml", cwd=tmp_path)
    [entry] = [e for e in entries(tmp_path) if e != other]
    damage(entry, how, other_copy)
    for args in (["validate", "p.yaml"], ["run", "p.yaml", "--dry-run"]):
        expected = planrun(*args, cwd=tmp_path, env=NO_CACHE)
        got = planrun(*args, cwd=tmp_path)  # a FIFO must not hang it
        same(expected, got)
        assert got.code == 0, got
    if how == "symlink":
        assert other_copy.read_bytes() == other.read_bytes()  # never written through


def test_a_symlinked_planrun_directory_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(WARNED)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".planrun").symlink_to(elsewhere)
    for _ in (1, 2):
        same(
            planrun("validate", "p.yaml", cwd=tmp_path),
            planrun("validate", "p.yaml", cwd=tmp_path, env=NO_CACHE),
        )
    assert list(elsewhere.iterdir()) == []
    (tmp_path / ".planrun").unlink()
    (tmp_path / ".planrun").mkdir()
    (tmp_path / ".planrun" / "plans").symlink_to(elsewhere)
    assert planrun("validate", "p.yaml", cwd=tmp_path).code == 0
    assert list(elsewhere.iterdir()) == []


def test_an_unusable_planrun_directory_means_no_caching(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(WARNED)
    (tmp_path / ".planrun").write_text("a file, not a directory")
    for _ in (1, 2):
        same(
            planrun("validate", "p.yaml", cwd=tmp_path),
            planrun("validate", "p.yaml", cwd=tmp_path, env=NO_CACHE),
        )
    r = planrun("run", "p.yaml", "--no-state", cwd=tmp_path)
    assert r.code == 0, r


def test_turned_off_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(WARNED)
    assert planrun("validate", "p.yaml", cwd=tmp_path, env=NO_CACHE).code == 0
    assert planrun("run", "p.yaml", "--dry-run", cwd=tmp_path, env=NO_CACHE).code == 0
    assert not (tmp_path / ".planrun").exists()


def test_check_tools_is_never_served_from_the_cache(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    r = planrun("validate", "p.yaml", "--check-tools", cwd=tmp_path)
    assert r.code == 0, r
    assert not entries(tmp_path)


def test_positions_of_run_time_errors_on_a_hit(tmp_path: Path) -> None:
    """Errors found when a run starts point into the file, loaded only then."""
    (tmp_path / "v.yaml").write_text(
        "name: v\nvariables:\n  a: {k: 1}\n  b: '${a.nope}'\n"
        "steps:\n  - {id: x, tool: echo, args: {value: '${b}'}}\n"
    )
    (tmp_path / "d.yaml").write_text(
        "name: d\ndotenv: [missing.env]\nsteps:\n  - {id: x, tool: echo, args: {value: 1}}\n"
    )
    for plan, where in (("v.yaml", "v.yaml:4:6: "), ("d.yaml", "d.yaml:2:10: ")):
        results = [planrun("run", plan, "--no-state", cwd=tmp_path) for _ in (1, 2)]
        same(*results)
        assert results[1].code == 3 and where in results[1].out + results[1].err, results[1]
    assert len(entries(tmp_path)) == 2
    r = planrun("validate", "d.yaml", cwd=tmp_path)  # validate reads dotenv files after the check
    assert r.code == 3 and "d.yaml:2:10: " in r.out + r.err, r


def test_sub_plans_use_the_cache(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text("steps:\n  - {id: c, tool: echo, args: {value: hi}}\n")
    (tmp_path / "p.yaml").write_text(
        "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n"
    )
    results = [
        planrun("run", "p.yaml", "--no-state", "--output", "json", cwd=tmp_path) for _ in (1, 2)
    ]
    for r in results:
        assert r.code == 0 and r.json["steps"][0]["status"] == "succeeded", r
    assert len(entries(tmp_path)) == 2


def test_a_hit_imports_no_pydantic_yaml_or_jinja2(tmp_path: Path) -> None:
    """The check parses `${who | upper}` with jinja2; a hit does not (a run would evaluate it)."""
    (tmp_path / "p.yaml").write_text(WARNED.replace("${who | upper}", "${who}"))
    code = (
        "import sys\n"
        "import planrun.run.interrupts\n"
        "from planrun.cli.commands import main\n"
        "def exit_now(code):\n"  # `run` ends with os._exit: see what it imported first
        "    raise SystemExit(code)\n"
        "planrun.run.interrupts.exit_now = exit_now\n"
        "try:\n"
        "    main(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n"
        "    heavy = {'pydantic', 'yaml', 'jinja2', 'planrun.plan.model', 'planrun.plan.validate'}\n"
        "    print(sorted(heavy & set(sys.modules)), file=sys.stderr)\n"
    )
    for args in (
        ["validate", "p.yaml"],
        ["run", "p.yaml", "--dry-run"],
        ["run", "p.yaml", "--no-state", "--quiet"],
    ):
        for entry in entries(tmp_path):
            entry.unlink()
        runs = [
            subprocess.run(
                [sys.executable, "-c", code, *args],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
            )
            for _ in (1, 2)
        ]
        assert "'planrun.plan.validate'" in runs[0].stderr  # a miss checks (the measurement works)
        assert runs[1].stderr.splitlines()[-1] == "[]", runs[1].stderr


def test_the_store_keeps_the_newest_entries(tmp_path: Path) -> None:
    from planrun.plan.cache import MAX_ENTRIES, PlanStore

    store = PlanStore(str(tmp_path / ".planrun"))
    for i in range(MAX_ENTRIES + 5):
        store.put(f"{i:064x}", b"{}")
        path = tmp_path / ".planrun" / "plans" / f"{i:064x}.json"
        os.utime(path, ns=(i * 10**9, i * 10**9))
    store.prune()
    kept = {p.name for p in entries(tmp_path)}
    assert len(kept) == MAX_ENTRIES
    assert f"{0:064x}.json" not in kept and f"{MAX_ENTRIES + 4:064x}.json" in kept
    assert oct((tmp_path / ".planrun" / "plans").stat().st_mode & 0o777) == "0o700"
    assert oct(entries(tmp_path)[0].stat().st_mode & 0o777) == "0o600"


@pytest.mark.e2e  # another tree on PYTHONPATH: real processes
def test_another_tree_or_an_edited_module_never_reads_an_entry(tmp_path: Path) -> None:
    """Two checkouts on PYTHONPATH share nothing; editing any module of one is a miss."""

    import planrun as package

    work = tmp_path / "work"
    work.mkdir()
    (work / "p.yaml").write_text(WARNED)
    copy = tmp_path / "copy"
    source = Path(package.__file__).parent
    shutil.copytree(source, copy / "planrun")  # byte-code too: read, not compiled, each time
    other = {"PYTHONPATH": str(copy)}
    assert planrun("validate", "p.yaml", cwd=work).code == 0
    assert len(entries(work)) == 1
    r = planrun("validate", "p.yaml", cwd=work, env=other)
    assert r.code == 0 and len(entries(work)) == 2, r
    module = copy / "planrun" / "suggest.py"
    module.write_text(module.read_text() + "\n# edited\n")
    assert planrun("validate", "p.yaml", cwd=work, env=other).code == 0
    assert len(entries(work)) == 3


def test_the_code_fingerprint_covers_every_module() -> None:
    """Two trees (say two worktrees on PYTHONPATH) never share an entry: the package's path and
    every module's size and mtime are in the key."""
    import planrun.plan.cache as pc

    files = pc._modules(os.path.dirname(os.path.dirname(pc.__file__)), "")
    names = {name for name, *_ in files}
    assert {
        "plan/cache.py",
        "plan/validate.py",
        "plan/loader/__init__.py",
        "cache/keys.py",
    } <= names


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


# ---- the plan's digest ---------------------------------------------------------------------

DIGESTED = """\
name: digested
steps:
  - {id: a, tool: echo, args: {value: 1}}
"""


def state_digest(cwd: Path) -> str:
    return json.loads((cwd / ".planrun/state/digested.json").read_text())["digest"]


def test_a_hit_reports_the_digest_of_an_uncached_run(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DIGESTED)
    digests = []
    for env in (NO_CACHE, {}, {}):  # uncached, the miss that stores, the hit
        assert planrun("run", "p.yaml", cwd=tmp_path, env=env).code == 0
        digests.append(state_digest(tmp_path))
    assert len(entries(tmp_path)) == 1
    assert len(set(digests)) == 1, digests
    (tmp_path / "p.yaml").write_text(DIGESTED.replace("value: 1", "value: 2"))
    assert planrun("run", "p.yaml", cwd=tmp_path).code == 0
    assert state_digest(tmp_path) != digests[0]  # a changed file: a new digest


def test_a_hit_does_not_dump_the_plan_again_for_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest in `run.started` is kept with the entry: a hit does not pay for a dump of the
    whole plan (a 1,000-step plan's dump costs more than its load)."""
    from planrun.plan import cache
    from planrun.plan.definition import Plan
    from planrun.run.runopen import plan_digest

    (tmp_path / "p.yaml").write_text(DIGESTED)
    missed = cache.check_plan_file(str(tmp_path / "p.yaml"), cwd=str(tmp_path))
    assert missed.plan is not None and len(entries(tmp_path)) == 1
    expected = plan_digest(missed.plan)

    def no_dump(*args: object, **kwargs: object) -> None:
        raise AssertionError("the plan was dumped again")

    monkeypatch.setattr(Plan, "to_dict", no_dump)
    hit = cache.check_plan_file(str(tmp_path / "p.yaml"), cwd=str(tmp_path))
    assert hit.plan is not None and hit.plan is not missed.plan
    assert hit.digest() == expected  # what run.started reports (runopen takes it from here)


@pytest.mark.parametrize("part", ["digest", "plan"])
def test_a_tampered_entry_does_not_change_the_digest_a_run_reports(
    tmp_path: Path, part: str
) -> None:
    """The digest a run reports is the digest of the plan it runs, whatever an entry says:
    an edited stored digest is not believed, an edited stored plan gets its own digest."""
    (tmp_path / "p.yaml").write_text(DIGESTED)
    assert planrun("run", "p.yaml", cwd=tmp_path).code == 0
    [entry] = entries(tmp_path)
    doc = json.loads(entry.read_text())
    if part == "digest":
        doc["digest"] = ["0" * 16, *doc.get("digest", ["", ""])[1:]]
        expected = DIGESTED
    else:
        doc["plan"]["steps"][0]["args"]["value"] = 2
        expected = DIGESTED.replace("value: 1", "value: 2")
    entry.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
    r = planrun("run", "p.yaml", "--output", "json", cwd=tmp_path)
    assert r.code == 0, r
    assert [s["result"] for s in r.json["steps"]] == [1 if part == "digest" else 2]
    got = state_digest(tmp_path)
    (tmp_path / "p.yaml").write_text(expected)
    assert planrun("run", "p.yaml", cwd=tmp_path, env=NO_CACHE).code == 0
    assert got == state_digest(tmp_path)
