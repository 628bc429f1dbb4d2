"""`${…}` in the keys of a mapping in a step's `args` and `env`: a key is a string of the
arguments, so it is rendered as any other (never passed on as written), read by validation
and by the data-flow edges, and `$${` in it is a literal `${`."""

from __future__ import annotations

from tests.conftest import assert_no_traceback

PLAN = """
variables: {k: name}
env: {"P_${k | upper}": plan}
steps:
  - id: make
    tool: echo
    args: {value: {"${k}": 1, "x-${k}": "${k}", "$${k}": 3, "${1 + 1}": two}}
  - id: sh
    tool: shell
    env: {"S_${k | upper}": step}
    args:
      cmd: 'printf "%s|%s|%s" "$A_NAME" "$S_NAME" "$P_NAME"'
      env: {"A_${k | upper}": arg}
"""


def test_keys_in_args_and_env_are_rendered(run, write):
    write("plan.yaml", PLAN)
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert steps["make"]["result"] == {"name": 1, "x-name": "name", "${k}": 3, "2": "two"}
    assert steps["sh"]["result"]["stdout"] == "arg|step|plan"
    dry = run("run", "plan.yaml", "--dry-run", "--output", "json")
    assert dry.json["steps"][0]["args"]["value"] == steps["make"]["result"], dry


def test_a_key_reading_a_result_makes_a_data_flow_edge(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: use, tool: echo, args: {value: {"${got}": 1}}}
          - {id: get, tool: echo, args: {value: key}, result_variable: got}
        """,
    )
    g = run("graph", "plan.yaml", "--format", "json")
    assert {"from": "get", "to": "use", "kind": "data"} in g.json["edges"], g
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    assert {s["id"]: s["result"] for s in r.json["steps"]}["use"] == {"key": 1}


def test_an_undefined_name_in_a_key_is_a_validation_error(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: {"${nope}": 1}}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert "undefined name 'nope'" in r.out, r
    assert r.out.startswith("plan.yaml:2:"), r  # the line of the key


def test_two_keys_rendering_alike_fail_the_step_in_one_line(run, write):
    write(
        "plan.yaml",
        """
        variables: {a: x, b: x}
        steps:
          - {id: a, tool: echo, args: {value: {"${a}": 1, "${b}": 2}}}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    error = r.json["steps"][0]["error"]
    assert error.startswith("step 'a': args.value: two keys render as 'x'"), error
    assert_no_traceback(r)
