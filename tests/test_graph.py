"""`planrun graph`: effective dependencies, waves, and the json / mermaid / dot / ascii views."""

from __future__ import annotations

import re

import pytest

from planrun.plan.graph import PlanGraph, render_dot, render_mermaid
from planrun.plan.loader import load_text
from planrun.plan.validate import check_document
from tests.conftest import assert_no_traceback
from tests.testkit import steps_by_id

PLAN = """\
name: build
title: Build things
variables: {target: linux}
steps:
  - id: fetch
    title: Fetch sources
    tool: shell
    args: {cmd: "echo fetch"}
    result_variable: src
  - id: lint
    tool: shell
    args: {cmd: "echo lint"}
    depends_on: [fetch]
  - id: compile
    title: Compile for ${target}
    tool: shell
    args: {cmd: "echo ${src.stdout}"}
  - id: test
    tool: echo
    args: {value: "${steps.compile.status}"}
    depends_on: [lint]
  - id: package
    tool: echo
    args: {value: 1}
    depends_on: [test, compile]
"""


def graph_of(text: str) -> PlanGraph:
    checked = check_document(load_text(text, "p.yaml"))
    assert checked.ok and checked.plan is not None, checked.diagnostics
    return PlanGraph.build(checked.plan.steps)


@pytest.mark.e2e  # a real `python -m planrun` process
def test_json_shape_with_explicit_and_data_edges(run, write):
    write("build.yaml", PLAN)
    r = run("graph", "build.yaml", "--format", "json")
    assert r.code == 0, r
    doc = r.json
    assert set(doc) == {"plan", "nodes", "edges", "waves"}
    assert doc["plan"] == "build"
    assert doc["nodes"] == [
        {"id": "fetch", "title": "Fetch sources", "tool": "shell"},
        {"id": "lint", "title": "lint", "tool": "shell"},
        {"id": "compile", "title": "Compile for linux", "tool": "shell"},
        {"id": "test", "title": "test", "tool": "echo"},
        {"id": "package", "title": "package", "tool": "echo"},
    ]
    # titles are rendered with the variables known before a run, --var included
    given = run("graph", "build.yaml", "--format", "json", "--var", "target=arm").json
    assert given["nodes"][2]["title"] == "Compile for arm"
    # `from` is the dependency (it runs first); reading a result or steps.X makes a data edge.
    assert sorted((e["from"], e["to"], e["kind"]) for e in doc["edges"]) == [
        ("compile", "package", "explicit"),
        ("compile", "test", "data"),
        ("fetch", "compile", "data"),
        ("fetch", "lint", "explicit"),
        ("lint", "test", "explicit"),
        ("test", "package", "explicit"),
    ]
    assert doc["waves"] == [["fetch"], ["lint", "compile"], ["test"], ["package"]]


def test_explicit_wins_when_an_edge_is_both(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, result_variable: x}
          - {id: b, tool: echo, args: {value: "${x}"}, depends_on: [a]}
    """,
    )
    r = run("graph", "p.yaml", "--format", "json")
    assert r.json["edges"] == [{"from": "a", "to": "b", "kind": "explicit"}], r


def test_plan_name_defaults_to_file_stem_and_mcp_cli_id(run, write):
    write("my-plan.yaml", "steps:\n  - {id: a, tool: echo}\n")
    assert run("graph", "my-plan.yaml", "--format", "json").json["plan"] == "my-plan"
    write(
        "cli.json",
        '{"id": "from-id", "steps": [{"index": 1, "tool": "echo"}, '
        '{"index": 2, "tool": "echo", "depends_on": [1]}]}',
    )
    doc = run("graph", "cli.json", "--format", "json").json
    assert doc["plan"] == "from-id"
    assert doc["edges"] == [{"from": "1", "to": "2", "kind": "explicit"}]


def test_mermaid_uses_step_ids_as_node_ids(run, write):
    write("build.yaml", PLAN)
    r = run("graph", "build.yaml", "--format", "mermaid")
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0] == "flowchart TD"
    for sid in ("fetch", "lint", "compile", "test", "package"):
        assert any(line.strip().startswith(f'{sid}["') for line in lines), (sid, r.out)
    assert "    fetch --> lint" in lines
    assert "    fetch -.->|data| compile" in lines
    assert "    compile --> package" in lines


def test_mermaid_aliases_ids_mermaid_cannot_take():
    # `end` and friends are Mermaid keywords; `a--b` reads as a link. Checked against mermaid 11.
    g = graph_of("""
