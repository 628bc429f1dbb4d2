"""Replanning end to end: a real planner command (a deterministic script) and real steps.

The replan rules themselves (revisions, budgets, planner failures, invalid revisions) are
checked in-process in tests/test_scheduler_resume.py."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import (
    ROOT,
    unique_sleep,
    wait_for_command,
)
from tests.testkit import read_jsonl, steps_by_id

PLANNER = r"""
import json, sys, os
ctx = json.load(sys.stdin)
calls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
with open(calls, "a") as fh:
    fh.write(json.dumps(ctx) + "\n")
mode = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mode")).read().strip()
ok = [{"id": "alt", "tool": "shell", "args": {"cmd": "echo alt"}, "result_variable": "data"},
      {"id": "finish", "tool": "echo", "args": {"value": "${data.stdout | trim}"}}]
if mode == "route":
    out = ok
elif mode == "empty":
    out = []
elif mode == "garbage":
    print("this is not json"); sys.exit(0)
elif mode == "nan":  # Python's json writes it, but NaN is not JSON
    print('[{"id": "alt", "tool": "echo", "args": {"value": NaN}}]'); sys.exit(0)
elif mode == "crash":
    sys.exit(3)
elif mode in ("flood", "flood_err"):  # 1 GiB on stdout (or stderr, then a failure)
    stream = sys.stdout if mode == "flood" else sys.stderr
    for _ in range(1024):
        stream.write("x" * (1 << 20))
    sys.exit(0 if mode == "flood" else 1)
elif mode == "hang":
    import time; time.sleep(600)
elif mode.startswith("slow_after"):  # "slow_after SLEEP-COMMAND"
    sleep = mode.split(" ", 1)[1]
    out = [{"id": "alt", "tool": "shell", "args": {"cmd": "echo alt >> log"}, "result_variable": "data"},
           {"id": "wait", "tool": "shell", "args": {"cmd": "test -f go || " + sleep + "; echo wait >> log"}, "depends_on": ["alt"]},
           {"id": "finish", "tool": "shell", "args": {"cmd": "echo finish >> log"}, "depends_on": ["wait"]}]
print(json.dumps({"steps": out}) if mode == "route" else json.dumps(out))
"""

PLAN = """
name: rp
title: Replan test
description: get the data one way or another
replan: {{command: ["{python}", "planner.py"], timeout: {timeout}}}
limits: {{max_replans: {max_replans}}}
steps:
  - id: first
    tool: echo
    args: {{value: 1}}
    result_variable: one
  - id: fetch
    tool: shell
    args: {{cmd: "echo fetching >&2; exit 9"}}
    on_failure: replan
    expected_outcome: the data
    depends_on: [first]
  - id: finish
    tool: echo
    args: {{value: "${{one}}"}}
    depends_on: [fetch]
