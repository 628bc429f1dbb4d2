"""Finding the default plan: in the working directory, then in each parent directory.

Where it is found becomes the working directory (state, cache and the plan's relative paths are
there), and `${invocation_dir}` is the directory planrun was started in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import planrun
from tests.testkit import YML_PLAN

PLAN = """\
name: demo
steps:
  - id: where
    tool: shell
    args: {cmd: "printf '%s' ${invocation_dir} > where.txt; pwd > pwd.txt"}
    sources: ["src/a.txt"]
  - id: other
    tool: echo
    args: {value: 1}
"""


def project(tmp_path: Path) -> Path:
    """A project with planrun.yaml at its root and a nested subdirectory a/b/c."""
    (tmp_path / "planrun.yaml").write_text(PLAN)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("1\n")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    return deep


def plan_above(directory: Path) -> bool:
    """Whether some parent of `directory` holds a default plan (tests of 'none found' skip)."""
    for parent in directory.resolve().parents:
        for name in ("planrun.yaml", "planrun.yml", "planrun.json"):
            if (parent / name).exists():
                return True
    return False


def test_run_in_a_subdirectory_runs_the_plan_above_in_its_directory(tmp_path):
    deep = project(tmp_path)
    r = planrun("run", cwd=deep)
    assert r.code == 0, r
    # the plan's relative paths and the step's working directory: the plan's directory
    assert (tmp_path / "pwd.txt").read_text().strip() == str(tmp_path.resolve())
    assert (tmp_path / "where.txt").read_text() == str(deep.resolve())
    assert not (deep / "where.txt").exists()
    # state and stat records land beside the plan, not where planrun was started
    assert (tmp_path / ".planrun" / "state").is_dir()
    assert not (deep / ".planrun").exists()
    again = planrun("run", "where", cwd=deep)
    assert again.code == 0 and "where cached" in again.err, again
    # started elsewhere, the step reads another invocation_dir: it runs again
    elsewhere = planrun("run", "where", cwd=deep.parent)
    assert elsewhere.code == 0 and "where succeeded" in elsewhere.err, elsewhere


def test_targets_and_every_default_plan_command_work_from_a_subdirectory(tmp_path):
    deep = project(tmp_path)
    assert planrun("run", "other", cwd=deep).code == 0
    assert planrun("validate", cwd=deep).code == 0
    graph = planrun("graph", "--format", "json", cwd=deep)
    assert graph.code == 0 and "where" in graph.out, graph
    status = planrun("status", "--output", "json", cwd=deep)
    assert status.code == 0 and status.json["plan"] == "demo", status
    assert planrun("resume", cwd=deep).code == 0
    report = planrun("report", "-o", "-", cwd=deep)
    assert report.code == 0 and "<html" in report.out.lower(), report


def test_the_first_plan_up_the_tree_wins(tmp_path):
    deep = project(tmp_path)
    (tmp_path / "a" / "planrun.yml").write_text(
        "name: inner\nsteps: [{id: inner, tool: shell, args: {cmd: 'pwd > here.txt'}}]\n"
    )
    r = planrun("run", cwd=deep)
    assert r.code == 0, r
    assert (tmp_path / "a" / "here.txt").read_text().strip() == str((tmp_path / "a").resolve())
    assert not (tmp_path / "where.txt").exists()


def test_a_plan_named_on_the_command_line_is_not_looked_up(tmp_path):
    deep = project(tmp_path)
    r = planrun("run", "planrun.yaml", cwd=deep)
    assert r.code == 2 and "planrun.yaml" in r.err, r


def test_invocation_dir_without_discovery_is_the_working_directory(tmp_path):
    project(tmp_path)
    assert planrun("run", cwd=tmp_path).code == 0
    assert (tmp_path / "where.txt").read_text() == str(tmp_path.resolve())


def test_with_dash_C_the_search_starts_in_that_directory(tmp_path):
    deep = project(tmp_path)
    r = planrun("-C", "a/b/c", "run", cwd=tmp_path)
    assert r.code == 0, r
    assert (tmp_path / "where.txt").read_text() == str(deep.resolve())


def test_invocation_dir_is_a_known_name_for_validation_and_plan_variables(tmp_path):
    deep = project(tmp_path)
    (tmp_path / "planrun.yaml").write_text(
        "variables: {out: '${invocation_dir}/x'}\n"
        "steps: [{id: s, tool: shell, args: {cmd: 'printf %s ${out} > out.txt'}}]\n"
    )
    assert planrun("validate", cwd=deep).code == 0
    assert planrun("run", cwd=deep).code == 0
    assert (tmp_path / "out.txt").read_text() == f"{deep.resolve()}/x"


def test_a_sub_plan_reads_invocation_dir_as_it_would_on_its_own(tmp_path):
    # A sub-plan obeys the rules of a plan run on its own: started from the same directory,
    # it knows the same `invocation_dir` (validation and run), unless its `variables` set it.
    deep = project(tmp_path)
    (tmp_path / "child.yaml").write_text(
        "steps: [{id: s, tool: shell, args: {cmd: 'printf %s ${invocation_dir} > ${to}'}}]\n"
    )
    (tmp_path / "planrun.yaml").write_text(
        "steps:\n"
        "  - {id: a, tool: plan, args: {path: child.yaml, variables: {to: a.txt}}}\n"
        "  - {id: b, tool: plan, args: {path: child.yaml,"
        " variables: {to: b.txt, invocation_dir: given}}}\n"
    )
    assert planrun("validate", "child.yaml", "--var", "to=x", cwd=tmp_path).code == 0
    r = planrun("run", cwd=deep)
    assert r.code == 0, r
    assert (tmp_path / "a.txt").read_text() == str(deep.resolve())
    assert (tmp_path / "b.txt").read_text() == "given"


def test_paths_given_on_the_command_line_stay_relative_to_where_planrun_started(tmp_path):
    deep = project(tmp_path)
    (deep / "vars.yaml").write_text("who: here\n")
    (tmp_path / "planrun.yaml").write_text(
        "steps: [{id: s, tool: shell, args: {cmd: 'printf %s ${who} > who.txt'}}]\n"
    )
    r = planrun("run", "--vars-file", "vars.yaml", "--junit", "j.xml", cwd=deep)
    assert r.code == 0, r
    assert (tmp_path / "who.txt").read_text() == "here"
    assert (deep / "j.xml").exists() and not (tmp_path / "j.xml").exists()


def test_list_without_argument_lists_plans_of_the_working_directory(tmp_path):
    deep = project(tmp_path)
    (deep / "plans").mkdir()
    (deep / "plans" / "nightly.yaml").write_text("steps: [{id: n, tool: echo, args: {value: 1}}]\n")
    r = planrun("list", "--output", "json", cwd=deep)
    assert r.code == 0, r
    assert [row["name"] for row in r.json] == ["nightly"]
    # without ./plans, the steps of the plan found above
    r = planrun("list", "--output", "json", cwd=deep.parent)
    assert r.code == 0 and [s["id"] for s in r.json["steps"]] == ["where", "other"], r


def test_hostile_directory_names_on_the_way(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    name = "a b\n$(touch pwned)'\"; x"
    deep = tmp_path / name / "-dash" / "*"
    deep.mkdir(parents=True)
    r = planrun("run", "where", cwd=deep)
    assert r.code == 0, r
    assert (tmp_path / "where.txt").read_text() == str(deep.resolve())
    assert not list(tmp_path.rglob("pwned"))


def test_an_undecodable_directory_name(tmp_path):
    (tmp_path / "planrun.yaml").write_text(PLAN)
    deep = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(deep)
    r = planrun("run", "where", cwd=os.fsdecode(deep))
    assert r.code == 0, r
    assert (tmp_path / "where.txt").read_bytes() == os.path.realpath(deep)


def test_no_plan_anywhere_up_the_tree_is_a_usage_error(tmp_path):
    if plan_above(tmp_path):
        pytest.skip("a parent of the test directory holds a default plan")
    r = planrun("run", cwd=tmp_path)
    assert r.code == 2 and "planrun init" in r.err, r
    assert "parent" in r.err, r


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_the_search_does_not_cross_a_directory_it_cannot_read(tmp_path):
    deep = project(tmp_path)
    locked = tmp_path / "a"
    locked.chmod(0o311)  # may be passed through (x), not read
    try:
        r = planrun("run", cwd=deep)
    finally:
        locked.chmod(0o755)
    assert r.code == 2, r


JSON_PLAN = json.dumps(
    {"name": "from-json", "steps": [{"id": "j", "tool": "echo", "args": {"value": 1}}]}
)


@pytest.mark.parametrize("command", ["validate", "graph", "status", "report", "resume"])
def test_every_command_takes_planrun_yml_before_planrun_json(run, write, tmp_path, command):
    write("planrun.yml", YML_PLAN)
    write("planrun.json", JSON_PLAN)
    assert run("run").code == 0
    (tmp_path / ".planrun/state/from-json.json").unlink(missing_ok=True)
    r = run(
        command, *{"graph": ["--format", "json"], "status": ["--output", "json"]}.get(command, [])
    )
    assert r.code == 0, r
    if command == "graph":
        assert [n["id"] for n in r.json["nodes"]] == ["y"]
    elif command == "status":
        assert r.json["plan"] == "from-yml"
    elif command == "report":
        assert "from-yml" in (tmp_path / "planrun-report.html").read_text()
    elif command == "resume":
        assert "y kept from the previous run" in r.err, r
    # planrun.yaml, once it exists, comes first
    write("planrun.yaml", "name: from-yaml\nsteps: [{id: a, tool: nope}]\n")
    r = run("validate")
    assert r.code == 3 and r.out.startswith("planrun.yaml:"), r


def test_a_target_without_any_default_plan_exits_2_naming_the_files(run, tmp_path):
    r = run("run", "build")
    assert r.code == 2, r
    assert "planrun.yaml, planrun.yml or planrun.json" in r.err and len(r.err.splitlines()) == 1
    assert not (tmp_path / ".planrun").exists()


def test_an_existing_file_without_a_plan_extension_is_the_plan(run, write, tmp_path):
    write("planrun.yaml", "steps: [{id: tasks, tool: shell, args: {cmd: 'touch from-default'}}]\n")
    write("tasks", "steps: [{id: other, tool: shell, args: {cmd: 'touch from-tasks'}}]\n")
    r = run("run", "tasks", "--no-state")
    assert r.code == 0, r
    assert (tmp_path / "from-tasks").exists() and not (tmp_path / "from-default").exists()


@pytest.mark.parametrize("name", ["other.yml", "other.json", "sub/other.yaml"])
def test_a_missing_plan_by_its_extension_is_a_usage_error(run, write, name):
    write("planrun.yaml", "steps: [{id: a, tool: echo, args: {value: 1}}]\n")
    r = run("run", name)
    assert r.code == 2 and f"plan file not found: {name}" in r.err, r