steps:
  - {id: end, tool: echo}
  - {id: graph-x, tool: echo, depends_on: [end]}
  - {id: a--b, tool: echo, depends_on: [graph-x]}
  - {id: step_end, tool: echo, depends_on: [a--b]}
  - {id: End, tool: echo, depends_on: [step_end]}
""")
    text = render_mermaid(g)
    node_ids = re.findall(r'^    (\S+)\["', text, re.M)
    assert len(node_ids) == len(set(node_ids)) == 5
    assert "end" not in node_ids and "graph-x" not in node_ids and "a--b" not in node_ids
    assert "step_end" in node_ids and "End" in node_ids  # safe ids stay as they are
    for nid in node_ids:
        assert re.fullmatch(r"[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*", nid), nid
    # The label still names the real step.
    assert re.search(r'\["end<br/>\[echo\]"\]', text), text
    edges = re.findall(r"^    (\S+) --> (\S+)$", text, re.M)
    assert len(edges) == 4 and all(a in node_ids and b in node_ids for a, b in edges)


def test_dot_uses_quoted_step_ids_and_escapes_labels(run, write):
    write("build.yaml", PLAN)
    r = run("graph", "build.yaml", "--format", "dot")
    assert r.code == 0, r
    assert r.out.startswith('digraph "build" {\n') and r.out.rstrip().endswith("}")
    for sid in ("fetch", "lint", "compile", "test", "package"):
        assert f'    "{sid}" [label="{sid}' in r.out
    assert '    "fetch" -> "lint";' in r.out
    assert '    "fetch" -> "compile" [style=dashed, label="data"];' in r.out

    g = graph_of('steps:\n  - {id: end, tool: echo, title: "say \\"hi\\" \\\\ bye"}\n')
    dot = render_dot('my "plan"', g)
    assert dot.splitlines()[0] == 'digraph "my \\"plan\\"" {'
    assert '    "end" [label="end\\nsay \\"hi\\" \\\\ bye\\n[echo]"];' in dot
    _assert_balanced_dot(dot)


def _assert_balanced_dot(dot: str) -> None:
    """Every quoted string closes on its line, and braces balance outside strings."""
    depth = 0
    for line in dot.splitlines():
        unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', "", line)
        assert '"' not in unquoted, line
        depth += unquoted.count("{") - unquoted.count("}")
    assert depth == 0


def test_ascii_shows_after_and_parallel_marks(run, write):
    write("build.yaml", PLAN)
    r = run("graph", "build.yaml")
    assert r.code == 0, r
    assert r.out.splitlines() == [
        "wave 1",
        "    ○ fetch  Fetch sources  [shell]",
        "wave 2  ∥ 2 in parallel",
        "  ∥ ○ lint  [shell]  ← after: fetch",
        "  ∥ ○ compile  Compile for linux  [shell]  ← after: fetch",
        "wave 3",
        "    ○ test  [echo]  ← after: lint, compile",
        "wave 4",
        "    ○ package  [echo]  ← after: compile, test",
    ]


def test_graph_of_invalid_plan_exits_3_with_diagnostics(run, write):
    write(
        "cyc.yaml",
        """
        steps:
          - {id: a, tool: echo, depends_on: [b]}
          - {id: b, tool: echo, depends_on: [a]}
    """,
    )
    for fmt in ("ascii", "mermaid", "dot"):
        r = run("graph", "cyc.yaml", "--format", fmt)
        assert r.code == 3, r
        assert r.out == "cyc.yaml:2:38: error: dependency cycle: a -> b -> a\n", r
        assert_no_traceback(r)
    r = run("graph", "cyc.yaml", "--format", "json")
    assert r.code == 3, r
    assert r.json["diagnostics"] == [
        {
            "file": "cyc.yaml",
            "line": 2,
            "col": 38,
            "severity": "error",
            "message": "dependency cycle: a -> b -> a",
        }
    ]


def test_graph_usage_errors_exit_2(run, write):
    write("p.yaml", "steps:\n  - {id: a, tool: echo}\n")
    assert run("graph", "missing.yaml").code == 2
    r = run("graph", "p.yaml", "--format", "svg")
    assert r.code == 2 and "Invalid value for '--format'" in r.err, r


def test_waves_and_topo_order_in_file_order():
    g = graph_of(PLAN)
    assert g.topo_order() == ["fetch", "lint", "compile", "test", "package"]
    assert g.upstream(["test"]) == {"test", "lint", "fetch", "compile"}
    assert g.find_cycle() is None


def test_a_graph_copy_can_be_added_to_without_touching_the_graph() -> None:
    text = "steps:\n  - {id: a, tool: echo, result_variable: x}\n  - {id: b, tool: echo, args: {v: '${x}'}}\n"
    plan = check_document(load_text(text, "p.yaml"), {}).plan
    assert plan is not None
    first = PlanGraph.build(plan.steps)
    assert first.deps == {"a": [], "b": ["a"]} and first.kinds == {("a", "b"): "data"}
    copy = first.copy()
    copy.deps["b"].append("zzz")  # a scheduler adding to its graph (as foreach instances do)
    copy.deps["c"] = ["a"]
    assert first.deps == {"a": [], "b": ["a"]}


def test_dry_run_steps_and_graph_edges_follow_the_dependencies_not_the_file(run, write):
    # Written dependents first: the dry-run still lists what starts first first, and every
    # edge runs from the step that runs first to the one that waits for it.
    write(
        "p.yaml",
        """
        steps:
          - {id: last, tool: echo, args: {value: "${mid_out}"}}
          - {id: mid, tool: echo, args: {value: 1}, depends_on: [first], result_variable: mid_out}
          - {id: first, tool: echo, args: {value: 1}}
          - {id: alone, tool: echo, args: {value: 1}}
        """,
    )
    dry = run("run", "p.yaml", "--dry-run", "--output", "json")
    assert dry.code == 0, dry
    assert [s["id"] for s in dry.json["steps"]] == ["first", "alone", "mid", "last"]
    assert dry.json["waves"] == [["first", "alone"], ["mid"], ["last"]]
    assert steps_by_id(dry.json)["last"]["depends_on"] == ["mid"]
    assert steps_by_id(dry.json)["last"]["args"] == {"value": "<mid result>"}
    graph = run("graph", "p.yaml", "--format", "json")
    assert graph.code == 0, graph
    assert sorted((e["from"], e["to"], e["kind"]) for e in graph.json["edges"]) == [
        ("first", "mid", "explicit"),
        ("mid", "last", "data"),
    ]
    real = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl", "-j", "1")
    assert real.code == 0, real


def test_graph_renders_titles_and_checks_given_params_as_list_does(run, write):
    # Titles are rendered with what is known before a run in every view, the graph's four
    # formats too; a --var its param refuses is exit 2 there as for `list` and `show`, and a
    # missing required param is no error.
    write(
        "p.yaml",
        """
        secrets: [token]
        variables: {token: hunter2}
        params:
          target: {default: dev, choices: [dev, prod]}
          n: {type: integer, required: true}
        steps:
          - {id: deploy, title: "Deploy to ${target}", run: "true"}
          - {id: login, title: "Log in with ${token}", run: "true"}
          - {id: make, tool: echo, args: {value: 1}, result_variable: out}
          - {id: later, title: "Use ${out}", run: "true"}
          - {id: m, title: "M ${matrix.x}", matrix: {x: [a]}, run: "true"}
        """,
    )
    j = run("graph", "p.yaml", "--format", "json", "--var", "target=prod")
    assert j.code == 0, j
    titles = {n["id"]: n["title"] for n in j.json["nodes"]}
    assert titles == {
        "deploy": "Deploy to prod",
        "login": "Log in with ***",
        "make": "make",
        "later": "Use ${out}",  # not known before the run: as written
        "m": "M <matrix.x>",  # the step itself has no element: a placeholder
    }
    assert "deploy  Deploy to dev  [shell]" in run("graph", "p.yaml").out
    assert "Deploy to dev" in run("graph", "p.yaml", "--format", "mermaid").out
    assert "Deploy to dev" in run("graph", "p.yaml", "--format", "dot").out
    for bad, said in (("n=x", "--var n: expected an integer, got 'x'"), ("target=qa", "'qa'")):
        r = run("graph", "p.yaml", "--var", bad)
        assert r.code == 2, r
        assert said in r.err
        assert_no_traceback(r)
