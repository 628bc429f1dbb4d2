"""Plan semantics that validation must get right: empty plans, self-dependencies, `when` as one
expression, `steps[...]` only by literal id, `env`/`steps` as reserved names."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from planrun.plan.validate import validate_plan
from tests.conftest import assert_no_traceback


@pytest.fixture
def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """check(text, variables=None) -> the rendered diagnostics of plan.yaml, in order."""
    monkeypatch.chdir(tmp_path)

    def _check(text: str, variables: dict | None = None) -> list[str]:
        (tmp_path / "plan.yaml").write_text(textwrap.dedent(text).lstrip())
        return [d.render() for d in validate_plan("plan.yaml", variables)]

    return _check


# ---- empty plans -------------------------------------------------------------------------


def test_an_empty_step_list_is_valid_with_a_warning(check):
    assert check("name: x\nsteps: []\n") == ["plan.yaml:2:8: warning: the plan has no steps"]


def test_a_plan_without_steps_key_is_an_error(check):
    out = check("name: x\n")
    assert len(out) == 1 and out[0].startswith("plan.yaml:1:1: error: "), out
    assert "'steps'" in out[0]


def test_an_empty_plan_runs_and_succeeds(run, write):
    write("plan.yaml", "name: empty\nsteps: []\n")
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    assert r.json["status"] == "succeeded" and r.json["steps"] == []
    assert_no_traceback(r)
    v = run("validate", "plan.yaml")
    assert v.code == 0, v
    assert "warning: the plan has no steps" in v.out


# ---- self-dependency ---------------------------------------------------------------------


def test_depending_on_itself_is_the_cycle_a_to_a(check):
    out = check("""
        steps:
          - {id: a, tool: echo, args: {value: 1}, depends_on: [a]}
    """)
    assert out == ["plan.yaml:2:56: error: dependency cycle: a -> a"]


def test_reading_its_own_result_variable_is_a_cycle(check):
    out = check("""
        steps:
          - id: b
            tool: echo
            args: {value: "${x}"}
            result_variable: x
    """)
    assert out == ["plan.yaml:4:19: error: dependency cycle: b -> b"]


def test_reading_its_own_status_is_a_cycle(check):
    out = check("""
        steps:
          - id: b
            tool: echo
            args: {value: 1}
            when: "steps.b.status == 'failed'"
    """)
    assert out == ["plan.yaml:5:11: error: dependency cycle: b -> b"]


# ---- `when` is one expression ------------------------------------------------------------


def test_when_with_text_between_expressions_is_an_error(check):
    out = check("""
        variables: {deploy: false, tests_ok: false}
        steps:
          - id: a
            tool: echo
            args: {value: 1}
            when: "${deploy} and ${tests_ok}"
    """)
    assert out == [
        "plan.yaml:6:11: error: step 'a': when: a condition is one expression, "
        "not text around '${...}' (did you mean '${deploy and tests_ok}'?)"
    ]


@pytest.mark.parametrize("when", ["x ${deploy}", "${deploy}!", "$${deploy}", "${deploy}${deploy}"])
def test_when_that_is_not_exactly_one_expression_is_an_error(check, when):
    out = check(f"""
        variables: {{deploy: false}}
        steps:
          - {{id: a, tool: echo, args: {{value: 1}}, when: "{when}"}}
    """)
    assert len(out) == 1 and "a condition is one expression" in out[0], out


@pytest.mark.parametrize(
    "when", ["${deploy}", " ${deploy} ", "deploy and not deploy", "${deploy and 1}", True]
)
def test_one_expression_or_a_bare_one_is_fine(check, when):
    text = f'"{when}"' if isinstance(when, str) else "true"
    assert (
        check(f"""
        variables: {{deploy: false}}
        steps:
          - {{id: a, tool: echo, args: {{value: 1}}, when: {text}}}
    """)
        == []
    )


def test_when_with_two_false_values_skips_the_step_at_run_time(run, write):
    write(
        "plan.yaml",
        """
        variables: {deploy: false, tests_ok: false}
        steps:
          - {id: a, tool: echo, args: {value: 1}, when: "${deploy and tests_ok}"}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    assert r.json["steps"][0]["status"] == "skipped"
    bad = write(
        "bad.yaml",
        """
        variables: {deploy: false, tests_ok: false}
        steps:
          - {id: a, tool: echo, args: {value: 1}, when: "${deploy} and ${tests_ok}"}
        """,
    )
    r = run("run", str(bad))
    assert r.code == 3, r
    assert "a condition is one expression" in r.out + r.err


# ---- steps[...] by literal id only; env and steps are reserved -----------------------------


@pytest.mark.parametrize(
    "expr", ["${steps[which].status}", "${steps[which]}", "${steps}", "${steps | length}"]
)
def test_steps_read_without_a_literal_id_is_an_error(check, expr):
    out = check(f"""
        variables: {{which: a}}
        steps:
          - {{id: a, tool: echo, args: {{value: 1}}}}
          - {{id: b, tool: echo, args: {{value: "{expr}"}}}}
    """)
    assert len(out) == 1 and out[0].startswith("plan.yaml:4:39: error: step 'b': args.value: "), out
    assert "literal step id" in out[0]


