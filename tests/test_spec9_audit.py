"""An outside checker's reading of the run contract: paths, output shapes, statuses, budgets,
retries, `shell`/`http` details, `--only`, approval and replanning, each rule driven through
the command line and checked literally (exact field names, shapes and strings).

Rules an existing test already pins down exactly are not repeated here; this file holds the
ones that were not covered, or only loosely.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import planrun, serve_http, spawn_planrun, wait_for_file

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in doc["steps"]}


# ---- paths ---------------------------------------------------------------------------------------


def test_every_relative_path_is_relative_to_the_dash_c_directory(run, write, tmp_path):
    # The plan lives in plans/; every relative path it or the command line names is resolved
    # in the -C directory, never next to the plan file nor in the caller's directory.
    write("w/vars.yaml", "who: from-vars-file\n")
    write("w/child.yaml", "steps: [{id: x, tool: echo, args: {value: child-in-cwd}}]\n")
    write("w/plans/child.yaml", "steps: [{id: x, tool: echo, args: {value: child-by-plan}}]\n")
    write("w/sub/.keep", "")
    write(
        "w/planner.py",
        """
        import json, sys
        json.load(sys.stdin)
        print(json.dumps([{"id": "fixed", "tool": "echo", "args": {"value": "planned"}}]))
        """,
    )
    write(
        "w/plans/p.yaml",
        """
        name: paths
        replan: {command: ["python3", "planner.py"]}
        steps:
          - {id: pwd, tool: shell, args: {cmd: pwd}}
          - {id: cwd, tool: shell, args: {cmd: pwd, cwd: sub}}
          - {id: wf, tool: write_file, args: {path: out.txt, content: "${who}"}}
          - {id: rf, tool: read_file, args: {path: out.txt}, depends_on: [wf]}
          - {id: sp, tool: plan, args: {path: child.yaml}}
          - id: bad
            tool: shell
            args: {cmd: "exit 1"}
            on_failure: replan
            depends_on: [pwd, cwd, rf, sp]
        """,
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    r = run(
        "-C",
        str(tmp_path / "w"),
        "run",
        "plans/p.yaml",
        "--vars-file",
        "vars.yaml",
        "--state",
        "st/p.json",
        "--events",
        "ev.jsonl",
        "--junit",
        "junit.xml",
        "--output",
        "json",
        cwd=outside,
    )
    assert r.code == 0, r
    w = (tmp_path / "w").resolve()
    steps = _by_id(r.json)
    assert steps["pwd"]["result"]["stdout"] == f"{w}\n"
    assert steps["cwd"]["result"]["stdout"] == f"{w / 'sub'}\n"
    assert (w / "out.txt").read_text() == "from-vars-file"
    assert steps["rf"]["result"] == "from-vars-file"
    assert steps["sp/x"]["result"] == "child-in-cwd"
    assert steps["fixed"]["result"] == "planned"
    for name in ("st/p.json", "ev.jsonl", "junit.xml"):
        assert (w / name).is_file(), name
    assert not list(outside.iterdir())
    # the default state and `status` look under the -C directory too
    r = run("-C", str(w), "run", "plans/p.yaml", "--vars-file", "vars.yaml", "-q", cwd=outside)
    assert r.code == 0, r
    assert (w / ".planrun/state/paths.json").is_file()
    s = run("-C", str(w), "status", "plans/p.yaml", "--output", "json", cwd=outside)
    assert s.code == 0 and s.json["status"] == "succeeded", s
    assert not list(outside.iterdir())


def test_several_dash_c_are_each_relative_to_the_one_before(run, write, tmp_path):
    # as with make and git: `-C a -C b` is `-C a/b`
    write("a/b/p.yaml", "steps: [{id: s, tool: shell, args: {cmd: pwd}}]\n")
    r = run("-C", "a", "-C", "b", "run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert r.json["steps"][0]["result"]["stdout"] == f"{(tmp_path / 'a/b').resolve()}\n"
    r = run("-C", "a", "-C", "nope", "run", "p.yaml")
    assert r.code == 2 and "cannot change to directory nope" in r.err, r


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


# ---- shapes --------------------------------------------------------------------------------------


def test_plan_is_the_plan_name_in_every_document_and_events_have_the_envelope(run, write, tmp_path):
    write(
        "file-stem.yaml",
        """
        name: the-name
        steps:
          - {id: a, tool: echo, args: {value: 1}, result_variable: r}
          - {id: b, tool: shell, args: {cmd: "exit 2"}, depends_on: [a], on_failure: continue}
          - {id: c, tool: echo, args: {value: "${r}"}, depends_on: [b]}
          - {id: d, tool: echo, args: {value: 1}, when: "false"}
        """,
    )
    r = run("run", "file-stem.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 1, r
    assert r.json["plan"] == "the-name"
    assert list(r.json) == ["plan", "status", "reason", "duration_s", "error", "steps", "variables"]
    for step in r.json["steps"]:
        assert {"id", "status", "attempts", "duration_s", "result", "error"} <= set(step)
        assert step["error"] is None or isinstance(step["error"], str), step
    assert _by_id(r.json)["b"]["error"] == "command exited with code 2"
    assert _by_id(r.json)["a"]["error"] is None

    ids = {"a", "b", "c", "d"}
    events = _events(tmp_path / "ev.jsonl")
    assert events[0]["event"] == "run.started" and events[-1]["event"] == "run.finished"
    assert (events[-1]["status"], events[-1]["reason"]) == ("failed", "step_failed")
    for e in events:
        assert list(e)[:3] == ["ts", "event", "plan"], e
        assert e["plan"] == "the-name" and TS.match(e["ts"]), e
        if e["event"].startswith("step."):
            assert isinstance(e["step"], str) and e["step"] in ids, e
    stamps = [datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for e in events]
    assert stamps == sorted(stamps)
    assert {e["step"] for e in events if e["event"] == "step.skipped"} == {"c", "d"}

    status = run("status", "file-stem.yaml", "--output", "json")
    assert status.code == 0, status
    assert status.json["plan"] == "the-name"
    assert [(s["id"], s["status"], s["error"]) for s in status.json["steps"]] == [
        (s["id"], s["status"], s["error"]) for s in r.json["steps"]
    ]
    dry = run("run", "file-stem.yaml", "--dry-run", "--output", "json")
    assert dry.code == 0 and dry.json["plan"] == "the-name", dry
    graph = run("graph", "file-stem.yaml", "--format", "json")
    assert graph.code == 0 and graph.json["plan"] == "the-name", graph


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
    assert _by_id(dry.json)["last"]["depends_on"] == ["mid"]
    assert _by_id(dry.json)["last"]["args"] == {"value": "<mid result>"}
    graph = run("graph", "p.yaml", "--format", "json")
    assert graph.code == 0, graph
    assert sorted((e["from"], e["to"], e["kind"]) for e in graph.json["edges"]) == [
        ("first", "mid", "explicit"),
        ("mid", "last", "data"),
    ]
    real = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl", "-j", "1")
    assert real.code == 0, real


# ---- statuses and scheduling ---------------------------------------------------------------------


def test_abort_leaves_the_running_step_interrupted_and_the_unstarted_ones_pending(
    run, write, tmp_path
):
    write(
        "p.yaml",
        """
        steps:
          - {id: slow, tool: shell, args: {cmd: "touch started; sleep 30"}}
          - {id: boom, tool: shell, args: {cmd: "while [ ! -e started ]; do sleep 0.01; done; exit 1"}}
          - {id: later, tool: echo, args: {value: 1}, depends_on: [boom]}
        """,
    )
    r = run("run", "p.yaml", "-j", "2", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 1, r
    assert (r.json["status"], r.json["reason"]) == ("failed", "step_failed")
    want = {"slow": "interrupted", "boom": "failed", "later": "pending"}
    assert {s["id"]: s["status"] for s in r.json["steps"]} == want
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == want
    events = _events(tmp_path / "ev.jsonl")
    assert [e["step"] for e in events if e["event"] == "step.interrupted"] == ["slow"]
    assert not [e for e in events if e.get("step") == "later"]


def test_an_ignored_failure_binds_its_result_variable_to_null(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: bad, tool: shell, args: {cmd: "exit 4"}, on_failure: ignore, result_variable: r}
          - {id: after, tool: echo, args: {value: ["${r}", "${r is none}", "r=${r}"]}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert (r.json["status"], r.json["reason"]) == ("succeeded", "completed")
    bad = _by_id(r.json)["bad"]
    assert (bad["status"], bad["result"], bad["error"]) == (
        "ignored",
        None,
        "command exited with code 4",
    )
    assert "r" in r.json["variables"] and r.json["variables"]["r"] is None
    assert _by_id(r.json)["after"]["result"] == [None, True, "r=null"]


def test_steps_a_skip_makes_ready_start_in_file_order_with_the_others(run, write, tmp_path):
    # `off` is skipped at once; `after_off` is then ready together with `other` and `last`:
    # ties are broken by file order, so under -j 1 it starts first.
    write(
        "p.yaml",
        """
        steps:
          - {id: off, tool: echo, args: {value: 1}, when: "false"}
          - {id: after_off, tool: echo, args: {value: 1}, depends_on: [off]}
          - {id: other, tool: echo, args: {value: 1}}
          - {id: last, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "-j", "1", "--events", "ev.jsonl")
    assert r.code == 0, r
    started = [e["step"] for e in _events(tmp_path / "ev.jsonl") if e["event"] == "step.started"]
    assert started == ["after_off", "other", "last"]