"""


@pytest.fixture
def setup(tmp_path: Path, write):  # type: ignore[no-untyped-def]
    def _setup(mode: str, max_replans: int = 2, timeout: str = "10s") -> None:
        write("planner.py", PLANNER)
        (tmp_path / "mode").write_text(mode)
        write(
            "p.yaml",
            PLAN.format(
                python=sys.executable,
                max_replans=max_replans,
                timeout=timeout,
            ),
        )

    return _setup


def calls(tmp_path: Path) -> list[dict]:
    f = tmp_path / "calls.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def test_success_without_replanning(run, write, tmp_path, setup):
    setup("route")
    (tmp_path / "p.yaml").write_text((tmp_path / "p.yaml").read_text().replace("exit 9", "exit 0"))
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert not calls(tmp_path) and "revisions" not in r.json


def test_replans_once_and_succeeds_with_exact_diff_event(run, tmp_path, setup):
    setup("route")
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 0, r
    doc = r.json
    assert doc["status"] == "succeeded" and doc["reason"] == "completed"
    assert [s["id"] for s in doc["steps"]] == ["first", "alt", "finish"]
    assert doc["steps"][2]["result"] == "alt"
    (ctx,) = calls(tmp_path)
    assert ctx["goal"] == "get the data one way or another"
    assert (
        ctx["failed_step"]["id"] == "fetch" and ctx["failed_step"]["expected_outcome"] == "the data"
    )
    assert ctx["failed_step"]["on_failure"] == "replan"
    assert "exited with code 9" in ctx["error"]
    assert ctx["completed"] == {"first": 1}
    assert ctx["variables"]["one"] == 1
    assert [s["id"] for s in ctx["plan"]["steps"]] == ["first", "fetch", "finish"]
    assert ctx["plan"]["name"] == "rp" and ctx["history"] == []
    events = [json.loads(x) for x in (tmp_path / "ev.jsonl").read_text().splitlines()]
    (diff,) = [e for e in events if e["event"] == "plan.diff"]
    assert diff["plan"] == "rp"
    assert (
        diff["removed"] == ["fetch"] and diff["added"] == ["alt"] and diff["revised"] == ["finish"]
    )
    assert doc["revisions"][0]["diff"] == {
        "removed": ["fetch"],
        "added": ["alt"],
        "revised": ["finish"],
    }
    assert "exited with code 9" in doc["revisions"][0]["error"]


def test_empty_revision_is_no_plan(run, tmp_path, setup):
    setup("empty")
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1 and r.json["reason"] == "no_plan", r


@pytest.mark.parametrize(
    "mode, words",
    [
        ("garbage", "not JSON"),
        ("nan", "NaN is not JSON"),
        ("crash", "exited with code 3"),
        ("hang", "timed out"),
    ],
)
def test_planner_failures_fail_the_replan_clearly(run, tmp_path, setup, mode, words):
    # 1 s for the planner that hangs only: one that answers (a Python start-up, seconds on a
    # loaded machine) gets 60 s, so its own failure is what the test sees, never a timeout.
    setup(mode, max_replans=1, timeout="1s" if mode == "hang" else "60s")
    r = run("run", "p.yaml", "--output", "json")  # a hung planner outlasts the harness timeout
    assert r.code == 1 and r.json["reason"] == "replan_budget", r
    assert words in r.json["error"] or words in r.err
    assert "Traceback" not in r.err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "words"), [("flood", "more than 16 MiB"), ("flood_err", "exited with code 1")]
)
def test_a_planner_printing_a_gigabyte_costs_bounded_memory(tmp_path, setup, mode, words):
    """What a planner prints is read up to 16 MiB (the most a plan file may be) and the tail of
    its stderr: a run with its memory capped ends the replan in one line."""
    from tests.testkit import bounded_planrun

    setup(mode, max_replans=1, timeout="60s")
    r = bounded_planrun(tmp_path, "run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert "Traceback" not in r.err and "internal error" not in r.err + r.out, r
    doc = json.loads(r.out)
    assert doc["reason"] == "replan_budget", r
    assert words in doc["error"], doc["error"]
    assert len(doc["error"]) < 1000, doc["error"][:300]


@pytest.mark.slow  # real signals to a real run
def test_resume_after_interrupted_revised_run_continues_the_revision(write, tmp_path, setup, run):
    waiting = unique_sleep(600)
    setup(f"slow_after {waiting}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "run", "p.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # `wait` runs after `alt` and waits for `go`: its sleep, exec'd, shows the run is inside
    # it (a Ctrl-C before the exec could be lost in the shell's fork: then the 10 s grace).
    wait_for_command(waiting)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # a bound: `wait` would sleep 600 s
    assert proc.returncode == 130, err
    (tmp_path / "go").touch()
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["first", "alt", "wait", "finish"]
    assert (tmp_path / "log").read_text().split() == ["alt", "wait", "finish"]
    assert len(calls(tmp_path)) == 1  # the planner was not asked again
    g = run("graph", "p.yaml", "--format", "json").json
    assert [n["id"] for n in g["nodes"]] == ["first", "alt", "wait", "finish"]
    st = run("status", "p.yaml", "--output", "json").json
    assert len(st["revisions"]) == 1


def test_planner_from_the_command_line(run, write, tmp_path, setup):
    setup("route")
    text = (tmp_path / "p.yaml").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.startswith("replan:"))
    (tmp_path / "p.yaml").write_text(text + "\n")
    v = run("validate", "p.yaml")
    assert v.code == 0 and "warning" in v.out and "--planner" in v.out, v
    r = run("run", "p.yaml", "--output", "json", "--planner", f"{sys.executable} planner.py")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["first", "alt", "finish"]
    r = run("run", "p.yaml", "--output", "json")  # no planner: the failure aborts the run
    assert r.code == 1 and r.json["reason"] == "step_failed", r


def test_junit_agrees_with_the_run_document_on_a_routed_around_step(run, tmp_path, setup):
    """The planner routed around `fetch` and the run succeeded: CI must not see a failure."""
    setup("route")
    r = run("run", "p.yaml", "--output", "json", "--junit", "j.xml")
    assert r.code == 0 and r.json["status"] == "succeeded", r
    assert "fetch" not in [s["id"] for s in r.json["steps"]]
    assert r.json["revisions"][0]["failed_step"] == "fetch"
    assert r.json["revisions"][0]["diff"]["removed"] == ["fetch"]
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert (root.get("failures"), root.get("errors")) == ("0", "0")
    suite = root.find("testsuite")
    assert suite is not None and (suite.get("failures"), suite.get("errors")) == ("0", "0")
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    for step in r.json["steps"]:  # every step of the run document passed, as it says
        assert list(cases[step["id"]]) == [] or cases[step["id"]].find("system-out") is not None
        assert cases[step["id"]].find("skipped") is None
    fetch = cases["fetch"]
    assert fetch.find("failure") is None and fetch.find("error") is None
    skipped = fetch.find("skipped")
    assert skipped is not None
    message = skipped.get("message") or ""
    assert "replaced by the planner" in message and "revision 1" in message
    assert "exited with code 9" in message
    out = fetch.findtext("system-out") or ""
    assert "exited with code 9" in out and "fetching" in out  # its error and its output kept
    assert suite.get("skipped") == "1"


def test_junit_keeps_the_failure_of_a_replanned_run_that_failed(run, tmp_path, setup):
    """The planner's revision failed too: the run failed, and its own failed step says so."""
    setup("route")
    planner = (tmp_path / "planner.py").read_text().replace('"echo alt"', '"exit 4"')
    (tmp_path / "planner.py").write_text(planner)
    r = run("run", "p.yaml", "--output", "json", "--junit", "j.xml")
    assert r.code == 1 and r.json["reason"] == "step_failed", r
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    assert suite.find("testcase[@name='alt']/failure") is not None
    assert suite.find("testcase[@name='fetch']/failure") is None
    assert suite.find("testcase[@name='fetch']/skipped") is not None


