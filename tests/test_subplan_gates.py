"""Sub-plans are runs like any other: the parent's approval, policy, -j, budgets, secrets and MCP
checks hold inside a `plan` step, and its steps report as PARENT_STEP/CHILD_STEP."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import answer_at_tty, assert_no_traceback
from tests.testkit import most_at_once

SERVERS = Path(__file__).parent / "mcp_servers"

GATED_CHILD = """
name: child
steps:
  - {id: deploy, tool: shell, args: {cmd: "touch RAN"}, approval: true}
"""


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---- approval ---------------------------------------------------------------------------------


def test_the_issue_repro_denied_parent_does_not_run_a_gated_child(run, write, tmp_path):
    write("child.yaml", GATED_CHILD)
    write(
        "parent.yaml",
        """
        policy: {deny: [shell]}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
    """,
    )
    assert run("run", "child.yaml").code == 5
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code != 0, r
    assert not (tmp_path / "RAN").exists()
    r = run("run", "parent.yaml", "--yes", "--output", "json")
    assert r.code == 1, r
    assert "denied by policy" in r.json["steps"][0]["error"], r
    assert not (tmp_path / "RAN").exists()
    assert_no_traceback(r)


def test_gated_child_blocks_the_parent_before_any_step(run, write, tmp_path):
    write("child.yaml", GATED_CHILD)
    write(
        "parent.yaml",
        """
        steps:
          - {id: first, tool: shell, args: {cmd: "touch FIRST"}}
          - {id: sub, tool: plan, args: {path: child.yaml}, depends_on: [first]}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 5, r
    assert (r.json["status"], r.json["reason"]) == ("blocked", "approval_required")
    assert "sub/deploy" in r.json["error"]
    assert not (tmp_path / "FIRST").exists()  # found up front: nothing ran
    assert not (tmp_path / "RAN").exists()
    r = run("run", "parent.yaml", "--yes", "--output", "json")
    assert r.code == 0, r  # --yes carries over
    assert (tmp_path / "RAN").exists()


