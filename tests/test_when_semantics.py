"""`when` at run time: reacting to a failed or skipped step, and approval gates known to be off."""

from __future__ import annotations

from tests.conftest import assert_no_traceback

NOTIFY = """
steps:
  - {id: build, tool: shell, args: {cmd: "exit 3"}, on_failure: continue}
  - {id: deploy, tool: echo, args: {value: deployed}, depends_on: [build]}
  - id: notify
    tool: echo
    args: {value: "build ${steps.build.status}: ${steps.build.error}"}
    when: "${steps.build.status == 'failed'}"
  - id: cleanup
    tool: echo
    args: {value: cleaned}
    when: "steps['deploy']['status'] == 'skipped' and steps.build.status != 'succeeded'"
  - id: uses_result
    tool: echo
    args: {value: 1}
    when: "${steps.build.result is none}"
"""


def test_a_when_reading_a_failed_steps_status_decides(run, write):
    write("plan.yaml", NOTIFY)
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["build"]["status"] == "failed"
    assert steps["deploy"]["status"] == "skipped"
    assert steps["deploy"]["error"] == "upstream failed: build"
    assert steps["notify"]["status"] == "succeeded"
    assert steps["notify"]["result"] == "build failed: command exited with code 3"
    # reads the status of a step that was skipped because build failed
    assert steps["cleanup"]["status"] == "succeeded"
    # reads only the result: skipped like any other dependent
    assert steps["uses_result"]["status"] == "skipped"
    assert steps["uses_result"]["error"] == "upstream failed: build"
    assert_no_traceback(r)


def test_a_false_condition_still_skips_a_step_reacting_to_failure(run, write):
    write("plan.yaml", NOTIFY.replace('"exit 3"', '"true"'))
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["notify"]["status"] == "skipped" and steps["notify"]["error"] is None
    assert steps["deploy"]["status"] == "succeeded"


GATED = """
variables: {publish: false}
steps:
  - {id: build, tool: echo, args: {value: built}, result_variable: built}
  - id: upload
    tool: echo
    args: {value: "${built}"}
    approval: true
    when: "${publish and env.CI_RELEASE == 'yes'}"
"""


def test_an_approval_gate_that_is_off_from_the_start_does_not_block(run, write):
    write("plan.yaml", GATED)
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    assert [s["status"] for s in r.json["steps"]] == ["succeeded", "skipped"]


def test_an_approval_gate_that_may_open_blocks_without_a_tty(run, write):
    write("plan.yaml", GATED)
    r = run("run", "plan.yaml", "--var", "publish=true", env={"CI_RELEASE": "yes"})
    assert r.code == 5, r
    assert "upload" in r.err
    # a condition on a step's result is not known at start: the gate counts
    write("other.yaml", GATED.replace("${publish and env.CI_RELEASE == 'yes'}", "${built == 'x'}"))
    r = run("run", "other.yaml")
    assert r.code == 5, r


def test_a_result_variable_shadowing_a_plan_variable_is_not_known_at_start(run, write):
    write(
        "plan.yaml",
        """
        variables: {go: false}
        steps:
          - {id: decide, tool: echo, args: {value: true}, result_variable: go}
          - {id: upload, tool: echo, args: {value: 1}, approval: true, when: "${go}"}
        """,
    )
    r = run("run", "plan.yaml")
    assert r.code == 5, r