def test_a_sub_plans_routed_around_step_is_skipped_in_junit_as_in_the_run_document(
    run, write, tmp_path, setup
):
    """The sub-plan's planner routed around `sub/fetch`: JUnit, the run document, `status`
    and the events say so as they do for the top plan's own steps."""
    setup("route")
    write(
        "parent.yaml",
        """
        name: parent
        steps:
          - {id: sub, tool: plan, args: {path: p.yaml}}
        """,
    )
    r = run("run", "parent.yaml", "--output", "json", "--junit", "j.xml", "--events", "ev.jsonl")
    assert r.code == 0 and r.json["status"] == "succeeded", r
    ids = [s["id"] for s in r.json["steps"]]
    assert ids == ["sub", "sub/first", "sub/alt", "sub/finish"], r
    assert "revisions" not in r.json  # the top plan was not revised
    status = run("status", "parent.yaml", "--output", "json")
    assert [s["id"] for s in status.json["steps"]] == ids, status
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None and (suite.get("failures"), suite.get("errors")) == ("0", "0")
    skipped = suite.find("testcase[@name='sub/fetch']/skipped")
    assert skipped is not None
    assert "replaced by the planner in revision 1" in (skipped.get("message") or "")
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    diffs = [e for e in events if e["event"] == "plan.diff"]
    assert len(diffs) == 1 and diffs[0]["step"] == "sub" and diffs[0]["plan"] == "parent"
    assert (diffs[0]["removed"], diffs[0]["added"]) == (["sub/fetch"], ["sub/alt"])
    assert diffs[0]["revised"] == ["sub/finish"]


# ---- replanning ----------------------------------------------------------------------------------


_PLANNER = """
import json, os, sys
ctx = json.load(sys.stdin)
with open("calls.jsonl", "a") as fh:
    fh.write(json.dumps(ctx) + "\\n")
n = sum(1 for _ in open("calls.jsonl"))
if n == 1:
    print(json.dumps([{"id": "x", "tool": "no_such_tool", "args": {}}]))
else:
    print(json.dumps([{"id": "x", "tool": "echo", "args": {"value": "${v}"}}]))
"""


