"""`always: true`: a step that runs once its dependencies have finished, whatever their status."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    assert_no_process_left,
    planrun,
    spawn_planrun,
    unique_sleep,
    wait_for_command,
)


def steps_of(r):
    return {s["id"]: s for s in r.json["steps"]}


def test_always_runs_after_an_abort_and_the_run_still_fails(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: build, tool: shell, args: {cmd: "exit 3"}}
          - {id: deploy, tool: echo, args: {value: x}, depends_on: [build]}
          - id: cleanup
            tool: shell
            args: {cmd: "echo ${steps.build.status} > cleaned"}
            depends_on: [deploy]
            always: true
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    steps = steps_of(r)
    assert steps["build"]["status"] == "failed"
    assert steps["deploy"]["status"] != "succeeded"
    assert steps["cleanup"]["status"] == "succeeded", r
    assert (tmp_path / "cleaned").read_text().strip() == "failed"


def test_always_runs_after_a_continue_failure_and_its_when_applies(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: shell, args: {cmd: "exit 1"}, on_failure: continue}
          - {id: b, tool: echo, args: {value: 1}, depends_on: [a]}
          - {id: notify, tool: echo, args: {value: 1}, depends_on: [b], always: true,
             when: "${steps.a.status == 'failed'}"}
          - {id: quiet, tool: echo, args: {value: 1}, depends_on: [b], always: true,
             when: "${steps.a.status == 'succeeded'}"}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    steps = steps_of(r)
    assert steps["b"]["status"] == "skipped"
    assert steps["notify"]["status"] == "succeeded"
    assert steps["quiet"]["status"] == "skipped"


def test_a_failing_always_step_fails_a_successful_run(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: cleanup, tool: shell, args: {cmd: "exit 2"}, depends_on: [a], always: true}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert steps_of(r)["cleanup"]["status"] == "failed"


def test_always_in_dry_run_and_graph(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}}
          - {id: cleanup, tool: echo, args: {value: 1}, depends_on: [a], always: true}
        """,
    )
    r = run("run", "plan.yaml", "--dry-run")
    assert r.code == 0, r
    line = next(line for line in r.out.splitlines() if "cleanup" in line)
    assert "always" in line, r
    g = run("graph", "plan.yaml")
    assert "cleanup (always)" in g.out, g


def test_list_and_show_mark_an_always_step(run, write):
    """A reader of `list` or `show` can tell a cleanup step, as in the dry run and `graph`."""
    write(
        "plan.yaml",
        """
        steps:
          - {id: build, tool: echo, args: {value: 1}}
          - {id: cleanup, tool: echo, args: {value: 1}, depends_on: [build], always: true}
        """,
    )
    r = run("list", "plan.yaml")
    assert r.code == 0, r
    lines = {line.split()[0]: line for line in r.out.splitlines()[1:]}
    assert lines["cleanup"].endswith("(always)"), r.out
    assert "always" not in lines["build"], r.out
    rows = {
        s["id"]: s for s in json.loads(run("list", "plan.yaml", "--output", "json").out)["steps"]
    }
    assert rows["cleanup"]["always"] is True and "always" not in rows["build"], rows
    r = run("show", "plan.yaml", "cleanup")
    assert r.code == 0, r
    assert "  always:   runs whatever its dependencies come to" in r.out.splitlines(), r.out
    assert "always" not in run("show", "plan.yaml", "build").out
    shown = json.loads(run("show", "plan.yaml", "cleanup", "--output", "json").out)
    assert shown["always"] is True, shown
    assert json.loads(run("show", "plan.yaml", "build", "--output", "json").out)["always"] is False


def test_an_always_foreach_or_matrix_step_runs_its_instances_after_an_abort(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: build, run: "exit 3"}
          - {id: deploy, tool: echo, args: {value: x}, depends_on: [build]}
          - id: clean
            foreach: [a, b]
            run: echo ${item} >> cleaned-${item}
            depends_on: [deploy]
            always: true
            result_variable: cleaned
          - id: wipe
            matrix: {os: [linux, mac], py: ["3.11"]}
            max_parallel: 1
            run: "echo ${steps.build.status} > wiped-${matrix.os}"
            depends_on: [build]
            always: true
          - id: skipped
            foreach: [a]
            tool: echo
            args: {value: 1}
            when: "${steps.build.status == 'succeeded'}"
            depends_on: [build]
            always: true
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "step_failed", r
    statuses = {sid: s["status"] for sid, s in steps_of(r).items()}
    assert statuses == {
        "build": "failed",
        "deploy": "pending",
        "clean": "succeeded",
        "clean[0]": "succeeded",
        "clean[1]": "succeeded",
        "wipe": "succeeded",
        "wipe[0]": "succeeded",
        "wipe[1]": "succeeded",
        "skipped": "skipped",
        "skipped[0]": "skipped",
    }, r
    assert (tmp_path / "cleaned-a").read_text() == "a\n"
    assert (tmp_path / "cleaned-b").read_text() == "b\n"
    assert (tmp_path / "wiped-linux").read_text() == "failed\n"
    assert (tmp_path / "wiped-mac").read_text() == "failed\n"


