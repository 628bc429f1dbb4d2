"""Outputs that real consumers accept: GitHub annotations, Mermaid labels, JUnit XML."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from planrun.errors import Diagnostic
from planrun.plan.graph import PlanGraph, render_mermaid
from planrun.reporters.github import annotation

# --- GitHub workflow commands ------------------------------------------------------------


def parse_workflow_command(line: str) -> tuple[str, dict[str, str], str]:
    """What GitHub's runner reads from `::cmd k=v,k=v::message` (its ActionCommand rules):
    properties split at `,`, each at its first `=`, then %-escapes decoded."""

    def unescape(text: str, prop: bool) -> str:
        pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if prop else [])
        for code, char in [*pairs, ("%25", "%")]:
            text = text.replace(code, char)
        return text

    match = re.fullmatch(r"::(\w+) ([^:]*)::(.*)", line)
    assert match, line
    props = dict(part.split("=", 1) for part in match.group(2).split(","))
    return (
        match.group(1),
        {k: unescape(v, True) for k, v in props.items()},
        unescape(match.group(3), False),
    )


def test_annotation_escapes_like_the_toolkit() -> None:
    diag = Diagnostic("dir,x/a:b%.yaml", 3, 7, "error", "100% wrong\r\nsecond line: a,b")
    line = annotation(diag)
    assert line == (
        "::error file=dir%2Cx/a%3Ab%25.yaml,line=3,col=7::100%25 wrong%0D%0Asecond line: a,b"
    )
    assert "\n" not in line and "\r" not in line
    assert parse_workflow_command(line) == (
        "error",
        {"file": "dir,x/a:b%.yaml", "line": "3", "col": "7"},
        "100% wrong\r\nsecond line: a,b",
    )


def test_validate_github_format_round_trips_through_the_runners_parser(run, tmp_path: Path) -> None:
    name = "a,b:c%.yaml"
    (tmp_path / name).write_text(
        "steps:\n"
        '  - {id: a, tool: echo, args: {value: "${ 100% + }"}}\n'
        '  - {id: b, tool: echo, args: {value: "${ x +\n\n }"}}\n'
    )
    result = run("validate", name, "--format", "github")
    assert result.code == 3, result
    lines = result.out.splitlines()
    assert len(lines) == 2, result
    parsed = [parse_workflow_command(line) for line in lines]
    assert [p[1] for p in parsed] == [
        {"file": name, "line": "2", "col": "39"},
        {"file": name, "line": "3", "col": "39"},
    ]
    assert "'${ 100% + }'" in parsed[0][2]
    assert "'${ x +\n}'" in parsed[1][2]


# --- Mermaid labels ------------------------------------------------------------------------


def test_mermaid_labels_escape_what_mermaid_would_read_as_syntax() -> None:
    from planrun.plan.definition import Step

    steps = [
        Step(id="t", tool="shell", title='Run tests for <module> & "x"'),
        Step(id="i", tool="echo", title="issue #42; `code`\nnext", depends_on=["t"]),
    ]
    text = render_mermaid(PlanGraph.build(steps))
    labels = re.findall(r'\["(.*)"\]', text)
    assert labels == [
        "t: Run tests for #lt;module#gt; #amp; #quot;x#quot;<br/>[shell]",
        "i: issue #35;42#59; #96;code#96; next<br/>[echo]",
    ]
    for label in labels:
        # outside entity codes and the one <br/>, nothing Mermaid reads as syntax
        bare = re.sub(r"#(\w+|\d+);", "", label.replace("<br/>", ""))
        assert not set(bare) & set('<>#;"&`\n'), label


# --- JUnit XML: Jenkins' schema, junitparser, xunitparser ----------------------------------

JUNIT_XSD = Path(__file__).parent / "data" / "junit-10.xsd"

MIXED_PLAN = """
steps:
  - {id: ok, tool: echo, args: {value: "fine <&> \\u001b[31mred\\u001b[0m"}}
  - {id: skipped, tool: echo, args: {value: 1}, when: "false"}
  - {id: ignored, tool: shell, args: {cmd: "echo out; exit 3"}, on_failure: ignore}
  - {id: bad, tool: shell, args: {cmd: "echo 'why: it broke' >&2; exit 2"}, on_failure: continue}
  - {id: after_bad, tool: echo, args: {value: 1}, depends_on: [bad]}
  - {id: retried, tool: shell, args: {cmd: "test -f mark || { touch mark; exit 1; }"}, retries: 1, retry_delay: 0}
