"""`params`: the plan's command-line interface, typed, with choices, defaults and required ones."""

from __future__ import annotations

import json
import os

from tests.conftest import assert_no_traceback

PLAN = """
params:
  version: {type: string, required: true, description: The release}
  target: {default: dev, choices: [dev, staging, prod], description: Where to deploy}
  n: {type: integer, default: 2}
  ratio: {type: number, default: 0.5}
  fast: {type: boolean, default: false}
  pkgs: {type: list, default: [a]}
  opts: {type: mapping, default: {}}
steps:
  - id: show
    tool: echo
    args: {value: ["${version}", "${target}", "${n}", "${ratio}", "${fast}", "${pkgs}", "${opts}"]}
"""


def _values(r):
    assert r.code == 0, r
    return r.json["steps"][0]["result"]


def test_a_var_for_a_param_is_converted_to_its_type(run, write):
    write("plan.yaml", PLAN)
    r = run("run", "plan.yaml", "--output", "json", "--var", "version=1.10")
    assert _values(r) == ["1.10", "dev", 2, 0.5, False, ["a"], {}]
    r = run(
        "run", "plan.yaml", "--output", "json", "--var", "version=007", "--var", "n=12",
        "--var", "ratio=3", "--var", "fast=true", "--var", "pkgs=[x, y]",
        "--var", "opts={k: 1}", "--var", "target=prod",
    )  # fmt: skip
    assert _values(r) == ["007", "prod", 12, 3, True, ["x", "y"], {"k": 1}]


def test_an_undeclared_var_keeps_the_yaml_reading(run, write):
    write("plan.yaml", "steps:\n  - {id: a, tool: echo, args: {value: '${v}'}}\n")
    r = run("run", "plan.yaml", "--output", "json", "--var", "v=1.10")
    assert r.json["steps"][0]["result"] == 1.1


def test_a_value_of_the_wrong_type_is_a_usage_error(run, write):
    write("plan.yaml", PLAN)
    r = run("run", "plan.yaml", "--var", "version=1", "--var", "n=x")
    assert r.code == 2, r
    assert "--var n: expected an integer, got 'x'" in r.err
    assert_no_traceback(r)
    r = run("run", "plan.yaml", "--var", "version=1", "--var", "fast=maybe")
    assert r.code == 2 and "--var fast: expected a boolean, got 'maybe'" in r.err, r
    r = run("run", "plan.yaml", "--var", "version=1", "--var", "pkgs=x")
    assert r.code == 2 and "--var pkgs: expected a list, got 'x'" in r.err, r


def test_a_value_outside_choices_and_a_missing_required_param_exit_2(run, write):
    write("plan.yaml", PLAN)
    r = run("run", "plan.yaml", "--var", "version=1", "--var", "target=qa")
    assert r.code == 2, r
    assert "--var target: 'qa' is not one of dev, staging, prod" in r.err
    r = run("run", "plan.yaml")
    assert r.code == 2, r
    assert "missing required param: version" in r.err
    r = run("run", "plan.yaml", "--dry-run")
    assert r.code == 2 and "version" in r.err, r


def test_a_vars_file_value_is_checked_against_the_param(run, write):
    # The value is in a file: the error says where (as a vars file that does not parse does),
    # in every command that reads the file; a --var over it is the --var's.
    write("plan.yaml", PLAN)
    write("vars.yaml", "version: '2'\nn: two\ntarget: qa\n")
    for command in (["run"], ["run", "--dry-run"], ["validate"], ["list"], ["graph"], ["show"]):
        words = [*command, "plan.yaml", *(["show"] if command == ["show"] else [])]
        r = run(*words, "--vars-file", "vars.yaml", "--var", "target=dev")
        assert r.code == 2, (command, r)
        assert "vars file vars.yaml:2:4: n: expected an integer, got 'two'" in r.err, (command, r)
        assert_no_traceback(r)
    r = run("run", "plan.yaml", "--vars-file", "vars.yaml", "--var", "n=3")
    assert r.code == 2, r
    assert "vars file vars.yaml:3:9: target: 'qa' is not one of dev, staging, prod" in r.err, r
    r = run("run", "plan.yaml", "--vars-file", "vars.yaml", "--var", "n=x")
    assert "planrun: error: --var n: expected an integer, got 'x'" in r.err, r