# A step that waits until the events file shows a step failed (a bounded poll on what planrun
# wrote, not a sleep): it is running at the moment of the abort, and ends after it.
def after_the_failure(name: str) -> str:
    return (
        f"touch started-{name}; "
        f"until grep -q step.failed ev.jsonl; do sleep 0.02; done; echo done > cleaned-{name}"
    )


def test_an_abort_elsewhere_lets_a_running_always_step_finish(run, write, tmp_path):
    write(
        "plan.yaml",
        f"""
        steps:
          - {{id: setup, run: "true"}}
          - id: cleanup
            run: "{after_the_failure("x")}"
            depends_on: [setup]
            always: true
            timeout: 60s
          - {{id: build, run: "until [ -e started-x ]; do sleep 0.02; done; exit 3"}}
          - {{id: deploy, run: "true", depends_on: [build]}}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 1, r
    assert r.json["reason"] == "step_failed", r
    statuses = {sid: s["status"] for sid, s in steps_of(r).items()}
    assert statuses == {
        "setup": "succeeded",
        "cleanup": "succeeded",
        "build": "failed",
        "deploy": "pending",
    }, r
    assert (tmp_path / "cleaned-x").read_text() == "done\n"


def test_an_abort_elsewhere_lets_an_always_foreach_step_finish_its_instances(run, write, tmp_path):
    write(
        "plan.yaml",
        f"""
        steps:
          - {{id: setup, run: "true"}}
          - id: cleanup
            foreach: [a, b]
            max_parallel: 1
            run: "{after_the_failure("${item}")}"
            depends_on: [setup]
            always: true
            timeout: 60s
          - {{id: build, run: "until [ -e started-a ]; do sleep 0.02; done; exit 3"}}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json", "--events", "ev.jsonl")
    assert r.code == 1, r
    statuses = {sid: s["status"] for sid, s in steps_of(r).items()}
    assert statuses == {
        "setup": "succeeded",
        "cleanup": "succeeded",
        "cleanup[0]": "succeeded",
        "cleanup[1]": "succeeded",
        "build": "failed",
    }, r
    assert (tmp_path / "cleaned-a").read_text() == "done\n"
    assert (tmp_path / "cleaned-b").read_text() == "done\n"


def test_always_after_ignore_a_skipped_or_a_cached_dependency(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: lenient, run: "exit 1", on_failure: ignore}
          - {id: off, run: "true", when: "${false}"}
          - {id: made, run: "echo hi > made.txt", outputs: [made.txt]}
          - id: cleanup
            run: "echo ${steps.lenient.status} ${steps.off.status} >> cleaned"
            depends_on: [lenient, off, made]
            always: true
        """,
    )
    first = run("run", "plan.yaml", "--output", "json")
    assert first.code == 0, first
    again = run("run", "plan.yaml", "--output", "json")
    assert again.code == 0, again
    statuses = {sid: s["status"] for sid, s in steps_of(again).items()}
    assert statuses == {
        "lenient": "ignored",
        "off": "skipped",
        "made": "cached",
        "cleanup": "succeeded",
    }, again
    assert (tmp_path / "cleaned").read_text() == "ignored skipped\n" * 2


def test_a_target_selects_its_cleanup_only_when_the_cleanup_is_the_target(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        steps:
          - {id: build, run: "exit 1"}
          - {id: cleanup, run: "touch cleaned", depends_on: [build], always: true}
        """,
    )
    r = run("run", "plan.yaml", "build", "--output", "json")
    assert r.code == 1, r
    assert list(steps_of(r)) == ["build"], r
    assert not (tmp_path / "cleaned").exists()
    r = run("run", "plan.yaml", "cleanup", "--output", "json")
    assert r.code == 1, r
    assert {sid: s["status"] for sid, s in steps_of(r).items()} == {
        "build": "failed",
        "cleanup": "succeeded",
    }, r