"""


def check_junit(path: Path) -> Any:
    """The report validates against junit-10.xsd and parses with junitparser; returns it."""
    import xmlschema
    from junitparser import JUnitXml

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(path))
    return JUnitXml.fromfile(str(path))


def test_junit_report_is_valid_for_jenkins_and_junitparser(run, write, tmp_path: Path) -> None:
    write("p.yaml", MIXED_PLAN)
    result = run("run", "p.yaml", "--junit", "j.xml")
    assert result.code == 1, result
    report = check_junit(tmp_path / "j.xml")
    suites = list(report)
    assert [s.name for s in suites] == ["p"]
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (6, 1, 0, 2)
    outcome = {}
    for case in suite:
        kinds = [type(r).__name__ for r in case.result]
        outcome[case.name] = kinds[0] if kinds else "passed"
    assert outcome == {
        "ok": "passed",
        "skipped": "Skipped",
        "ignored": "passed",
        "bad": "Failure",
        "after_bad": "Skipped",
        "retried": "passed",
    }
    assert {p.name: p.value for p in suite.properties()}["status"] == "failed"


def test_junit_report_after_resume_and_with_sub_plans_parses_everywhere(
    run, write, tmp_path: Path
) -> None:
    import xunitparser

    write("child.yaml", "steps:\n  - {id: c1, tool: echo, args: {value: 1}}\n")
    write(
        "p.yaml",
        """
        steps:
          - {id: first, tool: echo, args: {value: 1}}
          - {id: sub1, tool: plan, args: {path: child.yaml}, depends_on: [first]}
          - {id: sub2, tool: plan, args: {path: child.yaml}, depends_on: [first]}
          - {id: gate, tool: shell, args: {cmd: "test -f go"}, depends_on: [sub1, sub2]}
        """,
    )
    assert run("run", "p.yaml", "--junit", "j1.xml").code == 1
    (tmp_path / "go").touch()
    assert run("resume", "p.yaml", "--junit", "j2.xml").code == 0
    for name in ("j1.xml", "j2.xml"):
        check_junit(tmp_path / name)
        with open(tmp_path / name) as handle:
            suite, result = xunitparser.parse(handle)  # asserts its own totals
        assert result.testsRun >= 4


def test_junit_report_of_a_plan_named_with_characters_xml_cannot_hold_is_valid(
    run, write, tmp_path: Path
) -> None:
    """The plan's name is the suites' name and each testcase's classname: a NUL, a control
    character or U+FFFE in it (a YAML escape) must not make the file unreadable."""
    write(
        "p.yaml",
        r"""
        name: "ci\x00build\x1b[31m\ufffe\x07 <&>"
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: b, tool: shell, args: {cmd: "exit 1"}, depends_on: [a]}
        """,
    )
    assert run("run", "p.yaml", "--junit", "j.xml").code == 1
    report = check_junit(tmp_path / "j.xml")
    (suite,) = list(report)
    assert suite.name.startswith("ci") and suite.name.endswith(" <&>"), suite.name
    assert [case.classname for case in suite] == [suite.name, suite.name]


# --- --mcp-config everywhere a plan is checked ---------------------------------------------

MCP_CONFIG = '{"mcpServers": {"t": {"command": "mcp-server-time"}}}'


@pytest.mark.slow
def test_mcp_config_servers_are_seen_by_tools_and_validate(run, write) -> None:
    write("m.json", MCP_CONFIG)
    write("p.yaml", "steps:\n  - {id: a, tool: t.get_current_time, args: {timezone: UTC}}\n")
    assert run("validate", "p.yaml").code == 3  # without the config, 't' is unknown
    checked = run("validate", "p.yaml", "--mcp-config", "m.json", "--check-tools")
    assert checked.code == 0, checked
    tools = run("tools", "p.yaml", "--mcp-config", "m.json", "--output", "json")
    assert tools.code == 0, tools
    assert "t.get_current_time" in {row["name"] for row in tools.json if row["source"] == "t"}


@pytest.mark.slow
def test_check_tools_goes_on_past_an_unknown_server_and_sorts(run, write) -> None:
    write("m.json", MCP_CONFIG)
    write(
        "p.yaml",
        """
        steps:
          - {id: c, tool: t.no_such_tool, args: {}}
          - {id: b, tool: nope.x, args: {}}
          - {id: a, tool: t.get_current_time, args: {timezone: 5}}
        """,
    )
    result = run("validate", "p.yaml", "--mcp-config", "m.json", "--check-tools")
    assert result.code == 3, result
    lines = result.out.splitlines()
    assert [line.split(":")[1] for line in lines] == ["2", "3", "4"], result  # by position
    assert "no tool 'no_such_tool'" in lines[0]
    assert "unknown MCP server 'nope'" in lines[1]
    assert "timezone" in lines[2]  # checked although 'nope' is unknown
