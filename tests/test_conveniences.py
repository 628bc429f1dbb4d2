"""Everyday conveniences: the default plan, targets, `list PLAN_FILE`, `init`, dotenv, titles."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, assert_no_traceback, planrun
from tests.testkit import YML_PLAN

TWO_STEPS = """
    steps:
      - id: build
        title: Build it
        tool: shell
        args: {cmd: "echo built > built.txt"}
      - id: test
        tool: shell
        depends_on: [build]
        args: {cmd: "echo tested > tested.txt"}
      - id: docs
        tool: shell
        args: {cmd: "echo docs > docs.txt"}
"""


# ---- default plan -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "resume", "validate", "graph", "status", "report"])
def test_no_default_plan_exits_2_naming_the_files(run, command):
    r = run(command)
    assert r.code == 2, r
    assert "planrun.yaml, planrun.yml or planrun.json" in r.err
    assert_no_traceback(r)


def test_run_uses_planrun_yaml_then_yml_then_json(run, write, tmp_path):
    write(
        "planrun.json", json.dumps({"steps": [{"id": "j", "tool": "echo", "args": {"value": 1}}]})
    )
    r = run("run", "--output", "json", "--no-state")
    assert r.code == 0 and [s["id"] for s in r.json["steps"]] == ["j"], r
    write("planrun.yml", "steps: [{id: y, tool: echo, args: {value: 1}}]\n")
    r = run("run", "--output", "json", "--no-state")
    assert [s["id"] for s in r.json["steps"]] == ["y"], r
    write("planrun.yaml", "steps: [{id: a, tool: echo, args: {value: 1}}]\n")
    r = run("run", "--output", "json", "--no-state")
    assert [s["id"] for s in r.json["steps"]] == ["a"], r


def test_default_plan_for_validate_graph_status_resume(run, write):
    write("planrun.yaml", TWO_STEPS)
    assert run("validate").code == 0
    g = run("graph", "--format", "json")
    assert g.code == 0 and [n["id"] for n in g.json["nodes"]] == ["build", "test", "docs"], g
    assert run("status").code == 4  # no run yet: a state error, not a usage error
    assert run("run").code == 0
    s = run("status", "--output", "json")
    assert s.code == 0 and s.json["status"] == "succeeded", s
    r = run("resume")
    assert r.code == 0 and "kept from the previous run" in r.err, r


def test_dash_C_finds_the_default_plan_there(run, write, tmp_path):
    write("proj/planrun.yaml", TWO_STEPS)
    r = run("-C", "proj", "run", "docs")
    assert r.code == 0, r
    assert (tmp_path / "proj" / "docs.txt").exists()
    assert not (tmp_path / "proj" / "built.txt").exists()


# ---- targets ----------------------------------------------------------------------------------


def test_targets_of_the_default_plan_run_them_and_their_dependencies(run, write, tmp_path):
    write("planrun.yaml", TWO_STEPS)
    r = run("run", "test", "--output", "json")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["build", "test"]
    assert (tmp_path / "tested.txt").exists() and not (tmp_path / "docs.txt").exists()


def test_targets_after_an_explicit_plan(run, write, tmp_path):
    write("ci.yaml", TWO_STEPS)
    r = run("run", "ci.yaml", "docs", "build", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert sorted(s["id"] for s in r.json["steps"]) == ["build", "docs"]


def test_a_missing_plan_named_by_its_extension_is_a_missing_plan(run, write):
    write("planrun.yaml", TWO_STEPS)
    r = run("run", "other.yaml")
    assert r.code == 2 and "plan file not found: other.yaml" in r.err, r


def test_unknown_target_exits_2_with_a_hint(run, write, tmp_path):
    write("planrun.yaml", TWO_STEPS)
    r = run("run", "tset")
    assert r.code == 2, r
    assert "no step 'tset'" in r.err and "did you mean 'test'?" in r.err
    assert not (tmp_path / "built.txt").exists()  # nothing ran
    assert_no_traceback(r)


def test_a_directory_named_like_a_step_is_still_a_target(run, write, tmp_path):
    write("planrun.yaml", TWO_STEPS)
    (tmp_path / "docs").mkdir()
    r = run("run", "docs", "--no-state")
    assert r.code == 0, r
    assert (tmp_path / "docs.txt").exists() and not (tmp_path / "built.txt").exists()


# ---- list PLAN_FILE ---------------------------------------------------------------------------


def test_list_plan_file_shows_steps(run, write):
    write(
        "ci.yaml",
        """
        title: CI
        steps:
          - {id: read, tool: echo, args: {value: 1}, result_variable: x}
          - {id: use, title: Use it, tool: echo, args: {value: "${x}"}}
          - {id: last, tool: shell, args: {cmd: "true"}, depends_on: [use]}
        """,
    )
    r = run("list", "ci.yaml")
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0].startswith("ci — CI (3 steps")
    assert lines[2].split() == ["use", "Use", "it", "[echo]", "after:", "read"]
    assert lines[3].split() == ["last", "[shell]", "after:", "use"]
    j = run("list", "ci.yaml", "--output", "json")
    assert j.json["steps"] == [
        {"id": "read", "title": "read", "description": None, "tool": "echo", "depends_on": []},
        {
            "id": "use",
            "title": "Use it",
            "description": None,
            "tool": "echo",
            "depends_on": ["read"],
        },
        {
            "id": "last",
            "title": "last",
            "description": None,
            "tool": "shell",
            "depends_on": ["use"],
        },
    ]


def test_list_without_plans_dir_lists_the_default_plan(run, write):
    write("planrun.yaml", TWO_STEPS)
    r = run("list", "--output", "json")
    assert r.code == 0 and [s["id"] for s in r.json["steps"]] == ["build", "test", "docs"], r


def test_list_with_nothing_to_list_says_so(run):
    r = run("list")
    assert r.code == 2 and "nothing to list" in r.err and "planrun.yaml" in r.err, r
    r = run("list", "nope.yaml")
    assert r.code == 2 and "no such plan file or directory: nope.yaml" in r.err, r


def test_list_directory_still_lists_plans(run, write):
    write("plans/a.yaml", TWO_STEPS)
    write("planrun.yaml", TWO_STEPS)
    r = run("list", "--output", "json")  # ./plans wins, as before
    assert r.code == 0 and r.json[0]["name"] == "a", r


def test_list_invalid_plan_exits_3(run, write):
    write("bad.yaml", "steps: [{id: a, tool: echo, depends_on: [nope]}]\n")
    r = run("list", "bad.yaml")
    assert r.code == 3 and "bad.yaml:1:" in r.out, r


# ---- init -------------------------------------------------------------------------------------


def test_init_writes_a_commented_plan_that_validates_and_runs(run, tmp_path):
    r = run("init")
    assert r.code == 0, r
    text = (tmp_path / "planrun.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert text.count("\n#") >= 5  # commented
    assert run("validate").code == 0
    r = run("run", "--output", "json")
    assert r.code == 0 and r.json["status"] == "succeeded", r


def test_init_starter_is_written_the_short_way_and_does_what_its_comments_say(run, tmp_path):
    assert run("init").code == 0
    text = (tmp_path / "planrun.yaml").read_text()
    assert "tool: shell" not in text and "cmd:" not in text  # `run:`, not the long form
    # `planrun run` runs the `default` target and what it depends on; publish asks, so it
    # is not among them.
    r = run("run", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s["status"] for s in r.json["steps"]}
    assert steps == {s: "succeeded" for s in ("hello", "lint", "test", "package")}, r
    assert (tmp_path / "dist/package-0.1.0.txt").read_text() == "packaging version 0.1.0\n"
    # Nothing changed: the package comes from the cache.
    r = run("run", "--output", "json")
    assert {s["id"]: s["status"] for s in r.json["steps"]}["package"] == "cached", r
    # A param from the command line names the output; words after -- reach the tests.
    assert run("run", "--var", "version=1.10").code == 0
    assert (tmp_path / "dist/package-1.10.txt").is_file()
    r = run("run", "test", "--output", "json", "--", "-k", "fast")
    assert r.code == 0 and "-k fast" in r.json["steps"][-1]["result"]["stdout"], r
    # publish asks its question: with no terminal to ask at, the run is blocked.
    r = run("run", "publish", "--output", "json")
    assert r.code == 5 and r.json["status"] == "blocked", r
    assert run("run", "publish", "--yes").code == 0


def test_init_writes_the_schema_its_first_line_names(run, tmp_path):
    """The editor's schema is a file beside the plan, not a URL: it works offline."""
    (tmp_path / "sub").mkdir()
    r = run("init", "sub/ci.yaml")
    assert r.code == 0 and "plan.schema.json" in r.err, r
    first = (tmp_path / "sub/ci.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./plan.schema.json"
    written = (tmp_path / "sub/plan.schema.json").read_text()
    assert written == run("schema").out
    jsonschema = pytest.importorskip("jsonschema")
    plan = planrun("validate", "--format", "json", "sub/ci.yaml", cwd=tmp_path)
    assert plan.code == 0, plan
    import yaml  # the plan as data: the schema accepts what validate accepts

    data = yaml.safe_load((tmp_path / "sub/ci.yaml").read_text())
    jsonschema.Draft202012Validator(json.loads(written)).validate(data)
    assert sorted(os.listdir(tmp_path / "sub")) == ["ci.yaml", "plan.schema.json"]


def test_init_keeps_a_schema_file_that_is_there(run, tmp_path):
    (tmp_path / "plan.schema.json").write_text("mine\n")
    r = run("init")
    assert r.code == 0 and "kept" in r.err, r
    assert (tmp_path / "plan.schema.json").read_text() == "mine\n"
    (tmp_path / "d").mkdir()
    os.symlink(tmp_path / "elsewhere.json", tmp_path / "d/plan.schema.json")  # dangling
    assert run("init", "d/p.yaml").code == 0
    assert not (tmp_path / "elsewhere.json").exists()
    assert run("init", "p.json").code == 0  # JSON has no first-line comment: no schema file
    assert sorted(os.listdir(tmp_path)) == ["d", "p.json", "plan.schema.json", "planrun.yaml"]


def test_init_that_cannot_write_the_schema_keeps_the_plan_and_leaves_no_part(tmp_path):
    """A full disk after the plan: the plan stands, no cut schema file, one warning line."""
    import subprocess
    import sys

    def capped() -> None:  # in the child: room for the plan (2 kB), not the schema (13 kB)
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    proc = subprocess.run(
        [sys.executable, "-m", "planrun", "init"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=capped,
    )
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(tmp_path) == ["planrun.yaml"]
    warning = [line for line in proc.stderr.splitlines() if "plan.schema.json" in line]
    assert len(warning) == 1 and "planrun schema > plan.schema.json" in warning[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_init_never_overwrites(run, tmp_path):
    (tmp_path / "planrun.yaml").write_text("mine\n")
    r = run("init")
    assert r.code == 2 and "already exists" in r.err, r
    assert (tmp_path / "planrun.yaml").read_text() == "mine\n"
    os.symlink(tmp_path / "elsewhere.yaml", tmp_path / "link.yaml")  # dangling
    r = run("init", "link.yaml")
    assert r.code == 2 and not (tmp_path / "elsewhere.yaml").exists(), r


def test_init_other_names(run, tmp_path):
    assert run("init", "ci.yml").code == 0
    assert run("validate", "ci.yml").code == 0
    assert run("init", "ci.json").code == 0
    json.loads((tmp_path / "ci.json").read_text())
    assert run("validate", "ci.json").code == 0
    r = run("init", "ci.txt")
    assert r.code == 2 and not (tmp_path / "ci.txt").exists(), r
    r = run("init", "no/such/dir/plan.yaml")
    assert r.code == 2 and "cannot write no/such/dir/plan.yaml" in r.err, r


def _file_size_capped(limit: int) -> None:
    """In the child: files it writes may grow to `limit` bytes, then a write fails (EFBIG,
    with SIGXFSZ ignored), as on a full disk."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("limit", [0, 100])  # not a byte written, or a part of the plan
def test_init_that_cannot_write_the_whole_plan_leaves_nothing(run, tmp_path, limit):
    proc = subprocess.run(
        [sys.executable, "-m", "planrun", "init"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=lambda: _file_size_capped(limit),
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("planrun: error: cannot write planrun.yaml: "), proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert os.listdir(tmp_path) == []  # no empty or cut plan, no temporary file
    r = run("init")  # with room again, it just works
    assert r.code == 0, r
    assert run("validate").code == 0


# ---- titles -----------------------------------------------------------------------------------


def test_rendered_titles_in_the_plain_log(run, write):
    write(
        "planrun.yaml",
        """
        variables: {who: world}
        steps:
          - {id: pick, tool: echo, args: {value: v2}, result_variable: ver}
          - {id: greet, title: "Greet ${who} at ${ver}", tool: echo, args: {value: "${ver}"}}
          - {id: plain, title: Plain title, tool: shell, args: {cmd: "exit 3"}}
        """,
    )
    r = run("run", "--keep-going")
    assert r.code == 1, r
    assert "greet (Greet world at v2) started [echo]" in r.err
    assert "greet (Greet world at v2) succeeded" in r.err
    assert "plain (Plain title) failed" in r.err
    assert "${" not in r.err


# ---- the default-plan example -----------------------------------------------------------------


@pytest.mark.slow  # ~3.4 s: runs the example plan end to end
def test_default_plan_example(tmp_path):
    example = ROOT / "examples/default-plan/planrun.yaml"
    work = tmp_path / "default-plan"
    work.mkdir()
    (work / "planrun.yaml").write_text(example.read_text())
    r = planrun("list", cwd=work)
    assert r.code == 0 and "unit" in r.out, r
    r = planrun("run", "unit", "--output", "json", cwd=work)
    assert r.code == 0 and [s["id"] for s in r.json["steps"]] == ["setup", "unit"], r
    r = planrun("run", "--var", "broken=true", "--output", "json", cwd=work)
    assert r.code == 1, r
    status = {s["id"]: s["status"] for s in r.json["steps"]}
    assert status["docs"] == "failed" and status["package"] == "skipped"
    assert status["unit"] == "succeeded"
    r = planrun("report", "-o", "report.html", cwd=work)
    assert r.code == 0 and "docs/index.md:3: broken link" in (work / "report.html").read_text()


def test_live_view_shows_titles_of_running_steps():
    import io

    from rich.console import Console

    from planrun.reporters.console import ConsoleReporter
    from tests.testkit import Event

    console = ConsoleReporter(io.StringIO(), live=True, color=False)
    steps = [
        {"id": "unit", "title": "Unit tests", "tool": "shell", "depends_on": []},
        {"id": "pkg", "title": "Package ${v}", "tool": "shell", "depends_on": []},
    ]
    console.handle(Event("run.started", "p", None, {"steps": steps}, ts=1.0))
    console.handle(
        Event("step.started", "p", "unit", {"attempt": 1, "title": "Unit tests"}, ts=1.1)
    )
    console.handle(
        Event("step.started", "p", "pkg", {"attempt": 1, "title": "Package 1.2"}, ts=1.2)
    )
    render = Console(file=io.StringIO(), force_terminal=True, width=100)
    render.print(console._render(30))
    view = render.file.getvalue()  # type: ignore[attr-defined]
    console.close()
    assert "Unit tests" in view and "Package 1.2" in view and "${v}" not in view


def test_list_plan_file_json_document(run, write):
    write(
        "ci.json",
        json.dumps(
            {
                "title": "CI",
                "steps": [
                    {"id": "read", "tool": "echo", "args": {"value": 1}, "result_variable": "x"},
                    {"id": "fan", "tool": "echo", "foreach": "${[x]}", "args": {"value": 1}},
                ],
            }
        ),
    )
    r = run("list", "ci.json", "--output", "json")
    assert r.code == 0, r
    assert r.json == {
        "plan": "ci",
        "file": "ci.json",
        "title": "CI",
        "steps": [
            {"id": "read", "title": "read", "description": None, "tool": "echo", "depends_on": []},
            {
                "id": "fan",
                "title": "fan",
                "description": None,
                "tool": "echo",
                "depends_on": ["read"],
            },
        ],
    }
    text = run("list", "ci.json").out.splitlines()
    assert text[2].split() == ["fan", "[echo]", "after:", "read"], text


# ---- init ---------------------------------------------------------------------------------


def test_init_under_dash_C_and_never_over_a_directory(run, tmp_path):
    (tmp_path / "proj").mkdir()
    r = run("-C", "proj", "init")
    assert r.code == 0, r
    first = (tmp_path / "proj/planrun.yaml").read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    assert run("-C", "proj", "run", "--output", "json").code == 0
    (tmp_path / "d.yaml").mkdir()
    r = run("init", "d.yaml")
    assert r.code == 2 and len(r.err.splitlines()) == 1, r
    assert_no_traceback(r)


def test_init_without_a_name_leaves_another_default_plan_in_charge(run, write, tmp_path):
    # planrun.yaml would take the place of an existing planrun.yml as the default plan
    write("planrun.yml", YML_PLAN)
    r = run("init")
    assert r.code == 2 and "planrun.yml" in r.err, r
    assert not (tmp_path / "planrun.yaml").exists()
    assert run("init", "other.yaml").code == 0


def test_list_takes_the_variables_a_plan_reads_as_graph_does(run, write, tmp_path):
    write("needs.yaml", "steps: [{id: build, tool: shell, args: {cmd: 'echo ${version}'}}]\n")
    r = run("list", "needs.yaml")
    assert r.code == 3 and "undefined name 'version'" in r.out, r
    r = run("list", "needs.yaml", "--var", "version=1", "--output", "json")
    assert r.code == 0 and [s["id"] for s in r.json["steps"]] == ["build"], r
    write("v.yaml", "version: 2\n")
    r = run("list", "needs.yaml", "--vars-file", "v.yaml")
    assert r.code == 0 and "build" in r.out, r
