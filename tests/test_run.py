"""`planrun run`: the scheduler, variables, failure policies, budgets, approval and reports."""

from __future__ import annotations

import json
import re
import uuid
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import (
    answer_at_tty,
    assert_no_process_left,
    assert_no_traceback,
    serve_http,
)
from tests.testkit import read_jsonl, steps_by_id


@pytest.mark.e2e  # a real `python -m planrun` process
def test_hello_runs_and_binds_results(run, write):
    write(
        "hello.yaml",
        """
        variables: {who: world}
        steps:
          - id: greet
            tool: echo
            args: {value: "Hello, ${who}!"}
            result_variable: greeting
          - id: say
            tool: shell
            args: {cmd: "echo ${greeting}"}
    """,
    )
    r = run("run", "hello.yaml", "--output", "json")
    assert r.code == 0, r
    doc = r.json
    assert doc["plan"] == "hello" and doc["status"] == "succeeded" and doc["reason"] == "completed"
    assert [s["id"] for s in doc["steps"]] == ["greet", "say"]
    assert doc["steps"][1]["result"]["stdout"] == "Hello, world!\n"
    assert doc["variables"]["greeting"] == "Hello, world!"
    assert set(doc) >= {"plan", "status", "reason", "duration_s", "steps", "variables"}


def test_interpolated_value_cannot_inject_shell(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {name: "x; touch pwned"}
        steps:
          - id: s
            tool: shell
            args: {cmd: "echo ${name}"}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert not (tmp_path / "pwned").exists()
    assert r.json["steps"][0]["result"]["stdout"] == "x; touch pwned\n"


def test_shell_dollar_forms_reach_the_shell(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: s
            tool: shell
            args: {cmd: "echo $HOME $(echo sub) $${HOME}", env: {HOME: /h}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.json["steps"][0]["result"]["stdout"] == "/h sub /h\n", r


@pytest.mark.e2e  # a real `python -m planrun` process
def test_timeout_kills_the_process_tree(run, write):
    # The sleeps outlast the harness's timeout: a run that waited for them fails the test.
    mark = f"sleep {300 + uuid.uuid4().int % 10**6 / 10**6:.6f}"
    write(
        "p.yaml",
        f"""
        steps:
          - id: slow
            tool: shell
            timeout: 1s
            args: {{cmd: "{mark}1 & {mark}2; wait"}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    step = r.json["steps"][0]
    assert step["status"] == "failed" and "timed out after 1s" in step["error"]
    assert_no_process_left(mark)


def _intervals(tmp_path: Path, n: int) -> list[tuple[float, float]]:
    out = []
    for i in range(n):
        start, end = (tmp_path / f"t{i}").read_text().split()
        out.append((float(start), float(end)))
    return out


def test_jobs_bound_is_never_exceeded(run, write, tmp_path):
    steps = "\n".join(
        f"  - id: s{i}\n    tool: shell\n    args: {{cmd: 'python3 -c \"import time;a=time.time();time.sleep(0.15);print(a, time.time())\" > t{i}'}}"
        for i in range(6)
    )
    write("p.yaml", "steps:\n" + steps + "\n")
    r = run("run", "p.yaml", "-j", "2")
    assert r.code == 0, r
    iv = _intervals(tmp_path, 6)
    for s, _ in iv:
        at_once = sum(1 for a, b in iv if a <= s < b)
        assert at_once <= 2


def test_when_false_skips_and_counts_as_done(run, write):
    write(
        "p.yaml",
        """
        variables: {mode: fast}
        steps:
          - id: slow_path
            tool: echo
            when: "${mode == 'slow'}"
            args: {value: 1}
            result_variable: r
          - id: after
            tool: echo
            depends_on: [slow_path]
            args: {value: "${r | default('unset')}"}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["slow_path"]["status"] == "skipped"
    assert steps["after"]["result"] == "unset"


def test_retries_wait_and_double(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: flaky
            tool: shell
            retries: 2
            retry_delay: 0.2s
            args: {cmd: "echo x >> count; test $(wc -l < count) -ge 3"}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert r.json["steps"][0]["attempts"] == 3
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    retrying = [e for e in events if e["event"] == "step.retrying"]
    assert [e["delay_s"] for e in retrying] == [0.2, 0.4]
    starts = [e["ts"] for e in events if e["event"] == "step.started"]
    assert len(starts) == 3


# Scheduling order and the failure policies (continue, ignore, abort) are tested against the
# scheduler itself with a scripted executor (tests/test_scheduler.py); --keep-going's wiring here.
def test_keep_going_turns_abort_into_continue(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: bad, tool: shell, args: {cmd: "exit 1"}}
          - {id: other, tool: echo, args: {value: 1}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--keep-going", "-j", "1")
    assert r.code == 1
    assert {x["id"]: x["status"] for x in r.json["steps"]} == {
        "bad": "failed",
        "other": "succeeded",
    }


def test_only_runs_targets_and_their_upstream(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: b, tool: echo, args: {value: 2}, depends_on: [a]}
          - {id: c, tool: echo, args: {value: 3}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--only", "b")
    assert r.code == 0, r
    assert [x["id"] for x in r.json["steps"]] == ["a", "b"]
    r = run("run", "p.yaml", "--only", "nope")
    assert r.code == 2 and "nope" in r.err


def test_max_steps_budget(run, write):
    write(
        "p.yaml",
        """
        limits: {max_steps: 2}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: b, tool: echo, args: {value: 2}, depends_on: [a]}
          - {id: c, tool: echo, args: {value: 3}, depends_on: [b]}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "step_budget"
    c = r.json["steps"][2]
    assert c["status"] == "failed" and "max_steps" in c["error"]


def test_tool_caps_budget_counts_retries(run, write):
    write(
        "p.yaml",
        """
        limits: {tool_caps: {shell: 2}}
        steps:
          - {id: a, tool: shell, args: {cmd: "exit 1"}, retries: 5, retry_delay: 0}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1 and r.json["reason"] == "step_budget", r
    assert "tool_caps.shell" in r.json["steps"][0]["error"]


def test_undefined_name_at_run_time_names_step_path_and_name(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: {x: 1}}, result_variable: r}
          - {id: b, tool: echo, args: {value: "${r.missing}"}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1
    assert r.json["steps"][1]["error"] == "step 'b': args.value: undefined name 'r.missing'"


def test_undefined_name_inside_a_larger_expression_is_named_too(run, write):
    # Not only a plain `${r.missing}`: a name read inside an operation, a filter, a literal
    # or a condition is named in full, never as Jinja2's "'dict object' has no attribute".
    write(
        "p.yaml",
        """
        variables: {l: [1]}
        steps:
          - {id: a, tool: echo, args: {value: {x: {y: 1}}}, result_variable: r}
          - {id: b, tool: echo, args: {value: "${r.missing + 1}"}}
          - {id: c, tool: echo, args: {value: "v=${r.x['nope'] | upper}"}}
          - {id: d, tool: echo, args: {value: "${[l[3], 1]}"}}
          - {id: e, tool: echo, when: "r.x.z == 1", args: {value: 1}}
          - {id: f, tool: echo, args: {value: "${r.missing.deeper | default(3)}"}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json", "--keep-going")
    assert r.code == 1, r
    errors = {s["id"]: s["error"] for s in r.json["steps"]}
    assert errors["b"] == "step 'b': args.value: undefined name 'r.missing'", errors
    assert errors["c"] == "step 'c': args.value: undefined name 'r.x.nope'", errors
    assert errors["d"] == "step 'd': args.value: undefined name 'l[3]'", errors
    assert errors["e"] == "step 'e': when: undefined name 'r.x.z'", errors
    assert errors["f"] == "step 'f': args.value: undefined name 'r.missing'", errors


def test_variable_precedence_and_types(run, write):
    write("vars.yaml", "a: file\nb: file\nn: 1\n")
    write(
        "p.yaml",
        """
        variables: {a: plan, b: plan, c: plan, n: 0, obj: {k: [1, 2]}}
        steps:
          - id: show
            tool: echo
            args:
              value: {a: "${a}", b: "${b}", c: "${c}", n: "${n + 1}", whole: "${obj}", text: "v=${obj} ${true} ${none}", lit: "$${a}"}
    """,
    )
    r = run(
        "run",
        "p.yaml",
        "--vars-file",
        "vars.yaml",
        "--var",
        "b=cli",
        "--var",
        "n=41",
        "--output",
        "json",
    )
    assert r.code == 0, r
    v = r.json["steps"][0]["result"]
    assert v == {
        "a": "file",
        "b": "cli",
        "c": "plan",
        "n": 42,
        "whole": {"k": [1, 2]},
        "text": 'v={"k": [1, 2]} true null',
        "lit": "${a}",
    }


def test_result_variables_override_cli_vars(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: bound}, result_variable: x}
          - {id: b, tool: echo, args: {value: "${x}"}}
    """,
    )
    r = run("run", "p.yaml", "--var", "x=cli", "--output", "json")
    assert r.json["steps"][1]["result"] == "bound", r


def test_approval_without_tty_blocks_before_any_step(run, write, tmp_path):
    write(
        "p.yaml",
        """
        policy: {require_approval: ["write_*"]}
        steps:
          - {id: first, tool: shell, args: {cmd: "touch ran"}}
          - {id: w, tool: write_file, args: {path: out.txt, content: hi}}
          - {id: gate, tool: echo, args: {value: 1}, approval: true}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 5, r
    assert r.json["status"] == "blocked" and r.json["reason"] == "approval_required"
    assert "w" in r.json["error"] and "gate" in r.json["error"]
    assert not (tmp_path / "ran").exists()
    r = run("run", "p.yaml", "--yes")
    assert r.code == 0, r
    assert (tmp_path / "out.txt").read_text() == "hi"


def test_dry_run_shows_waves_and_placeholders_and_writes_nothing(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {path: README}
        steps:
          - {id: read, tool: read_file, args: {path: "${path}"}, result_variable: text}
          - {id: count, tool: shell, args: {cmd: "echo ${text} | wc -c"}, approval: true}
          - {id: other, tool: echo, args: {value: "${path}"}, when: "${path != ''}"}
    """,
    )
    r = run("run", "p.yaml", "--dry-run", "--output", "json")
    assert r.code == 0, r
    doc = r.json
    assert doc["plan"] == "p"
    assert doc["waves"] == [["read", "other"], ["count"]]
    assert [s["id"] for s in doc["steps"]] == ["read", "other", "count"]
    count = doc["steps"][2]
    # the command as the shell will get it; the value it reads is not known yet
    assert count["args"] == {
        "cmd": 'echo "${PLANRUN_V_0}" | wc -c',
        "env": {"PLANRUN_V_0": "<read result>"},
    }
    assert count["depends_on"] == ["read"] and count["approval"] is True
    assert doc["steps"][0]["args"] == {"path": "README"}
    # no state; only the plan cache (docs/state.md) may be there
    assert [p.name for p in tmp_path.glob(".planrun/*")] in ([], ["plans"])
    r = run("run", "p.yaml", "--dry-run")
    assert r.code == 0 and "wave 1" in r.out and "<read result>" in r.out, r


def test_dry_run_of_invalid_plan_exits_3(run, write):
    write("p.yaml", "steps:\n  - {id: a, tool: nope}\n")
    r = run("run", "p.yaml", "--dry-run")
    assert r.code == 3 and "p.yaml:2:" in r.out, r


def test_events_and_junit_reports(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: ok, tool: echo, args: {value: 1}}
          - {id: bad, tool: shell, args: {cmd: "echo boom >&2; exit 2"}, on_failure: continue}
          - {id: skipped, tool: echo, args: {value: 1}, depends_on: [bad]}
    """,
    )
    r = run("run", "p.yaml", "--events", "ev.jsonl", "--junit", "junit.xml")
    assert r.code == 1
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "run.started" and names[-1] == "run.finished"
    assert {"step.started", "step.succeeded", "step.failed", "step.skipped"} <= set(names)
    assert all(e["plan"] == "p" and e["ts"].endswith("Z") and len(e["ts"]) == 24 for e in events)
    assert events[-1]["status"] == "failed" and events[-1]["reason"] == "step_failed"
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    cases = suite.iter("testcase")
    by_name = {c.get("name"): c for c in cases}
    assert set(by_name) == {"ok", "bad", "skipped"}
    assert by_name["bad"].find("failure") is not None
    assert "exited with code 2" in by_name["bad"].find("failure").get("message")


def test_failed_step_output_is_shown_as_one_block(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "for i in 1 2 3; do echo a$i; sleep 0.05; done"}}
          - {id: b, tool: shell, args: {cmd: "for i in 1 2 3; do echo b$i; sleep 0.05; done; exit 4"}, on_failure: continue}
    """,
    )
    r = run("run", "p.yaml", "-j", "2")
    assert r.code == 1
    err = r.err
    a_lines = [
        i for i, line in enumerate(err.splitlines()) if "a1" in line or "a2" in line or "a3" in line
    ]
    b_lines = [
        i for i, line in enumerate(err.splitlines()) if "b1" in line or "b2" in line or "b3" in line
    ]
    assert a_lines == list(range(a_lines[0], a_lines[0] + 3))
    assert b_lines == list(range(b_lines[0], b_lines[0] + 3))
    assert "exit 4" in err or "code 4" in err


def test_stream_prefixes_lines(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "echo one; echo two"}}
    """,
    )
    r = run("run", "p.yaml", "--stream")
    assert "[a] one" in r.err and "[a] two" in r.err, r


def test_python_and_subplan_steps(run, write, tmp_path):
    write("helpers.py", "def add(a, b):\n    return {'sum': a + b}\n")
    write(
        "sub.yaml",
        """
        variables: {x: 1}
        steps:
          - {id: double, tool: python, args: {function: "helpers:add", kwargs: {a: "${x}", b: "${x}"}}, result_variable: doubled}
    """,
    )
    write(
        "main.yaml",
        """
        steps:
          - {id: sub, tool: plan, args: {path: sub.yaml, variables: {x: 21}}, result_variable: out}
          - {id: show, tool: echo, args: {value: "${out.doubled.sum}"}}
    """,
    )
    r = run("run", "main.yaml", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert [s["id"] for s in r.json["steps"]] == ["sub", "sub/double", "show"]
    assert steps["show"]["result"] == 42
    assert steps["sub/double"]["result"] == {"sum": 42}


def test_subplan_including_itself_fails(run, write):
    write(
        "loop.yaml",
        """
        steps:
          - {id: again, tool: plan, args: {path: loop.yaml}}
    """,
    )
    r = run("run", "loop.yaml", "--output", "json")
    assert r.code == 1
    assert "includes itself" in r.json["steps"][0]["error"], r


def test_http_step_against_a_local_server(run, write):
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = b'{"ok": true}' if self.path == "/json" else b"nope"
            self.send_response(200 if self.path == "/json" else 404)
            self.send_header(
                "Content-Type", "application/json" if self.path == "/json" else "text/plain"
            )
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    with serve_http(Handler) as url:
        port = url.rsplit(":", 1)[1]
        write(
            "p.yaml",
            f"""
            steps:
              - {{id: get, tool: http, args: {{url: "http://127.0.0.1:{port}/json"}}, result_variable: r}}
              - {{id: use, tool: echo, args: {{value: "${{r.json.ok}}"}}}}
              - {{id: missing, tool: http, args: {{url: "http://127.0.0.1:{port}/x"}}, on_failure: continue}}
        """,
        )
        r = run("run", "p.yaml", "--output", "json")
        assert r.code == 1, r
        s = {x["id"]: x for x in r.json["steps"]}
        assert s["use"]["result"] is True
        assert s["missing"]["status"] == "failed" and "404" in s["missing"]["error"]


def test_secrets_are_masked_everywhere(run, write, tmp_path):
    write(
        "p.yaml",
        """
        secrets: [token]
        steps:
          - {id: leak, tool: shell, args: {cmd: "echo token=${token}"}}
    """,
    )
    r = run(
        "run",
        "p.yaml",
        "--var",
        "token=s3cr3t-value",
        "--output",
        "json",
        "--events",
        "ev.jsonl",
        "--stream",
    )
    assert r.code == 0, r
    assert "s3cr3t-value" not in r.out and "s3cr3t-value" not in r.err
    assert "token=***" in r.json["steps"][0]["result"]["stdout"]
    assert "s3cr3t-value" not in (tmp_path / "ev.jsonl").read_text()
    for f in (tmp_path / ".planrun").rglob("*"):
        if f.is_file():
            assert "s3cr3t-value" not in f.read_text(errors="replace")
    for fmt in ("text", "json"):
        r = run("run", "p.yaml", "--var", "token=s3cr3t-value", "--dry-run", "--output", fmt)
        assert r.code == 0 and "s3cr3t-value" not in r.out + r.err and "***" in r.out, r


def test_missing_plan_is_usage_error(run):
    r = run("run", "nope.yaml")
    assert r.code == 2 and "nope.yaml" in r.err
    assert_no_traceback(r)


def test_bad_var_syntax_is_usage_error(run, write):
    write("p.yaml", "steps:\n  - {id: a, tool: echo}\n")
    r = run("run", "p.yaml", "--var", "novalue")
    assert r.code == 2 and "KEY=VALUE" in r.err
    assert_no_traceback(r)


def test_approval_at_a_tty_no_denies_and_yes_runs(write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: before, tool: echo, args: {value: 1}}
          - {id: deploy, tool: shell, args: {cmd: "touch deployed"}, approval: true, depends_on: [before]}
    """,
    )
    code, out = answer_at_tty(tmp_path, ["run", "p.yaml", "--output", "json"], ["n"], 20)[:2]
    assert code == 5, out
    doc = json.loads(out)
    assert doc["status"] == "blocked" and doc["reason"] == "denied"
    assert {s["id"]: s["status"] for s in doc["steps"]} == {
        "before": "succeeded",
        "deploy": "interrupted",
    }
    assert not (tmp_path / "deployed").exists()
    code, out = answer_at_tty(tmp_path, ["run", "p.yaml", "--output", "json"], ["y"], 20)[:2]
    assert code == 0, out
    assert (tmp_path / "deployed").exists()


def test_plain_commands_run_without_a_shell_but_behave_the_same(run, write, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "mytool"
    tool.write_text("#!/bin/sh\necho from-mytool $1\n")
    tool.chmod(0o755)
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: plain, tool: shell, args: {{cmd: "echo a  b"}}}}
          - {{id: missing, tool: shell, args: {{cmd: "no-such-program-xyz arg", check: false}}}}
          - {{id: path, tool: shell, args: {{cmd: "mytool x", env: {{PATH: "{bindir}:/usr/bin:/bin"}}}}}}
          - {{id: builtin, tool: shell, args: {{cmd: "cd /"}}}}
    """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    s = {x["id"]: x["result"] for x in r.json["steps"]}
    assert s["plain"]["stdout"] == "a b\n"
    assert s["missing"]["exit_code"] == 127 and "not found" in s["missing"]["stderr"]
    assert s["path"]["stdout"] == "from-mytool x\n"


def test_vars_file_errors_and_unicode(run, write, tmp_path):
    (tmp_path / "v.json").write_text(
        json.dumps({"big": "ab\U0001f600cd"})
    )  # written as \\ud83d\\ude00
    write("bad.json", "[1\n")
    write("empty.yaml", "")
    write(
        "p.yaml",
        'variables: {big: plain}\nsteps:\n  - {id: a, tool: echo, args: {value: "${big}"}}\n',
    )
    r = run("run", "p.yaml", "--vars-file", "v.json", "--no-state", "--output", "json")
    assert r.code == 0 and r.json["steps"][0]["result"] == "ab\U0001f600cd", r
    r = run("run", "p.yaml", "--vars-file", "bad.json")
    assert r.code == 2 and "bad.json:2:1" in r.err, r
    assert run("run", "p.yaml", "--vars-file", "empty.yaml", "--no-state").code == 0
    r = run("run", "p.yaml", "--vars-file", "missing.yaml")
    assert r.code == 2 and "missing.yaml" in r.err
    assert_no_traceback(r)


def test_unwritable_state_and_report_paths(run, write, tmp_path):
    write("p.yaml", "steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    (tmp_path / "afile").write_text("")
    r = run("run", "p.yaml", "--state", "afile/state.json")
    assert r.code == 4 and "cannot write the state file" in r.err, r
    r = run("run", "p.yaml", "--junit", "afile/junit.xml", "--no-state")
    assert r.code == 2 and "afile/junit.xml" in r.err, r
    r = run("run", "p.yaml", "--events", "afile/ev.jsonl", "--no-state")
    assert r.code == 2, r
    for res in (r,):
        assert_no_traceback(res)


def test_subplan_steps_report_under_the_parent_step(run, write, tmp_path):
    write(
        "sub.yaml",
        "name: inner\nsteps:\n  - {id: deep, tool: echo, args: {value: 1}, result_variable: v}\n",
    )
    write("main.yaml", "steps:\n  - {id: outer, tool: plan, args: {path: sub.yaml}}\n")
    r = run("run", "main.yaml", "--events", "ev.jsonl", "--junit", "j.xml")
    assert r.code == 0, r
    assert "outer/deep succeeded" in r.err
    events = [json.loads(line) for line in (tmp_path / "ev.jsonl").read_text().splitlines()]
    assert any(e["plan"] == "main" and e.get("step") == "outer/deep" for e in events)
    assert events[0]["event"] == "run.started" and events[0]["plan"] == "main"
    assert events[-1]["event"] == "run.finished" and events[-1]["plan"] == "main"
    names = {c.get("name") for c in ET.parse(tmp_path / "j.xml").getroot().iter("testcase")}
    assert names == {"outer", "outer/deep"}
    state = json.loads((tmp_path / ".planrun/state/main.json").read_text())
    assert list(state["steps"]) == ["outer", "outer/deep"]
    assert "v" not in state["variables"]  # the sub-plan's result variable is its own
    r = run("resume", "main.yaml", "--output", "json")
    assert r.code == 0 and "v" not in r.json["variables"], r


def test_var_values_are_yaml_scalars_with_json_types(run, write):
    write(
        "p.yaml",
        'steps:\n  - {id: a, tool: echo, args: {value: ["${n}", "${xs}", "${s}", "${d}", "${y}"]}}\n',
    )
    r = run(
        "run",
        "p.yaml",
        "--no-state",
        "--output",
        "json",
        "--var",
        "n=3",
        "--var",
        "xs=[1,2]",
        "--var",
        "s='3'",
        "--var",
        "d=2026-11-26",
        "--var",
        "y=yes",
    )
    assert r.code == 0, r
    assert r.json["steps"][0]["result"] == [3, [1, 2], "3", "2026-11-26", "yes"]


TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


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
    assert steps_by_id(r.json)["b"]["error"] == "command exited with code 2"
    assert steps_by_id(r.json)["a"]["error"] is None

    ids = {"a", "b", "c", "d"}
    events = read_jsonl(tmp_path / "ev.jsonl")
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
    events = read_jsonl(tmp_path / "ev.jsonl")
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
    bad = steps_by_id(r.json)["bad"]
    assert (bad["status"], bad["result"], bad["error"]) == (
        "ignored",
        None,
        "command exited with code 4",
    )
    assert "r" in r.json["variables"] and r.json["variables"]["r"] is None
    assert steps_by_id(r.json)["after"]["result"] == [None, True, "r=null"]


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
    started = [e["step"] for e in read_jsonl(tmp_path / "ev.jsonl") if e["event"] == "step.started"]
    assert started == ["flaky", "flaky", "fix", "x", "y"]
    write("p.yaml", plan.replace("MAX", "4"))
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    assert (r.json["status"], r.json["reason"]) == ("failed", "step_budget")
    y = steps_by_id(r.json)["y"]
    assert y["status"] == "failed" and "max_steps" in y["error"], y


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
