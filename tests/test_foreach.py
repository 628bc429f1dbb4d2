"""`foreach`: a step run once per element of a list, as instances `ID[N]` (real processes, files)."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from planrun.plan.fanout import FanOutError, elements, summarize
from planrun.plan.instances import group_instances, instance_id, parent_of
from tests.conftest import (
    ROOT,
    answer_at_tty,
    assert_no_traceback,
    planrun,
)
from tests.testkit import bounded_planrun, one_step_error, write_p_yaml


def steps_of(doc: dict) -> dict[str, dict]:
    return {s["id"]: s for s in doc["steps"]}


# ---- the rules as functions ------------------------------------------------------------------


def test_elements_of_lists_and_mappings():
    assert elements([3, 1, 2]) == [3, 1, 2]
    assert elements({"b": 1, "a": 2}) == [{"key": "b", "value": 1}, {"key": "a", "value": 2}]
    assert elements([]) == []
    for bad, word in (("abc", "a string"), (3, "a number"), (None, "null"), (True, "a boolean")):
        with pytest.raises(FanOutError, match=f"foreach gave {word}.*not a list or a mapping"):
            elements(bad)


def test_instance_ids_and_their_order():
    assert instance_id("lint", 2) == "lint[2]" and parent_of("lint[2]") == "lint"
    assert parent_of("lint") is None
    ids = ["a", "b", "a[10]", "a[2]", "c", "b[0]"]
    assert group_instances(ids) == ["a", "a[2]", "a[10]", "b", "b[0]", "c"]


class _Rec:
    def __init__(self, status: str, result: object = None, error: str | None = None) -> None:
        self.status, self.result, self.error, self.kept = status, result, error, False


def test_summarize_instances():
    ok = {"s[0]": _Rec("succeeded", 1), "s[1]": _Rec("ignored", error="x")}
    assert summarize(["s[0]", "s[1]"], ok).status == "succeeded"
    assert summarize(["s[0]", "s[1]"], ok).result == [1, None]
    bad = {"s[0]": _Rec("succeeded", 1), "s[1]": _Rec("failed", error="boom")}
    v = summarize(["s[0]", "s[1]"], bad)
    assert v.status == "failed" and v.error == "instance s[1] failed: boom"
    skipped = {"s[0]": _Rec("skipped"), "s[1]": _Rec("skipped")}
    assert summarize(["s[0]", "s[1]"], skipped).status == "skipped"
    stopped = {"s[0]": _Rec("succeeded", 1), "s[1]": _Rec("pending")}
    assert summarize(["s[0]", "s[1]"], stopped).status == "interrupted"
    assert summarize([], {}).status == "succeeded"


# ---- running ---------------------------------------------------------------------------------


def test_static_list_results_in_input_order(run, write):
    # The first element sleeps longest: it finishes last, and its result still comes first.
    write(
        "p.yaml",
        """
        variables: {waits: [0.6, 0.3, 0]}
        steps:
          - id: nap
            tool: shell
            foreach: "${waits}"
            args: {cmd: "sleep ${item}; echo ${index}:${item}"}
            result_variable: naps
          - id: after
            tool: echo
            args: {value: "${naps | map(attribute='stdout') | map('trim') | list}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "-j", "3", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert [x["id"] for x in r.json["steps"]] == ["nap", "nap[0]", "nap[1]", "nap[2]", "after"]
    assert s["after"]["result"] == ["0:0.6", "1:0.3", "2:0"]
    assert [x["stdout"] for x in s["nap"]["result"]] == ["0:0.6\n", "1:0.3\n", "2:0\n"]
    assert s["nap[1]"]["result"]["stdout"] == "1:0.3\n" and s["nap[1]"]["attempts"] == 1
    assert r.json["variables"]["naps"] == s["nap"]["result"]


def test_as_names_the_element_and_mapping_gives_key_value(run, write):
    write(
        "p.yaml",
        """
        variables: {targets: {prod: eu-1, dev: us-2}}
        steps:
          - id: deploy
            tool: echo
            foreach: "${targets}"
            as: t
            title: "deploy ${t.key}"
            args: {value: "${index} ${t.key}=${t.value}"}
            result_variable: deployed
          - id: literal
            tool: echo
            foreach: [x, "${targets.prod}", 3]
            args: {value: "${item}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["deploy"]["result"] == ["0 prod=eu-1", "1 dev=us-2"]
    assert s["literal"]["result"] == ["x", "eu-1", 3]


def test_empty_list_gives_empty_result_and_runs_nothing(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: none
            tool: shell
            foreach: []
            args: {cmd: "touch ran"}
            result_variable: out
          - id: after
            tool: echo
            args: {value: "${out}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [x["id"] for x in r.json["steps"]] == ["none", "after"]
    assert steps_of(r.json)["after"]["result"] == []
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("value", "word"), [('"just text"', "a string"), ("7", "a number"), ("null", "null")]
)
def test_a_value_that_is_not_a_list_fails_the_step(run, write, value, word):
    write(
        "p.yaml",
        f"""
        variables: {{v: {value}}}
        steps:
          - {{id: fan, tool: echo, foreach: "${{v}}", args: {{value: "${{item}}"}}}}
          - {{id: after, tool: echo, depends_on: [fan], args: {{value: 1}}}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert_no_traceback(r)
    assert r.code == 1, r
    s = steps_of(r.json)
    assert s["fan"]["status"] == "failed"
    assert s["fan"]["error"].startswith(f"step 'fan': foreach gave {word}")
    assert "not a list or a mapping" in s["fan"]["error"]
    assert s["after"]["status"] == "pending"


def test_dynamic_fan_out_over_listed_files(run, write, tmp_path):
    for name, text in (("a.txt", "1\n"), ("b.txt", "1\n2\n"), ("c.txt", "1\n2\n3\n")):
        write(f"data/{name}", text)
    write(
        "p.yaml",
        """
        steps:
          - {id: files, tool: shell, args: {cmd: "ls data"}, result_variable: listing}
          - id: count
            tool: shell
            foreach: "${listing.stdout.split()}"
            as: f
            args: {cmd: "wc -l < data/${f}"}
            result_variable: counts
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert [int(c["stdout"]) for c in s["count"]["result"]] == [1, 2, 3]
    assert {"count[0]", "count[1]", "count[2]"} <= set(s)
    # One more file, one more instance: the list is read when `files` is done.
    write("data/d.txt", "x\n")
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert len(steps_of(r.json)["count"]["result"]) == 4


def test_instances_run_in_parallel_under_j(run, write, tmp_path):
    # Each instance waits until all three have started: only possible when they run together.
    write(
        "p.yaml",
        """
        steps:
          - id: meet
            tool: shell
            foreach: [a, b, c]
            timeout: 20s
            args:
              cmd: >-
                touch started-${item};
                i=0; while [ $(ls started-* | wc -l) -lt 3 ]; do
                i=$((i+1)); [ $i -gt 400 ] && exit 1; sleep 0.05; done
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state", "-j", "3")
    assert r.code == 0, r


def test_j_bounds_the_instances(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: one
            tool: shell
            foreach: [1, 2, 3]
            args: {cmd: "echo start >> log; sleep 0.1; echo end >> log"}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "-j", "1", "--events", "ev.jsonl")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == ["start", "end"] * 3
    # A bound not kept starts every instance in one turn of the loop, before any can end: the
    # events' order shows it however slow the machine (the log alone may not, if it is slow).
    lines = (tmp_path / "ev.jsonl").read_text().splitlines()
    kinds = [e["event"] for e in map(json.loads, lines) if "[" in str(e.get("step", ""))]
    assert kinds == ["step.started", "step.succeeded"] * 3, kinds


def test_abort_stops_the_siblings(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [fail, 600, 600]
            args: {cmd: "if [ ${item} = fail ]; then exit 3; fi; sleep ${item}"}
          - {id: after, tool: echo, depends_on: [fan], args: {value: 1}}
        """,
    )
    # The sleeps outlast the harness's timeout: a run that waited for them fails the test.
    r = run("run", "p.yaml", "--output", "json", "--no-state", "-j", "3")
    assert r.code == 1, r
    s = steps_of(r.json)
    assert s["fan[0]"]["status"] == "failed"
    assert s["fan[1]"]["status"] == "interrupted" and s["fan[2]"]["status"] == "interrupted"
    assert s["fan"]["status"] == "failed"
    assert s["fan"]["error"] == "instance fan[0] failed: command exited with code 3"
    assert s["after"]["status"] == "pending"


def test_continue_lets_the_siblings_finish(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [fail, a, b]
            on_failure: continue
            args:
              cmd: >-
                if [ ${item} = fail ]; then
                until [ -e started-a ] && [ -e started-b ]; do sleep 0.02; done; exit 3; fi;
                touch started-${item};
                until grep -q step.failed ev.jsonl; do sleep 0.02; done; touch done-${item}
            result_variable: out
          - {id: after, tool: echo, args: {value: "${out}"}}
          - {id: other, tool: echo, args: {value: 1}}
        """,
    )
    # The siblings are running when the failure is recorded and end only after it (a poll on
    # the events file, not a sleep a slow machine could outlast before the failure).
    r = run("run", "p.yaml", "--output", "json", "--no-state", "-j", "3", "--events", "ev.jsonl")
    assert r.code == 1, r
    s = steps_of(r.json)
    assert [s[f"fan[{n}]"]["status"] for n in range(3)] == ["failed", "succeeded", "succeeded"]
    assert (tmp_path / "done-a").exists() and (tmp_path / "done-b").exists()
    assert s["fan"]["status"] == "failed" and s["after"]["status"] == "skipped"
    assert s["other"]["status"] == "succeeded"


def test_ignore_gives_null_in_the_list(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [0, 3, 0]
            on_failure: ignore
            args: {cmd: "echo ${index}; exit ${item}"}
            result_variable: out
          - {id: after, tool: echo, args: {value: ["${out[1]}", "${out[2].stdout}"]}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["after"]["result"] == [None, "2\n"]
    assert s["fan[1]"]["status"] == "ignored"
    assert s["fan"]["status"] == "succeeded" and s["fan"]["result"][1] is None
    assert s["fan"]["result"][0]["stdout"] == "0\n"


@pytest.mark.slow  # ~2 s of timeouts and retries
def test_timeout_and_retries_per_instance(run, write, tmp_path):
    # Instance 1 fails its first attempt (no marker yet), instance 2 always times out.
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [ok, flaky, slow]
            timeout: 1s
            retries: 1
            retry_delay: 0.05
            on_failure: continue
            args:
              cmd: >-
                case ${item} in
                flaky) [ -e marker ] || { touch marker; exit 1; } ;;
                slow) sleep 600 ;;
                esac
        """,
    )
    # `slow` outlasts the harness's timeout: only its own 1 s timeout can end it in time.
    r = run("run", "p.yaml", "--output", "json", "--no-state", "-j", "3")
    s = steps_of(r.json)
    assert (s["fan[0]"]["status"], s["fan[0]"]["attempts"]) == ("succeeded", 1)
    assert (s["fan[1]"]["status"], s["fan[1]"]["attempts"]) == ("succeeded", 2)
    assert (s["fan[2]"]["status"], s["fan[2]"]["attempts"]) == ("failed", 2)
    assert "timed out after 1s" in s["fan[2]"]["error"]
    assert r.code == 1


def test_when_per_instance(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [1, 2, 3, 4]
            when: "${item % 2 == 0}"
            args: {cmd: "touch ran-${item}; echo ${item}"}
            result_variable: out
          - id: never
            tool: echo
            foreach: [1, 2]
            when: false
            args: {value: "${item}"}
            result_variable: never
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert [s[f"fan[{n}]"]["status"] for n in range(4)] == [
        "skipped",
        "succeeded",
        "skipped",
        "succeeded",
    ]
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == ["ran-2", "ran-4"]
    assert s["fan"]["status"] == "succeeded"
    assert [x and x["stdout"] for x in s["fan"]["result"]] == [None, "2\n", None, "4\n"]
    assert s["never"]["status"] == "skipped" and "never" not in r.json["variables"]


def test_approval_gates_the_instances(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: shell, foreach: [a, b], approval: true, args: {cmd: "touch ${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 5 and "fan" in r.json["error"], r
    assert not (tmp_path / "a").exists()
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--yes")
    assert r.code == 0, r
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()


def test_each_instance_counts_against_the_budgets(run, write, tmp_path):
    write(
        "p.yaml",
        """
        limits: {max_steps: 3}
        steps:
          - {id: first, tool: echo, args: {value: 1}}
          - {id: fan, tool: shell, foreach: [a, b, c], depends_on: [first], args: {cmd: "touch ${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state", "-j", "1")
    assert r.code == 1 and r.json["reason"] == "step_budget", r
    s = steps_of(r.json)
    assert s["fan[2]"]["status"] == "failed" and "limits.max_steps is 3" in s["fan[2]"]["error"]
    assert sorted(p.name for p in tmp_path.iterdir() if len(p.name) == 1) == ["a", "b"]
    write(
        "q.yaml",
        """
        limits: {tool_caps: {shell: 2}}
        steps:
          - {id: fan, tool: shell, foreach: [a, b, c], args: {cmd: "true"}}
        """,
    )
    r = run("run", "q.yaml", "--output", "json", "--no-state", "-j", "1")
    assert r.code == 1 and r.json["reason"] == "step_budget", r


def test_only_selects_all_instances(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: src, tool: echo, args: {value: [x, y]}, result_variable: xs}
          - {id: fan, tool: echo, foreach: "${xs}", args: {value: "${item}!"}}
          - {id: other, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--only", "fan")
    assert r.code == 0, r
    assert [x["id"] for x in r.json["steps"]] == ["src", "fan", "fan[0]", "fan[1]"]
    assert steps_of(r.json)["fan"]["result"] == ["x!", "y!"]


# ---- state, resume, reports ------------------------------------------------------------------


RESUMABLE = """
variables: {names: [a, b, c]}
steps:
  - id: fan
    tool: shell
    foreach: "${names}"
    on_failure: continue
    args: {cmd: "echo ${item} >> log; { [ ${item} != b ] || [ -e fixed ]; } && echo ${item}"}
    result_variable: out
  - {id: after, tool: echo, args: {value: "${out | length}"}}
"""


def test_state_status_and_resume_keep_succeeded_instances(run, write, tmp_path):
    write("p.yaml", RESUMABLE)
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    status = run("status", "p.yaml", "--output", "json")
    assert status.code == 0, status
    ids = [s["id"] for s in status.json["steps"]]
    assert ids == ["fan", "fan[0]", "fan[1]", "fan[2]", "after"]
    assert [s["status"] for s in status.json["steps"]] == [
        "failed",
        "succeeded",
        "failed",
        "succeeded",
        "skipped",
    ]
    text = run("status", "p.yaml").out
    rows = [line.split()[0] for line in text.split("STEP", 1)[1].splitlines()[1:] if line]
    assert rows == ["fan", "fan[0]", "fan[1]", "fan[2]", "after"]

    (tmp_path / "fixed").touch()
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r
    # Only the failed instance ran again.
    log = (tmp_path / "log").read_text().split()
    assert sorted(log[:3]) == ["a", "b", "c"] and log[3:] == ["b"]
    s = steps_of(r.json)
    assert s["fan"]["status"] == "succeeded" and s["after"]["result"] == 3
    assert all(s[f"fan[{n}]"]["status"] == "succeeded" for n in range(3))

    # A finished run resumed runs nothing: the step and its instances are kept whole.
    r = run("resume", "p.yaml", "--output", "json")
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == log
    assert [x["id"] for x in r.json["steps"]] == ["fan", "fan[0]", "fan[1]", "fan[2]", "after"]
    assert {x["status"] for x in r.json["steps"]} == {"succeeded"}
    assert steps_of(r.json)["fan"]["result"][2]["stdout"] == "c\n"
    assert "after kept from the previous run" in r.err and "started" not in r.err

    # A changed element runs again (its fingerprint changed); the others are kept.
    r = run("resume", "p.yaml", "--output", "json", "--var", 'names=["a", "b", "z"]')
    assert r.code == 0, r
    assert (tmp_path / "log").read_text().split() == [*log, "z"]
    # A shorter list: the dropped instance leaves the state.
    r = run("run", "p.yaml", "--output", "json", "--var", 'names=["a"]')
    assert r.code == 0, r
    status = run("status", "p.yaml", "--output", "json")
    assert [s["id"] for s in status.json["steps"]] == ["fan", "fan[0]", "after"]


def test_a_foreach_steps_own_start_carries_title_and_reason(run, write, tmp_path):
    """Its step.started says what any step's does: the rendered title and why it runs."""
    write(
        "p.yaml",
        """
        variables: {who: all, n: 0}
        steps:
          - id: fan
            title: "Greet ${who}"
            tool: shell
            foreach: [0, 1]
            args: {cmd: "exit ${n}"}
          - id: files
            tool: echo
            foreach: [a]
            sources: ["*.txt"]
            args: {value: "${item}"}
        """,
    )

    def started(step: str) -> dict:
        lines = (tmp_path / "e.jsonl").read_text().splitlines()
        events = [json.loads(line) for line in lines]
        return [e for e in events if e["event"] == "step.started" and e["step"] == step][-1]

    assert run("run", "p.yaml", "--events", "e.jsonl").code == 0
    fan = started("fan")
    assert fan["title"] == "Greet all" and fan["reason"] == "cache off" and "again" not in fan
    assert started("fan[0]")["reason"] == "cache off"  # as for any step the cache skips
    files = started("files")
    assert files["title"] == "files" and files["reason"] not in ("", "cache off"), files
    r = run("resume", "p.yaml", "--var", "n=1", "--events", "e.jsonl")
    assert r.code == 1, r
    fan = started("fan")
    assert fan["again"] is True and fan["reason"] and fan["title"] == "Greet all", fan


def test_events_junit_and_console_name_the_instances(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [0, 3]
            on_failure: continue
            args: {cmd: "exit ${item}"}
        """,
    )
    r = run("run", "p.yaml", "--no-state", "--events", "e.jsonl", "--junit", "j.xml")
    assert r.code == 1, r
    events = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    seen = [(e["event"], e.get("step")) for e in events]
    assert ("step.started", "fan") in seen and ("step.succeeded", "fan[0]") in seen
    assert ("step.failed", "fan[1]") in seen and ("step.failed", "fan") in seen
    started = next(e for e in events if e["event"] == "step.started" and e["step"] == "fan")
    assert started["instances"] == ["fan[0]", "fan[1]"]
    cases = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    names = [(c.get("name"), c.find("failure") is not None) for c in cases]
    assert names == [("fan", True), ("fan[0]", False), ("fan[1]", True)]
    # The console shows the instances under their step.
    assert "fan started [shell]: foreach, 2 instances" in r.err
    assert "  fan[1] failed" in r.err
    assert "2 foreach instances (1 succeeded, 1 failed)" in r.err


def test_a_sub_plans_instances_report_under_the_parent_step(run, write, tmp_path):
    write(
        "child.yaml",
        """
        name: child
        steps:
          - {id: inner, tool: echo, foreach: [a, b, c], args: {value: "${item}"}}
        """,
    )
    write("p.yaml", "steps:\n  - {id: sub, tool: plan, args: {path: child.yaml}}\n")
    r = run("run", "p.yaml", "--events", "e.jsonl", "--junit", "j.xml", "--report", "r.html")
    assert r.code == 0, r
    want = ["sub", "sub/inner", "sub/inner[0]", "sub/inner[1]", "sub/inner[2]"]
    status = run("status", "p.yaml", "--output", "json")
    assert [(s["id"], s["status"]) for s in status.json["steps"]] == [
        (sid, "succeeded") for sid in want
    ]
    assert "pending" not in run("status", "p.yaml").out
    events = [json.loads(line) for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    listed = [e["instances"] for e in events if e.get("step") == "sub/inner"]
    assert listed and all(ids == want[2:] for ids in listed)
    cases = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    assert [(c.get("name"), c.find("skipped")) for c in cases] == [(sid, None) for sid in want]
    assert re.findall(r'data-step="([^"]*)"', (tmp_path / "r.html").read_text()) == want
    # the run's counts are the plan's own steps (planrun.run.stepcounts): the sub-plan's are its
    # `plan` step's, never counted again, so no phantom instances either
    assert "run succeeded: 1 step (1 succeeded)" in r.err and "foreach instances" not in r.err


# ---- validation, dry-run, graph --------------------------------------------------------------


def test_validation_checks_foreach_names_and_the_loop_names_scope(run, write):
    write(
        "p.yaml",
        """
        variables: {pkgs: [a]}
        steps:
          - id: lint
            tool: echo
            foreach: "${pkgz}"
            as: pkg
            args: {value: "${pkg} ${index} ${missing}"}
          - id: self
            tool: echo
            foreach: "${pkg}"
            args: {value: "${item}"}
          - {id: outside, tool: echo, args: {value: "${pkg}"}}
          - {id: text, tool: echo, foreach: "pkgs", args: {value: 1}}
          - {id: lonely, tool: echo, as: x, args: {value: 1}}
          - {id: taken, tool: echo, foreach: [1], as: index, args: {value: 1}}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    lines = r.out.splitlines()
    assert any(
        "p.yaml:5:14: error: step 'lint': foreach: undefined name 'pkgz'" in x
        and "did you mean 'pkgs'" in x
        for x in lines
    ), r
    assert any("step 'lint': args.value: undefined name 'missing'" in x for x in lines), r
    assert not any("undefined name 'pkg'" in x and "'lint'" in x for x in lines), r
    assert any("step 'self': foreach: undefined name 'pkg'" in x for x in lines), r
    assert any("step 'outside': args.value: undefined name 'pkg'" in x for x in lines), r
    assert any(
        "step 'text': foreach: a string must be exactly one ${expression}" in x for x in lines
    )
    assert any("step 'lonely': 'as' names the element of a foreach" in x for x in lines), r
    assert any("step 'taken': as: 'index' is taken" in x for x in lines), r


def test_schema_knows_foreach_and_as(run, write):
    r = run("schema")
    step = r.json["$defs"]["Step"]["properties"]
    assert "foreach" in step and "as" in step and "as_" not in step
    write("p.yaml", "steps:\n  - {id: a, tool: echo, foreach: [1], ass: x}\n")
    r = run("validate", "p.yaml")
    assert r.code == 3 and "unknown key 'ass'" in r.out and "did you mean 'as'" in r.out, r


def test_foreach_reading_a_result_is_a_data_dependency(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: "${xs}", args: {value: "${item}"}}
          - {id: src, tool: echo, args: {value: [1, 2]}, result_variable: xs}
        """,
    )
    r = run("graph", "p.yaml", "--format", "json")
    assert {"from": "src", "to": "fan", "kind": "data"} in r.json["edges"], r
    node = next(n for n in r.json["nodes"] if n["id"] == "fan")
    assert node["instances"] == ["fan[*]"] and node["foreach"] == "<foreach over <src result>>"
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert steps_of(r.json)["fan"]["result"] == [1, 2]


def test_dry_run_shows_instances_or_a_placeholder(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {pkgs: [core, web]}
        steps:
          - {id: files, tool: shell, args: {cmd: "ls"}, result_variable: listing}
          - id: lint
            tool: shell
            foreach: "${pkgs}"
            as: pkg
            title: "lint ${pkg}"
            args: {cmd: "ruff check ${pkg}"}
          - id: each
            tool: shell
            foreach: "${listing.stdout.split()}"
            args: {cmd: "wc -l ${item}"}
          - {id: none, tool: echo, foreach: [], args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "--dry-run")
    assert r.code == 0, r
    assert "plan p: 4 steps (2 foreach instances) in 2 waves (dry run)" in r.out, r
    assert "lint[0]  lint core  [shell]" in r.out and "lint[1]  lint web  [shell]" in r.out
    assert "ruff check core" in r.out
    assert "each[*]" in r.out and "<foreach over <files result>>" in r.out
    r = run("run", "p.yaml", "--dry-run", "--output", "json")
    s = steps_of(r.json)
    assert s["lint[1]"]["args"] == {"cmd": "ruff check web"}
    assert s["lint[1]"]["instance_of"] == "lint"
    assert s["each[*]"]["foreach"] == "<foreach over <files result>>"
    assert s["each[*]"]["depends_on"] == ["files"]
    assert s["none"]["foreach"] == []
    assert r.json["waves"][0] == ["files", "lint[0]", "lint[1]", "none"]
    assert r.json["waves"][1] == ["each[*]"]
    # no state; only the plan cache (docs/state.md) may be there
    assert [p.name for p in tmp_path.glob(".planrun/*")] in ([], ["plans"])


def test_graph_shows_instances_and_their_last_status(run, write):
    write(
        "p.yaml",
        """
        variables: {xs: [1, 2]}
        steps:
          - {id: fan, tool: echo, foreach: "${xs}", args: {value: "${item}"}}
        """,
    )
    r = run("graph", "p.yaml")
    assert "├ ○ fan[0]" in r.out and "└ ○ fan[1]" in r.out, r
    assert "foreach: 2 instances" in run("graph", "p.yaml", "--format", "mermaid").out
    assert "foreach: 2 instances" in run("graph", "p.yaml", "--format", "dot").out
    assert run("run", "p.yaml").code == 0
    r = run("graph", "p.yaml")
    assert "├ ✓ fan[0]" in r.out and "└ ✓ fan[1]" in r.out, r


# ---- the example ------------------------------------------------------------------------------


EXAMPLE = ROOT / "examples/foreach.yaml"


def test_example_foreach_counts_the_listed_files():
    examples = EXAMPLE.parent
    r = planrun("run", "--no-state", "--output", "json", "-j", "4", EXAMPLE.name, cwd=examples)
    assert r.code == 0, r
    s = steps_of(r.json)
    names = sorted(p.name for p in examples.glob("*.yaml"))
    report = s["report"]["result"]
    assert report["files"] == names
    expected = [len((examples / n).read_text().splitlines()) for n in names]
    assert report["lines"] == expected and report["total"] == sum(expected)
    assert [s[f"count[{n}]"]["status"] for n in range(len(names))] == ["succeeded"] * len(names)
    assert report["notes"][0] == "0: yaml means plans are YAML"
    dry = planrun("run", "--dry-run", EXAMPLE.name, cwd=examples)
    assert "count[*]" in dry.out and "<foreach over <files result>>" in dry.out


@pytest.mark.slow
def test_instances_run_on_the_dask_executor(run, write, tmp_path, cluster):
    # `cluster` as an argument, not getfixturevalue: conftest sees it and runs this test in the
    # worker that holds the session's cluster (a second worker would start a second one)
    write("data/a.txt", "1\n")
    write("data/b.txt", "1\n2\n")
    write(
        "p.yaml",
        """
        steps:
          - {id: files, tool: shell, args: {cmd: "ls data"}, result_variable: listing}
          - id: count
            tool: shell
            foreach: "${listing.stdout.split()}"
            args: {cmd: "wc -l < data/${item}"}
            result_variable: counts
          - {id: fail, tool: shell, foreach: [0, 3], on_failure: continue, args: {cmd: "exit ${item}"}}
        """,
    )
    r = run(
        "run", "p.yaml", "--output", "json", "--no-state", "--address", cluster.address, "-j", "4"
    )
    assert r.code == 1, r
    s = steps_of(r.json)
    assert [c["stdout"].strip() for c in s["count"]["result"]] == ["1", "2"]
    assert s["count[1]"]["status"] == "succeeded"
    assert s["fail[1]"]["status"] == "failed" and s["fail"]["status"] == "failed"
    assert s["fail[1]"]["error"] == "command exited with code 3"


PLANNER = """
import json, sys
ctx = json.load(sys.stdin)
json.dump({"seen": ctx["failed_step"]["id"], "foreach": ctx["failed_step"].get("foreach")},
          open("asked.json", "w"))
json.dump([{"id": "fan", "tool": "echo", "foreach": [x * 10 for x in ctx["failed_step"]["foreach"]],
            "args": {"value": "${item}"}, "result_variable": "out"},
           {"id": "after", "tool": "echo", "args": {"value": "${out}"}}], sys.stdout)
"""


def test_replan_gets_the_step_and_a_new_foreach_expands_afresh(run, write, tmp_path):
    write("planner.py", PLANNER)
    write(
        "p.yaml",
        f"""
        replan: {{command: ["{sys.executable}", "planner.py"]}}
        steps:
          - {{id: first, tool: echo, foreach: [a, b], args: {{value: "${{item}}"}}}}
          - id: fan
            tool: shell
            foreach: [1, 2]
            on_failure: replan
            depends_on: [first]
            args: {{cmd: "exit ${{item}}"}}
          - {{id: after, tool: echo, depends_on: [fan], args: {{value: 0}}}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert json.loads((tmp_path / "asked.json").read_text()) == {"seen": "fan", "foreach": [1, 2]}
    s = steps_of(r.json)
    assert s["after"]["result"] == [10, 20]
    assert s["fan[1]"]["result"] == 20 and s["fan"]["status"] == "succeeded"
    # The completed foreach step keeps its instances.
    assert s["first"]["result"] == ["a", "b"] and s["first[1]"]["result"] == "b"


def test_approval_at_a_tty_is_asked_per_instance(write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: shell, foreach: [a, b], approval: true, args: {cmd: "touch ${item}"}}
        """,
    )
    args = ["run", "p.yaml", "--output", "json", "--no-state", "-j", "1"]
    code, out, err = answer_at_tty(tmp_path, args, ["y", "n"])
    assert code == 5, (out, err)
    assert "step 'fan[0]' needs approval" in err and "step 'fan[1]' needs approval" in err
    s = steps_of(json.loads(out))
    assert s["fan[0]"]["status"] == "succeeded" and s["fan[1]"]["status"] == "interrupted"
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_cache_per_instance(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {names: [a, b]}
        steps:
          - id: fan
            tool: shell
            foreach: "${names}"
            cache: true
            args: {cmd: "echo ${item} >> log; echo ${item}"}
            result_variable: out
        """,
    )
    assert run("run", "p.yaml", "--no-state").code == 0
    r = run("run", "p.yaml", "--no-state", "--output", "json")
    s = steps_of(r.json)
    assert (s["fan[0]"]["status"], s["fan[1]"]["status"]) == ("cached", "cached"), r
    assert [x["stdout"] for x in s["fan"]["result"]] == ["a\n", "b\n"]
    dry = steps_of(
        run("run", "p.yaml", "--dry-run", "--output", "json", "--var", "names=[a, c]").json
    )
    assert dry["fan[0]"]["cache"]["status"] == "hit" and dry["fan[1]"]["cache"]["status"] == "miss"
    # A new element misses, the old one still hits.
    r = run("run", "p.yaml", "--no-state", "--output", "json", "--var", "names=[a, c]")
    s = steps_of(r.json)
    assert (s["fan[0]"]["status"], s["fan[1]"]["status"]) == ("cached", "succeeded"), r
    assert sorted((tmp_path / "log").read_text().split()) == ["a", "b", "c"]


STEP_KEYS = {"id", "status", "attempts", "duration_s", "result", "error"}


def test_instances_have_the_step_shape_and_odd_step_ids_keep_their_form(run, write):
    # The mcp-cli `index` alias (an int) and ids with dots and dashes give ID[N] as written.
    write(
        "p.yaml",
        """
        steps:
          - {id: a.b-c, tool: echo, foreach: [x, y], args: {value: "${index}:${item}"}}
          - {index: 7, tool: echo, foreach: [z], args: {value: "${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["a.b-c", "a.b-c[0]", "a.b-c[1]", "7", "7[0]"]
    for entry in r.json["steps"]:
        assert set(entry) == STEP_KEYS, entry
    s = steps_of(r.json)
    assert s["a.b-c[1]"]["result"] == "1:y" and s["a.b-c"]["result"] == ["0:x", "1:y"]
    assert s["7"]["result"] == ["z"] and s["7[0]"]["status"] == "succeeded"


def test_index_is_bound_in_when_and_title(run, write):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            title: "part ${index} of ${item}"
            tool: echo
            foreach: [a, b, c]
            when: "${index != 1}"
            args: {value: "${index}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert [s[f"fan[{n}]"]["status"] for n in range(3)] == ["succeeded", "skipped", "succeeded"]
    assert s["fan"]["result"] == [0, None, 2]
    assert "part 2 of c" in r.err


def test_mappings_give_key_value_in_order_from_a_var_a_result_and_empty(run, write):
    write(
        "p.yaml",
        """
        variables: {m: {}}
        steps:
          - {id: none, tool: echo, foreach: {}, args: {value: "${item}"}, result_variable: a}
          - {id: none2, tool: echo, foreach: "${m}", args: {value: "${item}"}, result_variable: b}
          - {id: src, tool: echo, args: {value: {zeta: 1, alpha: 2, mid: 3}}, result_variable: got}
          - id: dyn
            tool: echo
            foreach: "${got}"
            as: kv
            args: {value: "${kv.key}=${kv.value}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--var", "m={b: 1, a: 2}")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["none"]["result"] == [] and "none[0]" not in s
    assert s["none2"]["result"] == [{"key": "b", "value": 1}, {"key": "a", "value": 2}]
    assert s["dyn"]["result"] == ["zeta=1", "alpha=2", "mid=3"]
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert steps_of(r.json)["none2"]["result"] == [], r


def test_abort_leaves_instances_that_never_started_pending(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - id: fan
            tool: shell
            foreach: [fail, a, b]
            args: {cmd: "if [ ${item} = fail ]; then exit 3; fi; touch ran-${item}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "-j", "1", "--junit", "j.xml")
    assert r.code == 1, r
    s = steps_of(r.json)
    assert [s[f"fan[{n}]"]["status"] for n in range(3)] == ["failed", "pending", "pending"]
    assert s["fan"]["status"] == "failed" and not list(tmp_path.glob("ran-*"))
    # the console's closing line counts every instance of the step, not just those that started
    assert "3 foreach instances (1 failed, 2 pending)" in r.err, r.err
    # state, status and JUnit list them too, as --output json does
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert state["steps"]["fan[1]"]["status"] == "pending"
    status = run("status", "p.yaml", "--output", "json")
    assert [(x["id"], x["status"]) for x in status.json["steps"]] == [
        (x["id"], x["status"]) for x in r.json["steps"]
    ]
    cases = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases] == ["fan", "fan[0]", "fan[1]", "fan[2]"]


def test_the_state_file_holds_each_instance_under_its_id(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: [x, y], args: {value: "${item}!"}}
        """,
    )
    assert run("run", "p.yaml").code == 0
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert {"fan", "fan[0]", "fan[1]"} <= set(state["steps"])
    assert state["steps"]["fan[1]"]["status"] == "succeeded"
    assert state["steps"]["fan[1]"]["result"] == "y!"
    assert state["steps"]["fan"]["result"] == ["x!", "y!"]


def test_an_instance_skipped_by_when_is_a_step_skipped_event(run, write, tmp_path):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: [1, 2], when: "${item > 1}", args: {value: 1}}
        """,
    )
    assert run("run", "p.yaml", "--no-state", "--events", "e.jsonl").code == 0
    events = [json.loads(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    seen = [(e["event"], e.get("step")) for e in events]
    assert ("step.skipped", "fan[0]") in seen and ("step.succeeded", "fan[1]") in seen
    assert ("step.started", "fan[0]") not in seen
    assert seen[-1] == ("run.finished", None)


@pytest.mark.parametrize(("value", "word"), [('"abc"', "a string"), ("42", "a number")])
def test_a_result_that_is_not_a_list_fails_the_step_clearly(run, write, value, word):
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: src, tool: echo, args: {{value: {value}}}, result_variable: out}}
          - {{id: fan, tool: shell, foreach: "${{out}}", args: {{cmd: "true"}}}}
          - {{id: after, tool: echo, depends_on: [fan], args: {{value: 1}}}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert_no_traceback(r)
    assert r.code == 1, r
    s = steps_of(r.json)
    assert s["fan"]["status"] == "failed" and "fan[0]" not in s
    assert f"foreach gave {word}" in s["fan"]["error"]
    assert "not a list or a mapping" in s["fan"]["error"]
    assert s["after"]["status"] == "pending"


def test_targets_select_all_of_a_steps_instances(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: fan, tool: echo, foreach: [a, b], args: {value: "${item}"}}
          - {id: other, tool: echo, args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "fan", "--output", "json", "--no-state")
    assert r.code == 0, r
    assert [s["id"] for s in r.json["steps"]] == ["fan", "fan[0]", "fan[1]"]
    # an instance is no target of its own (docs/foreach.md): exit 2, pointing at its step
    r = run("run", "p.yaml", "fan[1]", "--no-state")
    assert r.code == 2 and "no step 'fan[1]'" in r.err and "did you mean 'fan'?" in r.err, r


def test_a_typod_instance_id_of_a_short_step_gets_its_hint(run, write):
    # `m[1]` is too far from `m` as a whole word for the close-match cutoff: the hint compares
    # an instance id by its step part, as it does for a longer id (`fan[1]` above)
    write(
        "p.yaml",
        """
        steps:
          - {id: m, tool: echo, matrix: {n: [1, 2]}, args: {value: "${matrix.n}"}}
          - {id: other, tool: echo, args: {value: 1}}
        """,
    )
    for args in (["m[1]"], ["--only", "m[1]"], ["--only", "mm[1]"]):
        r = run("run", "p.yaml", *args, "--no-state")
        assert r.code == 2 and f"no step '{args[-1]}'" in r.err, r
        assert "(did you mean 'm'?)" in r.err, r
    # --force takes an instance: a typo'd one is pointed at the instance of its step
    r = run("run", "p.yaml", "--force=mm[1]", "--no-state")
    assert r.code == 2 and "--force: no step 'mm[1]'" in r.err, r
    assert "(did you mean 'm[1]'?)" in r.err, r
    # no hint where the step part is not close either
    for args in (["x[1]"], ["--force=x[1]"]):
        r = run("run", "p.yaml", *args, "--no-state")
        assert r.code == 2 and "did you mean" not in r.err, r


def test_hostile_elements_reach_each_instance_verbatim(run, write, tmp_path):
    elements = ["$(touch pwned)", "`touch pwned2`", 'it\'s "q"', "a\nb", "ünï 🎉", "$HOME", ""]
    write(
        "p.yaml",
        'steps:\n  - {id: fan, tool: shell, foreach: "${xs}", args: {cmd: "printf %s ${item}"}}\n',
    )
    (tmp_path / "v.json").write_text(json.dumps({"xs": elements + [{"k": [1, None]}]}))
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--vars-file", "v.json")
    assert r.code == 0, r
    outs = [x["stdout"] for x in steps_of(r.json)["fan"]["result"]]
    assert outs == elements + ['{"k": [1, null]}']
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_a_huge_list_fails_the_step_in_one_line_before_any_instance(run, write, tmp_path):
    write(
        "p.yaml",
        """
        variables: {xs: []}
        steps:
          - {id: fan, tool: shell, foreach: "${xs}", args: {cmd: "touch ran"}}
        """,
    )
    # Twice the bound (100,000) is as refused as any larger list, and reads in a fifth of the
    # time of a million. No timing claim: the instances a huge list would build are bounded in
    # memory by test_a_foreach_over_too_many_items_fails_its_step; the run's timeout bounds a hang.
    (tmp_path / "v.json").write_text(json.dumps({"xs": list(range(200_000))}))
    r = run("run", "p.yaml", "--output", "json", "--no-state", "--vars-file", "v.json", timeout=120)
    assert_no_traceback(r)
    assert r.code == 1, r
    error = steps_of(r.json)["fan"]["error"]
    assert "\n" not in error and "200,000 items" in error and "100,000" in error
    assert not (tmp_path / "ran").exists()


def test_dry_run_of_an_unknown_list_is_one_line_with_the_placeholder(run, write):
    write(
        "p.yaml",
        """
        steps:
          - {id: src, tool: shell, args: {cmd: "ls"}, result_variable: listing}
          - {id: each, tool: echo, foreach: "${listing.stdout.split()}", args: {value: "${item}"}}
        """,
    )
    r = run("run", "p.yaml", "--dry-run")
    assert r.code == 0, r
    heads = [x.strip() for x in r.out.splitlines() if x.lstrip("•∥ ").startswith("each")]
    assert len(heads) == 1 and "each[*]" in heads[0], r.out
    assert "<foreach over <src result>>" in r.out


def test_instances_skipped_by_when_are_not_charged_to_the_budget(run, write):
    write(
        "p.yaml",
        """
        limits: {max_steps: 2}
        steps:
          - {id: fan, tool: echo, foreach: [1, 2, 3, 4], when: "${item % 2 == 0}", args: {value: 1}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0 and r.json["reason"] == "completed", r
    write(
        "q.yaml",
        """
        limits: {max_steps: 2}
        steps:
          - {id: fan, tool: echo, foreach: [1, 2, 3], args: {value: 1}}
        """,
    )
    r = run("run", "q.yaml", "--output", "json", "--no-state", "-j", "1")
    assert r.code == 1 and r.json["reason"] == "step_budget", r
    assert "limits.max_steps is 2" in steps_of(r.json)["fan[2]"]["error"]


def test_a_gated_foreach_with_no_instance_that_can_run_does_not_block(run, write, tmp_path):
    # Approval up front counts only what can run: each instance has the step's `when` and
    # approval, so a list known at start whose every `when` is false, or an empty list, holds
    # nothing up; one instance that can run still blocks (exit 5), naming the step.
    write(
        "p.yaml",
        """
        variables: {xs: [1, 2]}
        steps:
          - {id: none, tool: echo, foreach: "${xs}", approval: true, when: "${item > 5}", args: {value: 1}}
          - {id: empty, tool: echo, foreach: [], approval: true, args: {value: 1}}
          - {id: free, tool: shell, args: {cmd: "touch ran"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["none"]["status"] == "skipped" and s["empty"]["result"] == []
    assert (tmp_path / "ran").exists()
    r = run("run", "p.yaml", "--output", "json", "--var", "xs=[1, 9]")
    assert r.code == 5 and r.json["reason"] == "approval_required", r
    assert "none" in r.err and "empty" not in r.err.split("approval required for:")[1]


def test_a_foreach_over_too_many_items_fails_its_step(tmp_path: Path) -> None:
    # A million instances took more than 600 MB (about 1.5 kB each) before the first ran.
    (tmp_path / "v.json").write_text(json.dumps({"xs": list(range(100_001))}))
    write_p_yaml(
        tmp_path,
        """
        variables: {xs: []}
        steps:
          - {id: a, tool: echo, foreach: "${xs}", args: {value: "${item}"}}
        """,
    )
    r = bounded_planrun(
        tmp_path, "run", "p.yaml", "--no-state", "--vars-file", "v.json", "--output", "json"
    )
    error = one_step_error(r)
    assert "100,001" in error and "100,000" in error, r


def test_a_filter_or_range_giving_items_one_by_one_is_a_list(run, write):
    """`map`, `select`, `reverse`, `unique`, `range`, a mapping's `keys()`: what a Jinja
    expression gives item by item is a list, to `foreach` as to a whole-value argument and
    a template, never a Python repr (`<generator object ...>`, `range(0, 3)`)."""
    write(
        "p.yaml",
        """
        variables: {xs: [a, b, a], m: {k: 1, j: 2}}
        steps:
          - {id: up, tool: echo, foreach: "${xs | map('upper')}", args: {value: "${item}"}}
          - {id: uniq, tool: echo, foreach: "${xs | unique}", args: {value: "${item}"}}
          - {id: rng, tool: echo, foreach: "${range(3)}", args: {value: "${item}"}}
          - {id: keys, tool: echo, foreach: "${m.keys()}", args: {value: "${item}"}}
          - {id: none, tool: echo, foreach: "${xs | select('none')}", args: {value: "${item}"}}
          - {id: whole, tool: echo, args: {value: "${xs | reverse}"}}
          - {id: pairs, tool: echo, args: {value: "${m.items()}"}}
          - {id: text, tool: echo, args: {value: "got ${xs | map('upper')} and ${range(2)}"}}
          - {id: empty, tool: echo, args: {value: 1}, when: "${xs | select('none')}"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert r.code == 0, r
    s = steps_of(r.json)
    assert s["up"]["result"] == ["A", "B", "A"]
    assert s["uniq"]["result"] == ["a", "b"]
    assert s["rng"]["result"] == [0, 1, 2] and s["rng[2]"]["result"] == 2
    assert s["keys"]["result"] == ["k", "j"]
    assert s["none"]["result"] == [] and s["none"]["status"] == "succeeded"
    assert s["whole"]["result"] == ["a", "b", "a"]
    assert s["pairs"]["result"] == [["k", 1], ["j", 2]]
    assert s["text"]["result"] == 'got ["A", "B", "A"] and [0, 1]'
    assert s["empty"]["status"] == "skipped"  # an empty selection is false, as [] is


def test_the_state_file_lists_instances_right_after_their_step(run, write, tmp_path):
    """As --output json and status do (docs/foreach.md), on a first run and on a resume whose
    list changed."""
    write(
        "p.yaml",
        """
        variables: {xs: [a, b]}
        steps:
          - {id: fan, tool: echo, foreach: "${xs}", args: {value: "${item}"}}
          - {id: next, tool: echo, args: {value: 1}}
          - {id: last, tool: echo, foreach: [1], args: {value: "${item}"}, depends_on: [next]}
        """,
    )
    state_file = tmp_path / ".planrun/state/p.json"
    assert run("run", "p.yaml").code == 0
    order = ["fan", "fan[0]", "fan[1]", "next", "last", "last[0]"]
    assert list(json.loads(state_file.read_text())["steps"]) == order
    assert run("run", "p.yaml", "--var", "xs=[a, b, c]").code == 0
    order = ["fan", "fan[0]", "fan[1]", "fan[2]", "next", "last", "last[0]"]
    assert list(json.loads(state_file.read_text())["steps"]) == order
    assert run("resume", "p.yaml", "--var", "xs=[c]").code == 0
    order = ["fan", "fan[0]", "next", "last", "last[0]"]
    assert list(json.loads(state_file.read_text())["steps"]) == order


@pytest.mark.parametrize("name", ["true", "False", "none", "None", "self"])
def test_as_a_name_expressions_cannot_read_is_a_validation_error(run, write, name):
    """`${none}` is Jinja's constant and `${self}` its template: an element bound to such a
    name was silently never read (every instance got null) or failed every instance with
    "got multiple values for argument 'self'"."""
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: fan, tool: echo, foreach: [a, b], as: "{name}", args: {{value: "${{{name}}}"}}}}
        """,
    )
    r = run("validate", "p.yaml")
    assert r.code == 3, r
    said = f"p.yaml:2:48: error: step 'fan': as: '{name}' is a name expressions cannot read"
    assert r.out.startswith(said), r


REMOVING_PLANNER = """
import json, sys
json.dump([{"id": "fix", "tool": "echo", "args": {"value": "fixed"}}], sys.stdout)
"""


def test_a_foreach_step_a_planner_removes_takes_its_instances_from_the_state(run, write):
    """`status --output json` is the run document read from the state: after a revision that
    removed a failed foreach step, it listed the step's instances (`fan[0]`...) on their own,
    which the run's own document no longer had."""
    write("planner.py", REMOVING_PLANNER)
    write(
        "p.yaml",
        f"""
        replan: {{command: ["{sys.executable}", "planner.py"]}}
        steps:
          - {{id: first, tool: echo, foreach: [a, b], args: {{value: "${{item}}"}}}}
          - id: fan
            tool: shell
            foreach: [0, 1, 2]
            max_parallel: 1
            on_failure: replan
            depends_on: [first]
            args: {{cmd: "exit ${{item}}"}}
          - {{id: after, tool: echo, depends_on: [fan], args: {{value: 0}}}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    ran = [s["id"] for s in r.json["steps"]]
    assert ran == ["first", "first[0]", "first[1]", "fix"], ran
    status = run("status", "p.yaml", "--output", "json")
    assert status.code == 0, status
    assert [s["id"] for s in status.json["steps"]] == ran
    assert status.json["steps"] == r.json["steps"]


def test_a_deeply_nested_result_feeds_a_foreach_and_arguments(run, write):
    """A python step's result nested 900 deep (JSON takes it) read by `foreach` and as a
    whole argument: copying it for the step recursed and the run died with an internal
    RecursionError."""
    write(
        "deep.py",
        """
        def deep(n):
            value = 1
            for _ in range(n):
                value = [value]
            return value
        """,
    )
    write(
        "p.yaml",
        """
        steps:
          - {id: make, tool: python, args: {function: "deep:deep", kwargs: {n: 900}}, result_variable: d}
          - {id: fan, tool: echo, foreach: "${[d, d]}", args: {value: "${index}"}}
          - {id: whole, tool: echo, args: {value: "${d if true else 0}"}}
        """,
    )
    r = run("run", "p.yaml", "--output", "json", "--no-state")
    assert_no_traceback(r)
    assert r.code == 0, r
    got = steps_of(r.json)
    assert got["fan"]["result"] == [0, 1]
    assert got["whole"]["status"] == "succeeded"