@pytest.mark.parametrize(
    "expr", ["${steps.a.status}", "${steps['a'].error}", "${steps.a.result | default(1)}"]
)
def test_steps_read_by_literal_id_is_fine(check, expr):
    assert (
        check(f"""
        steps:
          - {{id: a, tool: echo, args: {{value: 1}}}}
          - {{id: b, tool: echo, args: {{value: "{expr}"}}}}
    """)
        == []
    )


def test_variables_named_env_or_steps_are_errors(check):
    out = check("""
        variables: {env: 1, steps: 2, ok: 3}
        steps:
          - {id: a, tool: echo, args: {value: 1}, result_variable: env}
          - {id: b, tool: echo, args: {value: 1}, result_variable: steps}
    """)
    assert out == [
        "plan.yaml:1:13: error: variable 'env': the name 'env' is reserved "
        "(the process environment)",
        "plan.yaml:1:21: error: variable 'steps': the name 'steps' is reserved "
        "(the steps' status, result and error)",
        "plan.yaml:3:60: error: step 'a': result_variable 'env': the name 'env' is reserved "
        "(the process environment)",
        "plan.yaml:4:60: error: step 'b': result_variable 'steps': the name 'steps' is "
        "reserved (the steps' status, result and error)",
    ]


def test_cli_variables_named_env_or_steps_are_errors(run, write):
    write("plan.yaml", "steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    r = run("validate", "plan.yaml", "--var", "env=1")
    assert r.code == 3, r
    assert "plan.yaml:1:1: error: variable 'env' (from --var or --vars-file)" in r.out
    write("vars.yaml", "steps: 3\n")
    r = run("run", "plan.yaml", "--vars-file", "vars.yaml")
    assert r.code == 3, r
    assert "variable 'steps' (from --var or --vars-file)" in r.out + r.err


# Names the expression language keeps for itself: `${self | upper}` is Jinja's template
# (every step reading it failed with "got multiple values for argument 'self'"), `${true}` and
# `${none}` its constants (the variable was silently never read), `${range ~ ''}` its function
# (rendered as a Python repr). Refused, as `env` and `steps` are.
@pytest.mark.parametrize("name", ["self", "true", "None", "range", "namespace"])
def test_variables_named_as_the_expression_language_own_names_are_errors(check, name):
    out = check(f"""
        variables: {{"{name}": 1}}
        steps:
          - {{id: a, tool: echo, args: {{value: 1}}, result_variable: "{name}"}}
    """)
    why = f"the name '{name}' is reserved (the expression language's own)"
    assert out == [
        f"plan.yaml:1:13: error: variable '{name}': {why}",
        f"plan.yaml:3:60: error: step 'a': result_variable '{name}': {why}",
    ]


def test_params_and_cli_variables_named_as_the_expression_language_own_names_are_errors(run, write):
    write("plan.yaml", "params: {self: {default: x}}\nsteps:\n  - {id: a, run: echo}\n")
    r = run("validate", "plan.yaml", "--var", "none=1")
    assert r.code == 3, r
    why = "is reserved (the expression language's own)"
    assert f"plan.yaml:1:10: error: param 'self': the name 'self' {why}" in r.out, r.out
    assert f"error: variable 'none' (from --var or --vars-file): the name 'none' {why}" in r.out


def test_the_reserved_expression_names_are_the_ones_jinja_keeps():
    from planrun.plan.definition import EXPRESSION_NAMES
    from planrun.plan.expressions import _CONSTANTS, _environment

    assert {*_CONSTANTS, "self", *_environment().globals} == EXPRESSION_NAMES


@pytest.mark.parametrize("name", ["loop", "super", "caller", "varargs", "kwargs", "result"])
def test_names_jinja_binds_only_inside_templates_are_ordinary_variables(run, write, name):
    """`loop`, `super`, `caller`, `varargs` and `kwargs` mean something only inside a Jinja
    template's loops, blocks and macros; a `${...}` is an expression, where they are free."""
    write(
        "plan.yaml",
        f"""
        variables: {{{name}: v}}
        steps:
          - {{id: a, tool: echo, args: {{value: "${{{name}}} ${{{name} | upper}}"}}, result_variable: r}}
          - {{id: b, tool: echo, foreach: [x], as: {name}, args: {{value: "${{{name} ~ r}}"}}}}
        """,
    )
    assert run("validate", "plan.yaml").code == 0
    r = run("run", "plan.yaml", "--no-state", "--output", "json")
    assert r.code == 0, r
    results = {s["id"]: s["result"] for s in json.loads(r.out)["steps"]}
    assert results["a"] == "v V"
    assert results["b"] == ["xv V"]
