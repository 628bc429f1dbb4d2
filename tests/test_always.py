"""`always: true`: a step that runs once its dependencies have finished, whatever their status."""

from __future__ import annotations


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