# ---- budgets -------------------------------------------------------------------------------------


def test_max_steps_counts_attempts_but_not_when_skips_nor_planner_calls(run, write, tmp_path):
    # 5 executions are allowed: `off` (when false) and the planner call are free, `flaky`
    # takes 2 attempts, `fix` from the planner 1, `x` and `y` one each: exactly 5.
    write(
        "planner.py",
        """
        import json, sys
        json.load(sys.stdin)
        print(json.dumps([{"id": "fix", "tool": "echo", "args": {"value": 1}},
                          {"id": "x", "tool": "echo", "args": {"value": 1}, "depends_on": ["fix"]},
                          {"id": "y", "tool": "echo", "args": {"value": 1}, "depends_on": ["x"]}]))
        """,
    )
    plan = """
        limits: {max_steps: MAX}
        replan: {command: ["python3", "planner.py"]}
        steps:
          - {id: off, tool: echo, args: {value: 1}, when: "false"}
          - {id: flaky, tool: shell, args: {cmd: "exit 1"}, retries: 1, retry_delay: 0s,
             on_failure: replan}
        """
    write("p.yaml", plan.replace("MAX", "5"))
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert [(s["id"], s["status"], s["attempts"]) for s in r.json["steps"]] == [
        ("off", "skipped", 0),
        ("fix", "succeeded", 1),
        ("x", "succeeded", 1),
        ("y", "succeeded", 1),
    ]
    started = [e["step"] for e in _events(tmp_path / "ev.jsonl") if e["event"] == "step.started"]
    assert started == ["flaky", "flaky", "fix", "x", "y"]
    write("p.yaml", plan.replace("MAX", "4"))
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert (r.json["status"], r.json["reason"]) == ("failed", "step_budget")
    y = _by_id(r.json)["y"]
    assert y["status"] == "failed" and "max_steps" in y["error"], y


