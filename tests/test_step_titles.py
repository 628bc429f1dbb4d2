"""Titles and descriptions rendered with the variables known at that point, in every view:
`list`, the dry run, the console (cached and kept steps too), events, JUnit and the report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

PLAN = """
    variables: {version: "1.0", files: [a.py, b.py]}
    steps:
      - id: compile
        title: "Byte-compile ${item}"
        description: "Compiles ${item} for ${version}"
        foreach: "${files}"
        tool: shell
        args: {cmd: "echo ${item}"}
        sources: ["${item}"]
      - id: upload
        title: "Upload greet ${version} to ${env.REPO_URL}"
        description: "Ships ${version}"
        tool: echo
        args: {value: "${version}"}
        depends_on: [compile]
        result_variable: out
      - id: later
        title: "Use ${out}"
        tool: echo
        args: {value: "${out}"}
"""

REPO = {"REPO_URL": "https://repo.example"}


def _plan(write, tmp_path):
    write("planrun.yaml", PLAN)
    (tmp_path / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 1\n")


def _events(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_list_renders_titles_and_descriptions_with_the_variables(run, write, tmp_path):
    _plan(write, tmp_path)
    r = run("list", "--var", "version=2.0", env=REPO)
    assert r.code == 0, r
    assert "Upload greet 2.0 to https://repo.example" in r.out
    assert "Ships 2.0" in r.out
    assert "Byte-compile ${item}" in r.out  # no element yet: as written
    assert "Use ${out}" in r.out  # a result not known yet: as written
    j = run("list", "--output", "json", env=REPO)
    steps = {s["id"]: s for s in j.json["steps"]}
    assert steps["upload"]["title"] == "Upload greet 1.0 to https://repo.example"
    assert steps["upload"]["description"] == "Ships 1.0"
    assert steps["later"]["description"] is None
    (tmp_path / "v.yaml").write_text("version: '3.0'\n")
    f = run("list", "--vars-file", "v.yaml", "--output", "json", env=REPO)
    assert {s["id"]: s for s in f.json["steps"]}["upload"]["title"].startswith("Upload greet 3.0")


def test_dry_run_renders_titles_leaving_unknown_ones_as_written(run, write, tmp_path):
    _plan(write, tmp_path)
    r = run("run", "--dry-run", "--output", "json", env=REPO)
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["compile[0]"]["title"] == "Byte-compile a.py"
    assert steps["compile[1]"]["description"] == "Compiles b.py for 1.0"
    assert steps["upload"]["title"] == "Upload greet 1.0 to https://repo.example"
    assert steps["later"]["title"] == "Use ${out}"
    t = run("run", "--dry-run", env=REPO)
    assert "Ships 1.0" in t.out


def test_cached_steps_keep_their_rendered_titles_everywhere(run, write, tmp_path):
    _plan(write, tmp_path)
    first = run("run", "--events", "e1.jsonl", env=REPO)
    assert first.code == 0, first
    started = next(e for e in _events(tmp_path / "e1.jsonl") if e["event"] == "run.started")
    listed = {s["id"]: s["title"] for s in started["steps"]}
    assert listed["upload"] == "Upload greet 1.0 to https://repo.example"
    assert listed["later"] == "Use ${out}"  # not known when the run starts
    done = [e for e in _events(tmp_path / "e1.jsonl") if e["event"] == "step.succeeded"]
    assert {e["step"]: e["title"] for e in done}["later"] == "Use 1.0"

    second = run("run", "--events", "e2.jsonl", "--junit", "j.xml", env=REPO)
    assert second.code == 0, second
    assert "compile[0] (Byte-compile a.py) cached" in second.err
    cached = [e for e in _events(tmp_path / "e2.jsonl") if e["event"] == "step.cached"]
    assert {e["step"]: e["title"] for e in cached} == {
        "compile[0]": "Byte-compile a.py",
        "compile[1]": "Byte-compile b.py",
    }
    out = {
        tc.get("name"): tc.findtext("system-out") or ""
        for tc in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    }
    assert out["compile[1]"].startswith("Byte-compile b.py")
    assert out["upload"].startswith("Upload greet 1.0 to https://repo.example")

    report = run("report", "-o", "r.html", env=REPO)
    assert report.code == 0, report
    page = (tmp_path / "r.html").read_text()
    assert "compile[0]: Byte-compile a.py" in page
    assert "compile[1]: Byte-compile b.py" in page


def test_kept_steps_show_their_rendered_titles(run, write, tmp_path):
    write(
        "planrun.yaml",
        """
        variables: {version: "1.0"}
        steps:
          - {id: a, title: "Prepare ${version}", tool: echo, args: {value: 1}}
          - {id: b, tool: shell, args: {cmd: "test -f ok"}, depends_on: [a]}
        """,
    )
    assert run("run").code == 1
    (tmp_path / "ok").write_text("")
    r = run("resume", "--events", "e.jsonl")
    assert r.code == 0, r
    assert "a (Prepare 1.0) kept from the previous run" in r.err
    kept = next(e for e in _events(tmp_path / "e.jsonl") if e["event"] == "step.resumed")
    assert kept["title"] == "Prepare 1.0"


def test_an_undefined_name_in_a_description_is_a_validation_error(run, write):
    write(
        "p.yaml",
        """
        variables: {version: "1.0"}
        steps:
          - {id: a, run: echo, title: "A ${version}", description: "Ships ${verison}"}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert "p.yaml:3:60: error: step 'a': description: undefined name 'verison'" in r.out, r.out
    assert "did you mean 'version'?" in r.out


def test_instances_of_a_step_kept_whole_show_their_rendered_titles(run, write, tmp_path):
    # A matrix or foreach step whose instances all succeeded is kept whole on resume: each
    # instance's title is rendered with its element there too (console, step.resumed, state,
    # JUnit), as when it ran, never the step's title as written.
    write(
        "planrun.yaml",
        """
        params:
          who: {default: bob}
        steps:
          - {id: m, title: "M ${matrix.x} for ${who}", matrix: {x: [a, b]}, run: "true"}
          - {id: f, title: "F ${item}", foreach: [p, q], run: "true"}
          - {id: last, run: test -f ok, depends_on: [m, f]}
        """,
    )
    assert run("run", "--var", "who=al").code == 1
    (tmp_path / "ok").write_text("")
    r = run("resume", "--var", "who=al", "--events", "e.jsonl", "--junit", "j.xml")
    assert r.code == 0, r
    assert "m[1] (M b for al) kept from the previous run" in r.err
    assert "f[0] (F p) kept from the previous run" in r.err
    resumed = [e for e in _events(tmp_path / "e.jsonl") if e["event"] == "step.resumed"]
    kept = {e["step"]: e["title"] for e in resumed if "[" in e["step"]}
    assert kept == {"m[0]": "M a for al", "m[1]": "M b for al", "f[0]": "F p", "f[1]": "F q"}
    state = json.loads((tmp_path / ".planrun/state/planrun.json").read_text())
    assert state["steps"]["m[0]"]["title"] == "M a for al"
    out = {
        tc.get("name"): tc.findtext("system-out") or ""
        for tc in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    }
    assert out["f[1]"].startswith("F q")