def test_params_are_checked_by_validate(run, write):
    write(
        "plan.yaml",
        """
        variables: {target: x}
        params:
          target: {default: dev}
          n: {type: integr, default: 1}
          m: {type: integer, default: one}
          c: {choices: [a, b], default: z}
          d: {descripton: typo}
        steps:
          - {id: a, tool: echo, args: {value: "${target}"}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    lines = r.out.splitlines()
    assert any(
        line.startswith("plan.yaml:3:") and "'target' is in both params and variables" in line
        for line in lines
    ), r
    assert any(line.startswith("plan.yaml:4:") and "integr" in line for line in lines), r
    assert any(
        line.startswith("plan.yaml:5:") and "default" in line and "integer" in line
        for line in lines
    ), r
    assert any(line.startswith("plan.yaml:6:") and "'z'" in line for line in lines), r
    assert any(line.startswith("plan.yaml:7:") and "description" in line for line in lines), r


def test_list_shows_the_params(run, write):
    write("plan.yaml", PLAN)
    r = run("list", "plan.yaml")
    assert r.code == 0, r
    assert "version" in r.out and "The release" in r.out and "required" in r.out
    assert "dev, staging, prod" in r.out
    r = run("list", "plan.yaml", "--output", "json")
    params = json.loads(r.out)["params"]
    assert params["target"] == {
        "type": "string",
        "default": "dev",
        "required": False,
        "choices": ["dev", "staging", "prod"],
        "description": "Where to deploy",
    }
    assert params["version"]["required"] is True


def test_the_schema_describes_params(run):
    r = run("schema")
    schema = json.loads(r.out)
    text = json.dumps(schema)
    assert "params" in schema["properties"]
    assert "Where" not in text and "command line" in text


def test_show_and_list_need_no_required_param(run, write):
    """SPEC: a missing required param is no error for `list` and `show`; what reads it stays
    as written, what does not is rendered."""
    write(
        "plan.yaml",
        """
        params:
          version: {type: string, required: true}
          target: {default: dev}
        steps:
          - id: deploy
            title: Deploy ${version} to ${target}
            run: ./deploy.sh ${target}
        """,
    )
    r = run("show", "plan.yaml", "deploy", "--output", "json")
    assert r.code == 0, r
    doc = json.loads(r.out)
    assert doc["args"]["run"] == "./deploy.sh dev"
    assert doc["title"] == "Deploy ${version} to ${target}"
    assert run("list", "plan.yaml").code == 0
    r = run("show", "plan.yaml", "deploy", "--var", "version=1.2", "--output", "json")
    assert json.loads(r.out)["title"] == "Deploy 1.2 to dev", r
    assert run("run", "plan.yaml", "--dry-run").code == 2  # a run needs it, dry or not


def test_a_param_that_is_not_a_mapping_or_has_a_reserved_name_is_one_clear_error(run, write):
    write(
        "plan.yaml",
        """
        params:
          n: 3
          env: {}
          steps: {default: x}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert "plan.yaml:2:6: error: params.n: expected a mapping, got 3" in r.out, r.out
    reserved = "the name 'env' is reserved (the process environment)"
    assert f"plan.yaml:3:3: error: param 'env': {reserved}" in r.out, r.out
    assert "plan.yaml:4:3: error: param 'steps': the name 'steps' is reserved" in r.out, r.out
    assert "--var" not in r.out and "plan.yaml:1:1" not in r.out, r.out
    assert len(r.out.splitlines()) == 3, r.out


def test_empty_choices_allow_no_value_and_are_a_validation_error(run, write):
    write(
        "plan.yaml",
        """
        params:
          n: {choices: []}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert "plan.yaml:2:16: error: param 'n': choices: an empty list allows no value" in r.out


def test_values_in_param_errors_are_written_as_json_not_python(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        params:
          l: {type: list}
          b: {type: boolean, choices: [true]}
          d: {type: list, default: {a: null}}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert 'default expected a list, got {"a": null}' in r.out, r.out
    write("plan.yaml", (tmp_path / "plan.yaml").read_text().replace("{a: null}", "[]"))
    write("vars.yaml", "l: {a: true}\n")
    r = run("run", "plan.yaml", "--vars-file", "vars.yaml")
    assert r.code == 2, r
    assert 'vars file vars.yaml:1:4: l: expected a list, got {"a": true}' in r.err, r.err
    r = run("run", "plan.yaml", "--var", "b=false")
    assert r.code == 2, r
    assert "--var b: false is not one of true" in r.err, r.err


def test_a_number_param_is_finite_as_its_var_is(run, write, tmp_path):
    write(
        "plan.yaml",
        """
        params:
          x: {type: number, default: .nan}
        steps:
          - {id: a, tool: echo, args: {value: "${x}"}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    # YAML's .nan is refused as it is read: JSON has no NaN
    assert "plan.yaml:2:30: error: .nan is not a JSON number" in r.out, r.out
    write("plan.yaml", (tmp_path / "plan.yaml").read_text().replace(".nan", "1"))
    write("vars.yaml", "x: .inf\n")
    r = run("run", "plan.yaml", "--vars-file", "vars.yaml")
    assert r.code == 2, r
    assert "vars file vars.yaml:1:4: .inf is not a JSON number" in r.err, r.err
    r = run("run", "plan.yaml", "--var", "x=nan")
    assert r.code == 2 and "--var x: expected a number, got 'nan'" in r.err, r.err


def test_validate_checks_a_given_var_against_its_param(run, write):
    write("plan.yaml", PLAN)
    r = run("validate", "plan.yaml", "--var", "target=qa")
    assert r.code == 2, r
    assert "--var target: 'qa' is not one of dev, staging, prod" in r.err
    r = run("validate", "plan.yaml", "--var", "n=x")
    assert r.code == 2, r
    assert "--var n: expected an integer, got 'x'" in r.err
    assert_no_traceback(r)
    assert run("validate", "plan.yaml", "--var", "target=prod", "--var", "n=3").code == 0
    assert run("validate", "plan.yaml").code == 0  # a required param may be missing here


def test_infinity_or_nan_in_a_var_or_vars_file_is_a_usage_error(run, write):
    # YAML reads them as floats, which no document of the run could carry as JSON.
    write(
        "plan.yaml",
        "params: {p: {type: list}}\nsteps:\n  - {id: a, tool: echo, args: {value: '${v}'}}\n",
    )
    for given in ("v=.nan", "v=-.inf", "v=[1, .Inf]", "p=[.nan]"):
        r = run("run", "plan.yaml", "--no-state", "--var", "v=1", "--var", "p=[]", "--var", given)
        assert r.code == 2, (given, r)
        name, _, _ = given.partition("=")
        assert f"--var {name}: " in r.err and "is not a JSON number" in r.err, (given, r.err)
        assert_no_traceback(r)
    r = run(
        "run", "plan.yaml", "--no-state", "--var", "v='.nan'", "--var", "p=[]", "--output", "json"
    )
    assert r.code == 0 and r.json["steps"][0]["result"] == ".nan", r
    write("vars.yaml", "p: []\nv:\n  - .nan\n")
    r = run("run", "plan.yaml", "--no-state", "--vars-file", "vars.yaml")
    assert r.code == 2, r
    assert "vars file vars.yaml:3:5: .nan is not a JSON number" in r.err, r.err


def test_list_renders_titles_and_descriptions_with_the_params_defaults(run, write):
    """`list` renders as `show` and the dry run do: a param's default is a known value."""
    write(
        "plan.yaml",
        """
        params:
          version: {type: string, required: true}
          target: {default: dev}
          n: {type: integer, default: 2}
        steps:
          - id: deploy
            title: Deploy ${version} to ${target}
            description: Deploys ${n} copies
            run: ./deploy.sh ${target}
        """,
    )
    r = run("list", "plan.yaml", "--output", "json")
    assert r.code == 0, r
    (row,) = json.loads(r.out)["steps"]
    assert row["description"] == "Deploys 2 copies", row
    assert row["title"] == "Deploy ${version} to ${target}", row  # version is not known
    r = run("list", "plan.yaml", "--var", "version=1.10", "--var", "n=3", "--output", "json")
    (row,) = json.loads(r.out)["steps"]
    assert (row["title"], row["description"]) == ("Deploy 1.10 to dev", "Deploys 3 copies"), row
    r = run("list", "plan.yaml", "--var", "n=x")
    assert r.code == 2 and "--var n: expected an integer, got 'x'" in r.err + r.out, r
    assert_no_traceback(r)


def test_an_unknown_key_in_a_param_gets_a_did_you_mean_from_the_param_keys(run, write):
    write(
        "plan.yaml",
        """
        params:
          n: {requird: true, tpye: integer}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:7: error: unknown key 'requird' in params.n (did you mean 'required'?)",
        "plan.yaml:2:22: error: unknown key 'tpye' in params.n (did you mean 'type'?)",
    ], r.out


def test_a_misspelt_param_type_gets_a_did_you_mean_at_its_position(run, write):
    write(
        "plan.yaml",
        """
        params:
          n:
            type: intger
          s: {type: strung, default: x}
          odd: {type: qqq}
        steps:
          - {id: a, tool: echo, args: {value: 1}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    types = "'string', 'integer', 'number', 'boolean', 'list' or 'mapping'"
    assert r.out.splitlines() == [
        f'plan.yaml:3:11: error: params.n.type: expected {types}, got "intger"'
        " (did you mean 'integer'?)",
        f'plan.yaml:4:13: error: params.s.type: expected {types}, got "strung"'
        " (did you mean 'string'?)",
        f'plan.yaml:5:15: error: params.odd.type: expected {types}, got "qqq"',
    ], r.out


RENDERED = """
params:
  target: {default: "${env.DEPLOY_TARGET | default('dev')}", choices: [dev, prod]}
  tag: {default: "v-${target}"}
steps:
  - {id: show, tool: echo, args: {value: ["${target}", "${tag}"]}}
"""


def test_a_default_holding_an_expression_is_rendered_at_start(run, write):
    # As a `just` parameter's default expression: read from env, --var values and the params
    # before it; then checked against the param's type and choices like any value.
    write("plan.yaml", RENDERED)
    env = {k: v for k, v in os.environ.items() if k != "DEPLOY_TARGET"}
    r = run("run", "plan.yaml", "--output", "json", env=env)
    assert _values(r) == ["dev", "v-dev"]
    r = run("run", "plan.yaml", "--output", "json", env={**env, "DEPLOY_TARGET": "prod"})
    assert _values(r) == ["prod", "v-prod"]
    r = run("run", "plan.yaml", "--output", "json", "--var", "target=prod", env=env)
    assert _values(r) == ["prod", "v-prod"]
    r = run("run", "plan.yaml", env={**env, "DEPLOY_TARGET": "qa"})
    assert r.code == 2, r
    assert "param 'target': default 'qa' is not one of dev, prod" in r.err, r.err
    assert_no_traceback(r)
    assert run("validate", "plan.yaml", env=env).code == 0


def test_a_default_expression_reading_an_unknown_name_is_a_validation_error(run, write):
    write(
        "plan.yaml",
        """
        params:
          a: {default: "${b}-x"}
          b: {default: "${nope}"}
        steps:
          - {id: s, tool: echo, args: {value: "${a}"}}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:16: error: param 'a': default: reads 'b', which is declared after it",
        "plan.yaml:3:16: error: param 'b': default: undefined name 'nope'",
    ], r.out