# ---- retries -------------------------------------------------------------------------------------


def test_retry_waits_are_really_waited_and_double(run, write, tmp_path):
    # Each attempt stamps the clock: the gaps between attempts are at least 0.15 s, then 0.3 s
    # (a constant delay would give 0.15 s twice).
    write(
        "p.yaml",
        """
        steps:
          - id: flaky
            tool: shell
            retries: 2
            retry_delay: 0.15s
            args: {cmd: "date +%s.%N >> stamps; exit 1"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1 and r.json["steps"][0]["attempts"] == 3, r
    t = [float(x) for x in (tmp_path / "stamps").read_text().split()]
    assert len(t) == 3
    assert t[1] - t[0] >= 0.15 and t[2] - t[1] >= 0.3, t


def test_a_timeout_is_a_failure_retried_like_any_other(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: slow
            tool: shell
            timeout: 0.3s
            retries: 1
            retry_delay: 0s
            args: {cmd: "echo x >> tries; test $(wc -l < tries) -ge 2 || sleep 30"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert r.json["steps"][0]["attempts"] == 2
    retrying = [e for e in _events(tmp_path / "ev.jsonl") if e["event"] == "step.retrying"]
    assert len(retrying) == 1 and "timed out" in retrying[0]["error"]


# ---- shell ---------------------------------------------------------------------------------------


def test_shell_env_is_merged_over_planruns_environment_and_output_is_verbatim(run, write, tmp_path):
    write(
        "p.yaml",
        r"""
        steps:
          - id: s
            tool: shell
            args:
              cmd: 'printf "%s|%s|%s|" "$FROM_PARENT" "$MINE" "$(pwd)"; command -v sh >/dev/null && printf "  path ok\n\n"; printf " err \n" >&2'
              env: {MINE: set-by-step, OVERRIDDEN: step}
          - {id: dollar, tool: shell, args: {cmd: 'echo "$${OVERRIDDEN:-unset}" $(echo sub)'}}
        """,
    )
    r = run(
        "run", "p.yaml", "--output", "json", env={"FROM_PARENT": "parent", "OVERRIDDEN": "parent"}
    )
    assert r.code == 0, r
    s = _by_id(r.json)
    assert s["s"]["result"]["stdout"] == f"parent|set-by-step|{tmp_path.resolve()}|  path ok\n\n"
    assert s["s"]["result"]["stderr"] == " err \n"
    assert s["dollar"]["result"]["stdout"] == "parent sub\n"


# ---- --only --------------------------------------------------------------------------------------


def test_only_repeated_runs_every_target_and_what_they_depend_on(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}, result_variable: ra}
          - {id: b, tool: echo, args: {value: "${ra}"}}
          - {id: c, tool: echo, args: {value: 1}}
          - {id: d, tool: echo, args: {value: 1}, depends_on: [c]}
          - {id: e, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "--only", "b", "--only", "d", "--output", "json")
    assert r.code == 0, r
    assert sorted(s["id"] for s in r.json["steps"]) == ["a", "b", "c", "d"]
    dry = run("run", "p.yaml", "--only", "b", "--only", "d", "--dry-run", "--output", "json")
    assert sorted(s["id"] for s in dry.json["steps"]) == ["a", "b", "c", "d"], dry


# ---- http ----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    ROUTES: dict[str, tuple[int, str, str]] = {
        "/vendor": (200, "application/vnd.api+json; charset=utf-8", '{"data": [1]}'),
        "/upper": (200, "Application/JSON", '{"k": "v"}'),
        "/null": (200, "application/json", "null"),
        "/broken": (200, "application/problem+json", "{not json"),
        "/plain": (200, "text/plain", '{"k": "v"}'),
        "/none": (200, "", '{"k": "v"}'),
        "/odd": (399, "text/plain", "three-nine-nine"),
        "/bad": (400, "application/json", '{"why": "bad"}'),
        "/gone": (410, "text/plain", "gone"),
    }

    def do_GET(self) -> None:
        status, ctype, body = self.ROUTES[self.path]
        data = body.encode()
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with serve_http(_Handler) as url:
        yield url


def test_http_json_or_text_by_content_type_and_failure_from_400(run, write, server):
    routes = ["vendor", "upper", "null", "broken", "plain", "none", "odd", "bad", "gone"]
    steps = "\n".join(
        f"  - {{id: '{name}', tool: http, args: {{url: '{server}/{name}'}}, on_failure: continue}}"
        for name in routes
    )
    write(
        "p.yaml",
        f"steps:\n{steps}\n"
        f"  - {{id: expected, tool: http, args: {{url: '{server}/gone', expect_status: 410}}}}\n",
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    s = _by_id(r.json)

    def body(name: str) -> dict[str, Any]:
        return {k: v for k, v in s[name]["result"].items() if k in ("json", "text")}

    assert body("vendor") == {"json": {"data": [1]}}
    assert body("upper") == {"json": {"k": "v"}}
    assert body("null") == {"json": None}  # JSON that parses, even to null
    assert body("broken") == {"text": "{not json"}
    assert body("plain") == {"text": '{"k": "v"}'}
    assert body("none") == {"text": '{"k": "v"}'}
    assert s["odd"]["status"] == "succeeded" and s["odd"]["result"]["status"] == 399
    for name, code in (("bad", 400), ("gone", 410)):
        assert s[name]["status"] == "failed" and str(code) in s[name]["error"], s[name]
    assert s["bad"]["result"]["json"] == {"why": "bad"}
    assert s["expected"]["status"] == "succeeded"
    assert s["expected"]["result"]["text"] == "gone"


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
    calls = _events(tmp_path / "calls.jsonl")
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
    assert _by_id(r.json)["x"]["result"] == "vee"
    calls = _events(tmp_path / "calls.jsonl")
    assert len(calls) == 2 and "no_such_tool" in calls[1]["error"], calls[1]["error"]

    (tmp_path / "calls.jsonl").unlink()
    write("p.yaml", plan.replace("MAX", "1"))
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert (r.json["status"], r.json["reason"]) == ("failed", "replan_budget")
    assert len(_events(tmp_path / "calls.jsonl")) == 1


# ---- approval ------------------------------------------------------------------------------------


def test_blocked_without_a_tty_names_the_steps_on_stderr_also_with_json_output(
    run, write, tmp_path
):
    write(
        "p.yaml",
        """
        variables: {go: false}
        steps:
          - {id: first, tool: shell, args: {cmd: "touch ran"}}
          - {id: deploy, tool: echo, args: {value: 1}, approval: true, depends_on: [first]}
          - {id: publish, tool: echo, args: {value: 1}, approval: true}
          - {id: never, tool: echo, args: {value: 1}, approval: true, when: "${go}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 5, r
    assert (r.json["status"], r.json["reason"]) == ("blocked", "approval_required")
    assert "deploy" in r.json["error"] and "publish" in r.json["error"], r.json["error"]
    assert "never" not in r.json["error"]
    assert {s["status"] for s in r.json["steps"]} == {"pending"}
    assert "approval required for: deploy, publish" in r.err, r
    assert not (tmp_path / "ran").exists()


# ---- state and resume ----------------------------------------------------------------------------


def test_a_plan_changed_under_the_same_name_is_resumed_by_fingerprints(run, write, tmp_path):
    plan = """
        name: build
        steps:
          - {id: a, tool: shell, args: {cmd: "echo a >> log"}}
          - {id: b, tool: shell, args: {cmd: "echo B >> log"}, depends_on: [a]}
          - {id: c, tool: shell, args: {cmd: "echo c >> log"}, depends_on: [b]}
          - {id: d, tool: shell, args: {cmd: "echo d >> log; test -e ok"}}
          - {id: old, tool: shell, args: {cmd: "echo old >> log"}}
        """
    write("p.yaml", plan)
    assert run("run", "p.yaml", "-j", "1").code == 1
    assert (tmp_path / "log").read_text().split() == ["a", "B", "c", "d"]
    (tmp_path / "ok").touch()
    changed = plan.replace("echo B", "echo b2").replace(
        '- {id: old, tool: shell, args: {cmd: "echo old >> log"}}',
        '- {id: new, tool: shell, args: {cmd: "echo new >> log"}}',
    )
    write("other-file-name.yaml", changed)
    r = run("resume", "other-file-name.yaml", "--output", "json", "-j", "1")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split()[4:] == ["b2", "c", "d", "new"]
    assert [s["id"] for s in r.json["steps"]] == ["a", "b", "c", "d", "new"]
    assert all(s["status"] == "succeeded" for s in r.json["steps"]), r.json


def test_a_kept_step_reading_a_masked_result_is_kept_whatever_characters_the_mask_has(
    run, write, tmp_path
):
    # `show` prints the secret (its result is recorded masked), `use` reads that result in a
    # shell command and succeeds, `flaky` fails. On resume only `flaky` is still to run: nothing
    # reads the masked result, so `show` and `use` are kept. (The masked value `***` holds
    # glob characters, so a shell command gets it another way than a plain word: that must not
    # make `use` look changed.)
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - {id: show, tool: shell, args: {cmd: "echo show >> log; echo ${token}"},
             result_variable: shown}
          - {id: use, tool: shell, args: {cmd: "echo use >> log; test '${shown.stdout | trim}' = x"},
             on_failure: ignore}
          - {id: flaky, tool: shell, args: {cmd: "echo flaky >> log; test -e ok"},
             on_failure: continue}
        """,
    )
    r = run("run", "p.yaml", "--var", "token=PlainWord42", "-j", "1")
    assert r.code == 1, r
    (tmp_path / "ok").touch()
    r = run("resume", "p.yaml", "--var", "token=PlainWord42", "--output", "json")
    assert r.code == 0, r
    log = (tmp_path / "log").read_text().split()
    assert log == ["show", "use", "flaky", "flaky"], (log, r.err)
    assert {s["id"]: s["status"] for s in r.json["steps"]} == {
        "show": "succeeded",
        "use": "ignored",
        "flaky": "succeeded",
    }


def test_a_sub_plan_started_again_on_resume_keeps_its_steps_that_succeeded(run, write, tmp_path):
    # A sub-plan follows the rules of a plan run on its own: resumed, its steps that
    # succeeded with unchanged fingerprints are kept, the failed one runs again.
    write(
        "child.yaml",
        """
        steps:
          - {id: c1, tool: shell, args: {cmd: "echo c1 >> log"}}
          - {id: c2, tool: shell, args: {cmd: "echo c2 >> log; test -e ok"}, depends_on: [c1]}
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
          - {id: after, tool: shell, args: {cmd: "echo after >> log"}, depends_on: [sub]}
        """,
    )
    assert run("run", "p.yaml").code == 1
    (tmp_path / "ok").touch()
    r = run("resume", "p.yaml", "--output", "json", "--junit", "junit.xml")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == ["c1", "c2", "c2", "after"]
    assert "sub/c1 kept from the previous run" in r.err, r.err
    want = {"sub": "succeeded", "sub/c1": "succeeded", "sub/c2": "succeeded", "after": "succeeded"}
    assert {s["id"]: s["status"] for s in r.json["steps"]} == want
    status = run("status", "p.yaml", "--output", "json")
    assert {s["id"]: s["status"] for s in status.json["steps"]} == want
    assert 'name="sub/c1"' in (tmp_path / "junit.xml").read_text()

    # --force on the `plan` step runs the whole sub-plan again, as on its own
    r = run("resume", "p.yaml", "--force=sub")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split()[4:] == ["c1", "c2", "after"]


@pytest.mark.slow  # a real SIGINT to a real run
def test_ctrl_c_inside_a_sub_plan_then_resume_continues_it(write, tmp_path):
    write(
        "child.yaml",
        """
        steps:
          - {id: c1, tool: shell, args: {cmd: "echo c1 >> log"}}
          - {id: c2, tool: shell, args: {cmd: "touch c2-started; test -e go || sleep 30; echo c2 >> log"},
             depends_on: [c1]}
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - {id: sub, tool: plan, args: {path: child.yaml}}
          - {id: after, tool: shell, args: {cmd: "echo after >> log"}, depends_on: [sub]}
        """,
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--output", "json", cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    wait_for_file(tmp_path / "c2-started")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert {s["id"]: s["status"] for s in json.loads(out)["steps"]} == {
        "sub": "interrupted",
        "sub/c1": "succeeded",
        "sub/c2": "interrupted",
        "after": "pending",
    }
    (tmp_path / "go").touch()
    r = planrun("resume", "p.yaml", cwd=tmp_path)
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == ["c1", "c2", "after"]


def test_resume_dry_run_says_what_the_resume_keeps_and_why_the_rest_runs(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "echo a >> log"}}
          - {id: b, tool: shell, args: {cmd: "echo b >> log; test -e ok"}, depends_on: [a]}
          - {id: c, tool: shell, args: {cmd: "echo c >> log"}, depends_on: [b]}
        """,
    )
    assert run("resume", "p.yaml", "--dry-run").code == 4  # nothing to resume yet
    assert run("run", "p.yaml").code == 1
    r = run("resume", "p.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    assert [(s["id"], s["resume"]) for s in r.json["steps"]] == [
        ("a", "kept"),
        ("b", "failed last time"),
        ("c", "a step it depends on ran again"),
    ]
    text = run("resume", "p.yaml", "--dry-run")
    assert "resume: kept" in text.out and "resume: runs again: failed last time" in text.out
    assert (tmp_path / "log").read_text().split() == ["a", "b"]  # the dry run ran nothing


# ---- validation and schema -----------------------------------------------------------------------


def test_a_bad_value_under_an_alias_is_reported_at_that_value(run, write):
    # `id` (a plan's name) and `index` (an mcp-cli step's id) are aliases: an error in their
    # value sits on that value, named as written, not at 1:1 quoting the whole mapping.
    write("p.yaml", "id: [1]\nsteps:\n  - {index: [2], tool: echo}\n")
    write("q.json", '{"id": 42, "steps": []}')
    r = run("validate", "p.yaml", "q.json", "--format", "json")
    assert r.code == 3, r
    errors = [
        (d["file"], d["line"], d["col"], d["message"])
        for d in r.json["diagnostics"]
        if d["severity"] == "error"
    ]
    assert errors == [
        ("p.yaml", 1, 5, "id: expected a string, got [1]"),
        ("p.yaml", 3, 13, "step #1: index: expected a string, got [2]"),
        ("q.json", 1, 8, "id: expected a string, got 42"),
    ]


def test_a_bad_foreach_as_name_is_planruns_own_message(run, write):
    write("p.yaml", 'steps:\n  - {id: c, tool: echo, foreach: [1], as: "bad name", args: {}}\n')
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    assert (
        r.out
        == "p.yaml:2:43: error: step 'c': bad 'as' name 'bad name': use a name like 'my_var'\n"
    )


def test_the_schema_rejects_as_without_foreach_like_validate(run, write):
    jsonschema = pytest.importorskip("jsonschema")
    schema = run("schema").json
    cases = [
        ({"as": "x"}, False),
        ({"as": "x", "foreach": None}, False),
        ({"as": "x", "foreach": [1]}, True),
        ({"as": None}, True),  # the default name
    ]
    for extra, valid in cases:
        plan = {"steps": [{"id": "a", "tool": "echo", **extra}]}
        assert jsonschema.Draft202012Validator(schema).is_valid(plan) is valid, plan
        write("p.json", json.dumps(plan))
        assert run("validate", "p.json").code == (0 if valid else 3), plan


@pytest.mark.parametrize(
    ("plan", "valid"),
    [
        ({"steps": [{"id": "a", "tool": "echo", "retries": 2.0}]}, True),
        ({"steps": [{"index": 1.0, "tool": "echo"}]}, True),
        ({"limits": {"max_steps": 3.0, "tool_caps": {"echo": 1.0}}, "steps": []}, True),
        ({"steps": [{"id": "a", "tool": "echo", "retries": 2.5}]}, False),
    ],
)
def test_a_whole_number_written_with_a_point_is_a_number_to_schema_and_validate(
    run, write, plan, valid
):
    # JSON has one kind of number: 2.0 is the integer 2 to the schema, so validate takes it
    jsonschema = pytest.importorskip("jsonschema")
    schema = run("schema").json
    assert jsonschema.Draft202012Validator(schema).is_valid(plan) is valid
    write("p.json", json.dumps(plan))
    assert run("validate", "p.json").code == (0 if valid else 3)