def test_gate_behind_a_computed_path_blocks_when_reached(run, write, tmp_path):
    write("child.yaml", GATED_CHILD)
    write(
        "parent.yaml",
        """
        variables: {which: child}
        steps:
          - {id: sub, tool: plan, args: {path: "${which}.yaml"}}
          - {id: after, tool: shell, args: {cmd: "touch AFTER"}, depends_on: [sub]}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 5, r
    assert (r.json["status"], r.json["reason"]) == ("blocked", "approval_required")
    assert "sub/deploy" in r.json["error"]
    assert not (tmp_path / "RAN").exists() and not (tmp_path / "AFTER").exists()
    assert_no_traceback(r)


def test_nested_gate_is_named_by_its_path(run, write, tmp_path):
    write("grandchild.yaml", GATED_CHILD)
    write("middle.yaml", "steps:\n  - {id: inner, tool: plan, args: {path: grandchild.yaml}}\n")
    write("top.yaml", "steps:\n  - {id: outer, tool: plan, args: {path: middle.yaml}}\n")
    r = run("run", "top.yaml", "--output", "json")
    assert r.code == 5, r
    assert "outer/inner/deploy" in r.json["error"]
    assert not (tmp_path / "RAN").exists()


@pytest.mark.slow  # a terminal or a real MCP server
def test_child_gate_at_a_tty_asks_when_reached(write, tmp_path):
    write("child.yaml", GATED_CHILD)
    write("parent.yaml", "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n")
    code, out = answer_at_tty(tmp_path, ["run", "parent.yaml", "--output", "json"], ["n"], 20)[:2]
    assert code == 5, out
    doc = json.loads(out)
    assert (doc["status"], doc["reason"]) == ("blocked", "denied")
    assert not (tmp_path / "RAN").exists()
    code, out = answer_at_tty(tmp_path, ["run", "parent.yaml", "--output", "json"], ["y"], 20)[:2]
    assert code == 0, out
    assert (tmp_path / "RAN").exists()


# ---- policy -----------------------------------------------------------------------------------


def test_parent_require_approval_applies_to_child_steps(run, write, tmp_path):
    write("child.yaml", "steps:\n  - {id: go, tool: shell, args: {cmd: touch RAN}}\n")
    write(
        "parent.yaml",
        """
        policy: {require_approval: ["sh*"]}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 5, r
    assert "sub/go" in r.json["error"]
    assert not (tmp_path / "RAN").exists()


def test_child_policy_still_applies_under_the_parent(run, write, tmp_path):
    write(
        "child.yaml",
        """
        policy: {deny: ["shell"]}
        steps:
          - {id: go, tool: shell, args: {cmd: touch RAN}}
    """,
    )
    write("parent.yaml", "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n")
    r = run("run", "parent.yaml", "--yes", "--output", "json")
    assert r.code == 1, r
    assert "denied by policy" in r.json["steps"][0]["error"]
    assert not (tmp_path / "RAN").exists()


# ---- -j and budgets ---------------------------------------------------------------------------

# Fails when another step holds the lock directory: two of these must never run at once.
EXCLUSIVE = "mkdir busy.lock && sleep 0.3 && rmdir busy.lock"


def test_parent_jobs_bound_the_child_steps(run, write, tmp_path):
    write(
        "child.yaml",
        f"""
        steps:
          - {{id: one, tool: shell, args: {{cmd: "{EXCLUSIVE}"}}}}
          - {{id: two, tool: shell, args: {{cmd: "{EXCLUSIVE}"}}}}
    """,
    )
    write(
        "parent.yaml",
        f"""
        steps:
          - {{id: a, tool: plan, args: {{path: child.yaml}}}}
          - {{id: b, tool: plan, args: {{path: child.yaml}}}}
          - {{id: c, tool: shell, args: {{cmd: "{EXCLUSIVE}"}}}}
    """,
    )
    r = run("run", "parent.yaml", "-j", "1", "--output", "json", "--events", "ev.jsonl", timeout=60)
    assert r.code == 0, r
    # the shell steps, the children's among them (a `plan` step waiting on its own holds no slot)
    assert (
        most_at_once(
            tmp_path / "ev.jsonl", lambda step: step in ("a/one", "a/two", "b/one", "b/two", "c")
        )
        == 1
    )


def test_one_slot_is_enough_for_nested_sub_plans(run, write):
    write("leaf.yaml", "steps:\n  - {id: x, tool: echo, args: {value: 1}}\n")
    write("mid.yaml", "steps:\n  - {id: m, tool: plan, args: {path: leaf.yaml}}\n")
    write(
        "top.yaml",
        """
        limits: {max_concurrency: 1}
        steps:
          - {id: t1, tool: plan, args: {path: mid.yaml}}
          - {id: t2, tool: plan, args: {path: mid.yaml}}
    """,
    )
    r = run("run", "top.yaml", "--output", "json", timeout=60)
    assert r.code == 0, r  # no deadlock: a waiting `plan` step holds no slot


def test_child_steps_count_toward_the_parent_budget(run, write, tmp_path):
    write(
        "child.yaml",
        """
        steps:
          - {id: one, tool: shell, args: {cmd: "touch ONE"}}
          - {id: two, tool: shell, args: {cmd: "touch TWO"}, depends_on: [one]}
    """,
    )
    write(
        "parent.yaml",
        """
        limits: {max_steps: 2}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "step_budget"
    assert (tmp_path / "ONE").exists() and not (tmp_path / "TWO").exists()


def test_parent_tool_caps_reach_into_the_child(run, write, tmp_path):
    write(
        "child.yaml",
        """
        steps:
          - {id: one, tool: shell, args: {cmd: "touch ONE"}}
          - {id: two, tool: shell, args: {cmd: "touch TWO"}, depends_on: [one]}
    """,
    )
    write(
        "parent.yaml",
        """
        limits: {tool_caps: {shell: 1}}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "step_budget"
    assert not (tmp_path / "TWO").exists()


def test_the_child_own_tighter_limit_applies(run, write, tmp_path):
    write(
        "child.yaml",
        """
        limits: {max_steps: 1}
        steps:
          - {id: one, tool: echo, args: {value: 1}}
          - {id: two, tool: shell, args: {cmd: "touch TWO"}, depends_on: [one]}
    """,
    )
    write(
        "parent.yaml",
        """
        limits: {max_steps: 100}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert not (tmp_path / "TWO").exists()


# ---- secrets ----------------------------------------------------------------------------------


def test_parent_secrets_are_masked_in_the_child_output(run, write, tmp_path):
    write(
        "child.yaml",
        """
        variables: {t: ""}
        secrets: [own]
        steps:
          - {id: show, tool: shell, args: {cmd: "echo token=${t}"}}
          - {id: own, tool: echo, args: {value: "childsecret42"}, result_variable: own}
    """,
    )
    write(
        "parent.yaml",
        """
        variables: {token: "parentsecret77"}
        secrets: [token]
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml, variables: {t: "${token}"}}, result_variable: out}
          - {id: use, tool: shell, args: {cmd: "test ${out.t} = parentsecret77 && echo ok"}}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json", "--events", "ev.jsonl", "--junit", "j.xml")
    assert r.code == 0, r  # masking never changes what steps receive
    shown = r.out + r.err + (tmp_path / "ev.jsonl").read_text() + (tmp_path / "j.xml").read_text()
    shown += (tmp_path / ".planrun/state/parent.json").read_text()
    shown += run("status", "parent.yaml", "--output", "json").out
    assert "parentsecret77" not in shown
    assert "childsecret42" not in shown
    assert "token=***" in r.err


# ---- MCP servers of the child -----------------------------------------------------------------


@pytest.mark.slow  # a terminal or a real MCP server
def test_child_mcp_tools_are_checked_before_its_first_step(run, write, tmp_path):
    write(
        "child.yaml",
        f"""
        servers:
          crashy: {{command: "{sys.executable}", args: ["{SERVERS / "crashy_server.py"}"]}}
        steps:
          - {{id: first, tool: shell, args: {{cmd: "touch FIRST"}}}}
          - {{id: call, tool: crashy.no_such_tool, depends_on: [first]}}
    """,
    )
    write("parent.yaml", "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n")
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert "no tool 'no_such_tool'" in r.json["steps"][0]["error"], r
    assert not (tmp_path / "FIRST").exists()


@pytest.mark.slow  # a terminal or a real MCP server
def test_child_server_connect_timeout_holds(run, write):
    write(
        "child.yaml",
        f"""
        servers:
          mute: {{command: "{sys.executable}", args: ["{SERVERS / "silent_server.py"}"], connect_timeout: 1s}}
        steps:
          - {{id: a, tool: mute.anything}}
    """,
    )
    write("parent.yaml", "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n")
    r = run("run", "parent.yaml", "--output", "json", timeout=60)
    assert r.code == 1, r
    assert "'mute'" in r.json["steps"][0]["error"]
    assert "within 1s" in r.json["steps"][0]["error"]  # the child's connect_timeout, not 20 s
    assert_no_traceback(r)


# ---- PARENT_STEP/CHILD_STEP ids ---------------------------------------------------------------


def test_two_calls_of_one_sub_plan_never_merge(run, write, tmp_path):
    write("leaf.yaml", "name: leaf\nsteps:\n  - {id: x, tool: shell, args: {cmd: 'echo hi'}}\n")
    write("mid.yaml", "name: mid\nsteps:\n  - {id: m, tool: plan, args: {path: leaf.yaml}}\n")
    write(
        "parent.yaml",
        """
        steps:
          - {id: a, tool: plan, args: {path: leaf.yaml}}
          - {id: b, tool: plan, args: {path: leaf.yaml}, depends_on: [a]}
          - {id: n, tool: plan, args: {path: mid.yaml}, depends_on: [b]}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json", "--events", "ev.jsonl", "--junit", "j.xml")
    assert r.code == 0, r
    for sid in ("a/x", "b/x", "n/m/x"):
        assert f"{sid} succeeded" in r.err, r
    events = _events(tmp_path / "ev.jsonl")
    done = [e["step"] for e in events if e["event"] == "step.succeeded"]
    assert done == ["a/x", "a", "b/x", "b", "n/m/x", "n/m", "n"]
    assert {e["plan"] for e in events} == {"parent"}
    assert events[0]["event"] == "run.started" and events[-1]["event"] == "run.finished"
    cases = [c.get("name") for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")]
    assert sorted(cases) == sorted(["a", "a/x", "b", "b/x", "n", "n/m", "n/m/x"])
    ids = [s["id"] for s in r.json["steps"]]
    assert ids == ["a", "a/x", "b", "b/x", "n", "n/m", "n/m/x"]
    status = run("status", "parent.yaml", "--output", "json")
    assert [s["id"] for s in status.json["steps"]] == ids
    assert all(s["status"] == "succeeded" for s in status.json["steps"])


def test_a_sub_plan_step_false_at_start_holds_nothing_up(run, write, tmp_path):
    write("child.yaml", GATED_CHILD)
    write(
        "parent.yaml",
        """
        variables: {deploy: false}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}, when: "${deploy}"}
          - {id: other, tool: shell, args: {cmd: "touch OTHER"}}
    """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 0, r
    assert (tmp_path / "OTHER").exists() and not (tmp_path / "RAN").exists()
    r = run("run", "parent.yaml", "--var", "deploy=true", "--output", "json")
    assert r.code == 5 and "sub/deploy" in r.json["error"], r


COUNTING_PLANNER = """
import json, sys
json.load(sys.stdin)
with open("CALLS", "a") as f:
    f.write("call\\n")
print("not a list of steps")
"""


def test_a_sub_plan_cannot_call_its_planner_more_than_the_parent_allows(run, write, tmp_path):
    write("planner.py", COUNTING_PLANNER)
    write(
        "child.yaml",
        f"""
        name: child
        replan: {{command: "{sys.executable} planner.py"}}
        limits: {{max_replans: 5}}
        steps:
          - {{id: a, tool: shell, args: {{cmd: "exit 1"}}, on_failure: replan}}
        """,
    )
    write(
        "parent.yaml",
        """
        limits: {max_replans: 1}
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
        """,
    )
    r = run("run", "parent.yaml", "--output", "json")
    assert r.code == 1, r
    assert (tmp_path / "CALLS").read_text().count("call") == 1, r
    assert "limits.max_replans is 1 (in the enclosing plan" in r.json["error"], r
