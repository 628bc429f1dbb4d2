"""Plan variables holding `${…}` are evaluated once at start; vars files say what they are."""

from __future__ import annotations

from tests.conftest import assert_no_traceback

PLAN = """
variables:
  tok: "${env.PYPI_TOKEN}"
  url: "https://pypi.example/${tok}"
  n: "${1 + 1}"
  literal: "$${HOME}"
steps:
  - {id: show, tool: echo, args: {value: ["${tok}", "${url}", "${n}", "${literal}"]}}
"""


def test_plan_variables_are_evaluated_at_start(run, write):
    write("plan.yaml", PLAN)
    r = run("run", "plan.yaml", "--output", "json", env={"PYPI_TOKEN": "abc"})
    assert r.code == 0, r
    assert r.json["steps"][0]["result"] == ["abc", "https://pypi.example/abc", 2, "${HOME}"]
    assert r.json["variables"]["url"] == "https://pypi.example/abc"


def test_cli_values_override_and_are_seen_by_later_variables(run, write):
    write("plan.yaml", PLAN)
    # tok from --var: not evaluated (the env variable may be missing), and url reads it
    r = run("run", "plan.yaml", "--output", "json", "--var", "tok=xyz", env={"PYPI_TOKEN": ""})
    assert r.code == 0, r
    assert r.json["steps"][0]["result"][:2] == ["xyz", "https://pypi.example/xyz"]
    d = run("run", "plan.yaml", "--dry-run", "--output", "json", env={"PYPI_TOKEN": "abc"})
    assert d.json["steps"][0]["args"]["value"][1] == "https://pypi.example/abc", d


def test_a_secret_from_env_is_masked(run, write):
    write("plan.yaml", "secrets: [tok]\n" + PLAN)
    r = run("run", "plan.yaml", "--output", "json", env={"PYPI_TOKEN": "s3cr3t-token"})
    assert r.code == 0, r
    assert "s3cr3t-token" not in r.out + r.err
    assert r.json["steps"][0]["result"][0] == "***"


def test_a_missing_env_variable_stops_the_run_before_any_step(run, write, tmp_path):
    write(
        "plan.yaml",
        PLAN.replace("steps:", "steps:\n  - {id: first, tool: shell, args: {cmd: 'touch ran'}}"),
    )
    r = run("run", "plan.yaml", env={"PYPI_TOKEN": ""})
    assert r.code == 0, r  # set but empty is a value
    (tmp_path / "ran").unlink()
    r = run("run", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:8: error: variable 'tok': undefined name 'env.PYPI_TOKEN'"
    ], r
    assert not (tmp_path / "ran").exists()
    assert_no_traceback(r)


def test_variables_read_only_env_and_the_variables_before_them(run, write):
    write(
        "plan.yaml",
        """
        variables:
          a: "${b}"
          b: 1
          c: "${c}"
          d: "${got}"
          e: "${steps.s.status}"
          f: "${nope}"
        steps:
          - {id: s, tool: echo, args: {value: 1}, result_variable: got}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:6: error: variable 'a': reads 'b', which is defined after it "
        "(a variable reads env, --var/--vars-file values and the variables before it)",
        "plan.yaml:4:6: error: variable 'c': reads itself",
        "plan.yaml:5:6: error: variable 'd': reads the result variable 'got': variables are "
        "evaluated before any step runs",
        "plan.yaml:6:6: error: variable 'e': reads 'steps': variables are evaluated before "
        "any step runs",
        "plan.yaml:7:6: error: variable 'f': undefined name 'nope'",
    ]
    ok = run("validate", "plan.yaml", "--var", "nope=1", "--var", "a=1")
    assert "variable 'f'" not in ok.out and "variable 'a'" not in ok.out, ok


# ---- --vars-file -------------------------------------------------------------------------


def test_a_comment_only_vars_file_sets_nothing(run, write):
    write(
        "plan.yaml", "variables: {x: 1}\nsteps:\n  - {id: a, tool: echo, args: {value: '${x}'}}\n"
    )
    write("vars.yaml", "# nothing here yet\n\n   # still nothing\n")
    r = run("run", "plan.yaml", "--vars-file", "vars.yaml", "--output", "json")
    assert r.code == 0, r
    assert r.json["steps"][0]["result"] == 1
    write("vars2.yaml", "---\n# only a document marker\n")
    r = run("validate", "plan.yaml", "--vars-file", "vars2.yaml")
    assert r.code == 0, r


def test_vars_file_errors_talk_about_the_vars_file(run, write):
    write("plan.yaml", "steps:\n  - {id: a, tool: echo}\n")
    write("list.yaml", "- a\n- b\n")
    r = run("run", "plan.yaml", "--vars-file", "list.yaml")
    assert r.code == 2, r
    assert r.err == (
        "planrun: error: vars file list.yaml:1:1: a vars file must be a mapping at the top "
        "level, got a list\n"
    ), r
    write("bad.yaml", "a: [1\n")
    r = run("validate", "plan.yaml", "--vars-file", "bad.yaml")
    assert r.code == 2, r
    assert r.err.startswith("planrun: error: vars file bad.yaml:"), r
    write("bin.yaml", "")
    (write("bin.yaml", "x").parent / "bin.yaml").write_bytes(b"a: \xff\n")
    r = run("run", "plan.yaml", "--vars-file", "bin.yaml")
    assert r.code == 2, r
    assert "vars file" in r.err and "plan file" not in r.err, r


def test_status_report_and_graph_of_a_plan_that_needs_command_line_variables(run, write):
    # `status` and `report` take no --var: a plan whose expressions read a --var name is still found under
    # its own name (not the file stem), as `list` finds it.
    write(
        "plans/q.yaml",
        """
        name: release
        steps: [{id: a, tool: echo, args: {value: "${version}"}}]
        """,
    )
    assert run("run", "plans/q.yaml", "--var", "version=1.2", "-q").code == 0
    s = run("status", "plans/q.yaml", "--output", "json")
    assert s.code == 0, s
    assert (s.json["plan"], s.json["status"]) == ("release", "succeeded")
    assert s.json["steps"][0]["result"] == 1.2
    # `graph` checks the plan like `validate`: it takes the variables the plan needs
    g = run("graph", "plans/q.yaml", "--format", "json", "--var", "version=1")
    assert g.code == 0 and g.json["plan"] == "release", g
    g = run("graph", "plans/q.yaml", "--format", "json")
    assert g.code == 3 and "undefined name 'version'" in g.out, g
    page = run("report", "plans/q.yaml", "-o", "r.html")
    assert page.code == 0, page
    listed = run("list", "--output", "json")
    assert [(p["name"], p["last_status"]) for p in listed.json] == [("release", "succeeded")]