@pytest.mark.parametrize(
    ("header", "goal"),
    [
        ("name: nm\ntitle: Tt\ndescription: the goal\n", "the goal"),
        ("name: nm\ntitle: Tt\n", "Tt"),
        ("name: nm\n", "nm"),
        ("", "p"),
    ],
)
def test_planner_input_goal_plan_and_failed_step_as_written(run, write, tmp_path, header, goal):
    write("planner.py", _PLANNER)
    write(
        "p.yaml",
        header
        + """variables: {v: vee}
replan: {command: ["python3", "planner.py"]}
steps:
  - {id: ok, tool: echo, args: {value: done}}
  - {id: f, title: "F ${v}", tool: shell, args: {cmd: "echo ${v}; exit 1"}, on_failure: replan,
     depends_on: [ok]}
""",
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert len(calls) == 2
    first = calls[0]
    assert {"goal", "plan", "failed_step", "error", "completed", "variables"} <= set(first)
    assert first["goal"] == goal
    assert first["failed_step"] == {
        "id": "f",
        "title": "F ${v}",
        "tool": "shell",
        "args": {"cmd": "echo ${v}; exit 1"},
        "on_failure": "replan",
        "depends_on": ["ok"],
    }
    assert [s["id"] for s in first["plan"]["steps"]] == ["ok", "f"]
    assert first["completed"] == {"ok": "done"}
    assert first["error"] == "command exited with code 1"


def test_an_invalid_revision_counts_as_a_replan_and_the_planner_hears_why(run, write, tmp_path):
    write("planner.py", _PLANNER)
    plan = """
        variables: {v: vee}
        limits: {max_replans: MAX}
        replan: {command: ["python3", "planner.py"]}
        steps:
          - {id: f, tool: shell, args: {cmd: "exit 1"}, on_failure: replan}
        """
    write("p.yaml", plan.replace("MAX", "2"))
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert steps_by_id(r.json)["x"]["result"] == "vee"
    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert len(calls) == 2 and "no_such_tool" in calls[1]["error"], calls[1]["error"]

    (tmp_path / "calls.jsonl").unlink()
    write("p.yaml", plan.replace("MAX", "1"))
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert (r.json["status"], r.json["reason"]) == ("failed", "replan_budget")
    assert len(read_jsonl(tmp_path / "calls.jsonl")) == 1


SERVERS = ROOT / "tests" / "mcp_servers"


UNGATING_PLANNER = """
import json, sys
json.load(sys.stdin)
print(json.dumps([{"id": "push", "tool": "shell", "args": {"cmd": "touch PUSHED"},
                   "approval": False}]))
"""


def test_a_live_revision_cannot_lift_an_approval_gate(run, write, tmp_path):
    write("planner.py", UNGATING_PLANNER)
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


@pytest.mark.parametrize(
    ("replan", "words"),
    [
        ('{tool: ""}', "replan: planner tool '' is not SERVER.TOOL"),
        ("{tool: nodot}", "replan: planner tool 'nodot' is not SERVER.TOOL"),
        ("{tool: srv.}", "replan: planner tool 'srv.' is not SERVER.TOOL"),
        ("{tool: other.echo}", "replan: unknown MCP server 'other' in planner tool 'other.echo'"),
        ('{command: ""}', "replan: the planner command is empty"),
        ("{command: []}", "replan: the planner command is empty"),
        ('{command: [""]}', "replan: the planner command is empty"),
        ("{command: 'python \"unclosed'}", "replan: the planner command does not parse"),
    ],
)
def test_a_planner_that_cannot_be_called_is_an_invalid_plan(run, write, replan, words):
    """A planner tool must name a configured server's tool and a planner command a program:
    anything else is an error at its position before the run (it was an internal error at the
    first replan)."""
    write(
        "p.yaml",
        f"""
        servers: {{srv: {{command: "{sys.executable}"}}}}
        replan: {replan}
        steps:
          - {{id: a, run: "false", on_failure: replan}}
        """,
    )
    for command in (("validate", "p.yaml"), ("run", "p.yaml")):
        r = run(*command)
        assert r.code == 3, r
        assert words in r.out + r.err, r
        assert "internal error" not in r.out + r.err, r


@pytest.mark.parametrize("planner", ["", "   ", 'python "unclosed'])
def test_a_planner_option_that_names_no_program_is_a_usage_error(run, write, planner):
    write("p.yaml", 'steps:\n  - {id: a, run: "false", on_failure: replan}\n')
    r = run("run", "p.yaml", "--planner", planner)
    assert r.code == 2, r
    assert "--planner: the planner command" in r.err, r
    assert "internal error" not in r.out + r.err, r
