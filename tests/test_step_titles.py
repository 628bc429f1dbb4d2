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
    assert "Byte-compile <item>" in r.out  # never an element: a placeholder
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


def test_a_resume_starts_with_titles_read_from_the_kept_results(run, write, tmp_path):
    # run.started listed `Use ${out}` though the resume knows `out` (its step is kept), as
    # `resume --dry-run` does; a result a step still to run binds stays as written
    write(
        "planrun.yaml",
        """
        steps:
          - {id: make, tool: echo, args: {value: v42}, result_variable: out}
          - id: use
            title: "Use ${out}"
            tool: shell
            args: {cmd: "test -f ok && echo again"}
            result_variable: late
          - {id: then, title: "Then ${late}", tool: echo, args: {value: 1}, depends_on: [use]}
        """,
    )
    assert run("run").code == 1
    (tmp_path / "ok").write_text("")
    r = run("resume", "--events", "e.jsonl")
    assert r.code == 0, r
    started = next(e for e in _events(tmp_path / "e.jsonl") if e["event"] == "run.started")
    listed = {s["id"]: s["title"] for s in started["steps"]}
    assert listed == {"make": "make", "use": "Use v42", "then": "Then ${late}"}, listed
    dry = run("resume", "--dry-run", "--output", "json")
    assert {s["id"]: s["title"] for s in dry.json["steps"]}["use"] == "Use v42"


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


FANNED = """
    variables: {suite: unit}
    steps:
      - id: test
        title: "Test py${matrix.py} ${suite}"
        description: "Runs ${suite} on ${matrix.py | replace('.', '')}"
        matrix: {py: ["3.11", "3.12"]}
        run: echo ${matrix.py}
      - id: lint
        title: "Lint ${pkg} (${index}) ${suite}"
        foreach: [a, b]
        as: pkg
        run: echo ${pkg}
"""


def test_a_fan_out_step_s_own_title_is_rendered_with_placeholders_for_its_element(
    run, write, tmp_path
):
    """A matrix or foreach step's own title (the parent of its instances) never has an
    element bound: it was shown as written, `Test py${matrix.py} ${suite}`, in `list`,
    `graph`, `show`, the console, events and the report, its known variables unrendered too.
    Now the known names are rendered and each expression that reads the element is shown as
    a placeholder, as the dry run shows values not known yet."""
    write("planrun.yaml", FANNED)
    test_title, lint_title = "Test py<matrix.py> unit", "Lint <pkg> (<index>) unit"
    described = "Runs unit on <matrix.py | replace('.', '')>"
    views = {
        "list": run("list", "planrun.yaml"),
        "list json": run("list", "planrun.yaml", "--output", "json"),
        "show": run("show", "test"),
        "show json": run("show", "lint", "--output", "json"),
        "dry run": run("run", "--dry-run"),
        "dry run json": run("run", "--dry-run", "--output", "json"),
    }
    for fmt in ("ascii", "json", "mermaid", "dot"):
        views[f"graph {fmt}"] = run("graph", "--format", fmt)
    views["run"] = run("run", "--events", "e.jsonl", "--junit", "j.xml", "--report", "r.html")
    for name, r in views.items():
        assert r.code == 0, (name, r)
        if not name.startswith("show"):  # (`show` gives a fan-out step's args as written)
            assert "${" not in r.out + r.err, (name, r.out + r.err)
    assert test_title in views["list"].out and lint_title in views["list"].out
    listed = {s["id"]: s for s in views["list json"].json["steps"]}
    assert listed["test"]["title"] == test_title
    assert listed["test"]["description"] == described
    assert views["show"].out.startswith(f"test — {test_title}\n"), views["show"].out
    assert described in views["show"].out
    assert "Test py3.11 unit" in views["show"].out  # an instance: its element bound
    assert views["show json"].json["title"] == lint_title
    dry = {s["id"]: s["title"] for s in views["dry run json"].json["steps"]}
    assert dry["test[1]"] == "Test py3.12 unit" and dry["lint[0]"] == "Lint a (0) unit"
    nodes = {n["id"]: n["title"] for n in views["graph json"].json["nodes"]}
    assert nodes == {"test": test_title, "lint": lint_title}
    assert "test: Test py#lt;matrix.py#gt; unit" in views["graph mermaid"].out
    assert f"test\\n{test_title}\\n" in views["graph dot"].out
    assert f"test  {test_title}  [shell]" in views["graph ascii"].out
    assert f"test ({test_title}) started" in views["run"].err, views["run"].err
    events = _events(tmp_path / "e.jsonl")
    started = next(e for e in events if e["event"] == "run.started")
    assert {s["id"]: s["title"] for s in started["steps"]} == nodes
    titled = [json.dumps(e) for e in events]
    assert not [e for e in titled if "${" in e], titled
    succeeded = {e["step"]: e["title"] for e in events if e["event"] == "step.succeeded"}
    assert succeeded["test"] == test_title and succeeded["test[0]"] == "Test py3.11 unit"
    assert succeeded["lint"] == lint_title and succeeded["lint[1]"] == "Lint b (1) unit"
    junit = (tmp_path / "j.xml").read_text()
    assert "${" not in junit and "Test py3.11 unit" in junit
    page = (tmp_path / "r.html").read_text()
    assert "${" not in page, [ln for ln in page.splitlines() if "${" in ln][:3]
    report = run("report", "-o", "r2.html")
    assert report.code == 0 and "${" not in (tmp_path / "r2.html").read_text()


def test_a_fan_out_step_that_never_started_has_its_title_rendered_in_the_report(
    run, write, tmp_path
):
    write(
        "planrun.yaml",
        """
        variables: {suite: unit}
        steps:
          - {id: first, run: "false"}
          - {id: test, title: "Test py${matrix.py} ${suite}", matrix: {py: ["3.11"]},
             run: "echo ${matrix.py}", depends_on: [first]}
        """,
    )
    assert run("run", "--junit", "j.xml").code == 1
    assert run("report", "-o", "r.html").code == 0
    page = (tmp_path / "r.html").read_text()
    assert "Test py&lt;matrix.py&gt; unit" in page and "${" not in page
    assert "${" not in (tmp_path / "j.xml").read_text()


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