def _statuses(tmp_path: Path) -> dict[str, str]:
    status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    assert status.code == 0, status
    doc = json.loads(status.out)
    return {"run": doc["status"], **{s["id"]: s["status"] for s in doc["steps"]}}


def _cleanup_plan(tmp_path: Path) -> str:
    """build waits (a unique sleep) until a file `go` exists; cleanup logs what build came to."""
    sleep = unique_sleep(600)
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n"
        f'  - {{id: build, run: "echo build >> log; test -e go || {sleep}"}}\n'
        '  - {id: cleanup, run: "echo cleanup-${steps.build.status} >> log", '
        "depends_on: [build], always: true}\n"
    )
    return sleep


@pytest.mark.slow  # real processes and signals
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_after_an_interrupt_always_does_not_run_and_resume_runs_it_after(
    tmp_path: Path, sig: int
) -> None:
    sleep = _cleanup_plan(tmp_path)
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    wait_for_command(sleep)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert _statuses(tmp_path) == {
        "run": "interrupted",
        "build": "interrupted",
        "cleanup": "pending",
    }
    assert (tmp_path / "log").read_text() == "build\n"
    assert_no_process_left(sleep)
    (tmp_path / "go").touch()
    again = planrun("resume", "p.yaml", "-q", cwd=tmp_path)
    assert again.code == 0, again
    assert (tmp_path / "log").read_text() == "build\nbuild\ncleanup-succeeded\n"


@pytest.mark.slow  # real processes and kill -9
def test_after_kill_9_resume_runs_the_interrupted_step_then_always(tmp_path: Path) -> None:
    sleep = _cleanup_plan(tmp_path)
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.DEVNULL)
    wait_for_command(sleep)
    proc.kill()  # its command lives on in its own group: the resume stops it
    proc.wait()
    (tmp_path / "go").touch()
    assert _statuses(tmp_path) == {
        "run": "interrupted",
        "build": "interrupted",
        "cleanup": "pending",
    }
    again = planrun("resume", "p.yaml", "-q", cwd=tmp_path)
    assert again.code == 0, again
    assert (tmp_path / "log").read_text() == "build\nbuild\ncleanup-succeeded\n"
    assert_no_process_left(sleep)


def test_always_runs_after_a_budget_stops_the_run(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        limits: {tool_caps: {shell: 1}}
        steps:
          - {id: a, run: "true"}
          - {id: b, run: "true", depends_on: [a]}
          - id: cleanup
            tool: write_file
            args: {path: cleaned, content: "${steps.b.status}"}
            depends_on: [b]
            always: true
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "step_budget", r
    assert {sid: s["status"] for sid, s in steps_of(r).items()} == {
        "a": "succeeded",
        "b": "failed",
        "cleanup": "succeeded",
    }, r
    assert (tmp_path / "cleaned").read_text() == "failed"


def test_always_runs_when_the_planner_gives_up(run, write, tmp_path):
    write("planner.py", "print('[]')\n")
    write(
        "plan.yaml",
        f"""
        replan: {{command: ["{sys.executable}", "planner.py"]}}
        steps:
          - {{id: a, run: "exit 1", on_failure: replan}}
          - id: cleanup
            tool: write_file
            args: {{path: cleaned, content: "${{steps.a.status}}"}}
            depends_on: [a]
            always: true
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "no_plan", r
    assert steps_of(r)["cleanup"]["status"] == "succeeded", r
    assert (tmp_path / "cleaned").read_text() == "failed"


def test_an_abort_in_the_parent_runs_a_running_sub_plans_always_steps(run, write, tmp_path):
    sleep = unique_sleep(600)
    write(
        "sub.yaml",
        f"""
        steps:
          - {{id: up, run: "touch started; {sleep}", timeout: 10m}}
          - {{id: down, run: "echo ${{steps.up.status}} > down", depends_on: [up], always: true}}
          - {{id: later, run: "touch later", depends_on: [up]}}
        """,
    )
    write(
        "plan.yaml",
        """
        steps:
          - {id: env, tool: plan, args: {path: sub.yaml}}
          - {id: lint, run: "until [ -e started ]; do sleep 0.02; done; exit 1"}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["reason"] == "step_failed", r
    statuses = {sid: s["status"] for sid, s in steps_of(r).items()}
    assert statuses == {
        "env": "interrupted",
        "env/up": "interrupted",
        "env/down": "succeeded",
        "lint": "failed",
    }, r
    assert (tmp_path / "down").read_text() == "interrupted\n"
    assert not (tmp_path / "later").exists()
    assert_no_process_left(sleep)
