"""`planrun show [PLAN] ID`: one step in full, as the dry run would run it."""

from __future__ import annotations

import json

from tests.conftest import planrun

PLAN = """
    variables: {version: "1.0", files: [a.py, b.py]}
    secrets: [token]
    steps:
      - id: compile
        title: "Byte-compile ${item}"
        foreach: "${files}"
        tool: shell
        args: {cmd: "echo ${item}"}
        sources: ["${item}"]
      - id: upload
        title: "Upload ${version}"
        description: "Ships ${version} to the index"
        tool: shell
        args: {cmd: "echo ${version} ${token}"}
        depends_on: [compile]
        sources: ["a.py"]
        outputs: ["dist/${version}.txt"]
        when: "${version != '0'}"
        approval: true
        result_variable: out
      - id: later
        tool: echo
        args: {value: "${out}"}
"""


def _plan(write, tmp_path):
    write("planrun.yaml", PLAN)
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 1\n")


def test_show_one_step_in_full(run, write, tmp_path):
    _plan(write, tmp_path)
    r = run("show", "upload", "--var", "version=2.0", "--var", "token=s3cret", "--output", "json")
    assert r.code == 0, r
    doc = r.json
    assert doc["id"] == "upload" and doc["plan"] == "planrun"
    assert doc["title"] == "Upload 2.0"
    assert doc["description"] == "Ships 2.0 to the index"
    assert doc["tool"] == "shell"
    assert doc["args"]["cmd"].startswith("echo 2.0 ")
    assert "s3cret" not in r.out  # secrets masked, as the dry run masks them
    assert doc["depends_on"] == ["compile"]
    assert doc["sources"] == ["a.py"] and doc["outputs"] == ["dist/2.0.txt"]
    assert doc["cache"]["status"] == "miss" and doc["cache"]["reason"]
    assert doc["approval"] is True
    assert doc["when"] == "${version != '0'}"
    text = run("show", "planrun.yaml", "upload", "--var", "token=zz9secret")
    assert text.code == 0, text
    for part in (
        "Upload 1.0",
        "Ships 1.0 to the index",
        "shell",
        "echo 1.0",
        "compile",
        "a.py",
        "dist/1.0.txt",
        "miss (",
        "approval",
        "${version != '0'}",
    ):
        assert part in text.out, (part, text)


def test_show_a_foreach_step_lists_its_instances(run, write, tmp_path):
    _plan(write, tmp_path)
    r = run("show", "compile", "--var", "token=zz9secret", "--output", "json")
    assert r.code == 0, r
    assert r.json["title"] == "Byte-compile <item>"  # no element: a placeholder
    assert [(i["id"], i["title"]) for i in r.json["instances"]] == [
        ("compile[0]", "Byte-compile a.py"),
        ("compile[1]", "Byte-compile b.py"),
    ]
    assert r.json["instances"][1]["args"] == {"cmd": "echo b.py"}


def test_show_leaves_what_is_not_known_yet_unresolved(run, write, tmp_path):
    _plan(write, tmp_path)
    r = run("show", "later", "--var", "token=zz9secret", "--output", "json")
    assert r.code == 0, r
    assert r.json["args"] == {"value": "<upload result>"}
    assert r.json["description"] is None


def test_show_an_unknown_step_exits_2_with_a_hint(run, write, tmp_path):
    _plan(write, tmp_path)
    r = run("show", "uplod", "--var", "token=zz9secret")
    assert r.code == 2, r
    assert "uplod" in r.err and "did you mean 'upload'" in r.err
    assert "Traceback" not in r.err
    assert run("show").code == 2
    assert run("show", "nope.yaml", "upload").code == 2


def test_show_takes_an_alias_and_shows_the_step_under_its_id(run, write):
    write(
        "planrun.yaml",
        """
        steps:
          - {id: test, aliases: [t], run: echo test, description: Unit tests}
        """,
    )
    r = run("show", "t", "--output", "json")
    assert r.code == 0, r
    assert r.json["id"] == "test" and r.json["description"] == "Unit tests"
    text = run("show", "t")
    assert text.code == 0, text
    assert text.out.startswith("test\n")


def test_show_without_a_required_param_keeps_a_placeholder_naming_it(run, write):
    write(
        "planrun.yaml",
        """
        params:
          version: {required: true}
        steps:
          - {id: b, title: "Build ${version}", run: "echo ${version}"}
        """,
    )
    r = run("show", "b", "--output", "json")
    assert r.code == 0, r
    assert r.json["title"] == "Build ${version}"
    shown = json.dumps(r.json["args"])
    assert "<--var version>" in shown
    assert "error" not in shown


def test_show_finds_the_default_plan_in_a_parent_directory_as_list_does(run, write, tmp_path):
    write(
        "planrun.yaml",
        """
        steps:
          - {id: where, run: "echo ${invocation_dir}"}
        """,
    )
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    (below / "vars.yaml").write_text("x: 1\n")
    r = planrun("show", "where", "--vars-file", "vars.yaml", "--output", "json", cwd=below)
    assert r.code == 0, r
    assert r.json["id"] == "where"
    assert str(below) in json.dumps(r.json["args"]), r.json


def test_show_a_matrix_step_lists_its_instances_and_a_run_step_its_script(run, write):
    write(
        "planrun.yaml",
        """
        steps:
          - id: smoke
            title: "Smoke ${matrix.py}"
            matrix: {py: ["3.11", "3.12"]}
            run: echo ${matrix.py}
        """,
    )
    r = run("show", "smoke", "--output", "json")
    assert r.code == 0, r
    assert r.json["title"] == "Smoke <matrix.py>"
    assert r.json["args"] == {"run": "echo ${matrix.py}"}
    assert r.json["matrix"] == {"py": ["3.11", "3.12"]}
    assert [(i["id"], i["title"], i["args"]) for i in r.json["instances"]] == [
        ("smoke[0]", "Smoke 3.11", {"run": "echo 3.11"}),
        ("smoke[1]", "Smoke 3.12", {"run": "echo 3.12"}),
    ]
    text = run("show", "smoke").out
    assert "matrix:" in text and "smoke[1]  Smoke 3.12" in text, text


def test_show_shows_an_internal_step_that_list_all_lists(run, write):
    # `internal` keeps a step from being a target (run refuses it); `show` runs nothing, and
    # the step is named among a listed step's dependencies, so it is shown like any other.
    write(
        "planrun.yaml",
        """
        steps:
          - {id: setup, internal: true, aliases: [su], run: mkdir -p build, description: Dirs}
          - {id: build, depends_on: [setup], run: echo build}
        """,
    )
    r = run("show", "setup", "--output", "json")
    assert r.code == 0, r
    assert r.json["id"] == "setup" and r.json["description"] == "Dirs"
    assert r.json["args"] == {"run": "mkdir -p build"}
    assert run("show", "su").out.startswith("setup\n")
    assert run("run", "setup").code == 2
