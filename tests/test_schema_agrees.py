"""`planrun schema` and `planrun validate` agree: what one rejects, the other rejects.

Each document below is checked twice — by `jsonschema` against the JSON Schema that
`planrun schema` prints, and by `planrun validate` — and both must give the same verdict.
The documents are otherwise valid plans (known tools, known ids), so a verdict is about the
plan's types and structure only.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planrun.errors import PlanInvalid
from planrun.plan.loader import load_text
from planrun.plan.model import plan_json_schema
from planrun.plan.validate import check_document
from tests.conftest import planrun

jsonschema = pytest.importorskip("jsonschema")

STEP = {"id": "a", "tool": "echo", "args": {"value": 1}}


def plan(**top: Any) -> dict[str, Any]:
    return {"steps": [STEP], **top}


def step(**keys: Any) -> dict[str, Any]:
    return {"steps": [{**STEP, **keys}]}


GOOD: dict[str, Any] = {
    "empty-steps": {"steps": []},
    "minimal": plan(),
    "index-alias": {"steps": [{"index": 1, "tool": "echo"}, {"index": 2, "tool": "echo"}]},
    "int-depends-on": {
        "steps": [{"index": 1, "tool": "echo"}, {"index": 2, "tool": "echo", "depends_on": [1]}]
    },
    "plan-id-alias": plan(id="p"),
    "name-null": plan(name=None),
    "version-1": plan(version=1),
    "durations": step(timeout="1m30s", retry_delay=0.5),
    "duration-bare-string": step(timeout="30"),
    "duration-ms": step(timeout="500ms", retry_delay="2h"),
    "duration-spaces": step(timeout="1m 30s"),
    "duration-int": step(timeout=5),
    "duration-zero": step(timeout=0),
    "when-forms": {
        "steps": [
            {**STEP, "when": True},
            {**STEP, "id": "b", "when": False},
            {**STEP, "id": "c", "when": "1 == 1"},
            {**STEP, "id": "d", "when": None},
        ]
    },
    "retries": step(retries=0, on_failure="continue", approval=False),
    "approval": step(approval=True),
    "resources": step(resources={"cpu": 2, "mem": 0.5}),
    "server-command": plan(servers={"s": {"command": "x", "args": ["1"], "env": {"A": "b"}}}),
    "server-url": plan(servers={"s": {"url": "http://127.0.0.1:1/mcp", "headers": {"A": "b"}}}),
    "server-null-url": plan(servers={"s": {"command": "x", "url": None}}),
    "everything": plan(
        title="t",
        description="d",
        variables={"x": 1, "y": [1, 2]},
        defaults={"timeout": "5m", "retries": 1, "retry_delay": "1s", "on_failure": "ignore"},
        limits={"max_steps": 10, "max_replans": 0, "max_concurrency": 2, "tool_caps": {"echo": 3}},
        policy={"require_approval": ["x*"], "deny": ["y"]},
        replan={"command": ["python", "p.py"], "timeout": 30},
        secrets=["x"],
        executor={"type": "local"},
    ),
    "replan-tool": plan(replan={"tool": "s.plan"}, servers={"s": {"command": "x"}}),
    "duration-huge-number": step(timeout=1e300, retry_delay=1.7976931348623157e308),
    "foreach-list": step(foreach=[1, 2]),
    "foreach-mapping": step(foreach={"k": "v"}),
    "foreach-expression": plan(variables={"xs": [1]}, steps=[{**STEP, "foreach": "${xs}"}]),
    "as-name": step(foreach=[1], **{"as": "pkg"}),
    "as-null": step(**{"as": None}),
    "matrix-expression": plan(variables={"xs": [1]}, steps=[{**STEP, "matrix": {"x": "${xs}"}}]),
    "run-comment-only": {"steps": [{"id": "a", "run": "# to do"}]},
    "run-list": {"steps": [{"id": "a", "run": [" echo a", "echo b\n"]}]},
}

BAD: dict[str, Any] = {
    "no-steps-key": {"name": "x"},
    "steps-null": {"steps": None},
    "steps-mapping": {"steps": {}},
    "step-not-mapping": {"steps": ["echo"]},
    "step-without-id": {"steps": [{"tool": "echo"}]},
    "step-id-and-index": {"steps": [{"id": "a", "index": "a", "tool": "echo"}]},
    "step-without-tool": {"steps": [{"id": "a"}]},
    "bad-step-id": step(id="a b"),
    "bad-index": {"steps": [{"index": "a b", "tool": "echo"}]},
    "plan-id-and-name": plan(id="p", name="p"),
    "approval-yes": step(approval="yes"),
    "approval-1": step(approval=1),
    "retries-string": step(retries="3"),
    "retries-negative": step(retries=-1),
    "retries-bool": step(retries=True),
    "retries-fraction": step(retries=1.5),
    "max-steps-string": plan(limits={"max_steps": "10"}),
    "max-steps-zero": plan(limits={"max_steps": 0}),
    "max-concurrency-string": plan(limits={"max_concurrency": "2"}),
    "tool-cap-string": plan(limits={"tool_caps": {"echo": "1"}}),
    "timeout-nan": step(timeout="nan"),
    "timeout-inf": step(timeout="inf"),
    "timeout-negative": step(timeout=-1),
    "timeout-negative-string": step(timeout="-5"),
    "timeout-exponent": step(timeout="1e3"),
    "timeout-two-numbers": step(timeout="5 5"),
    "timeout-empty": step(timeout=""),
    "timeout-underscore": step(timeout="1_000"),
    "timeout-leading-dot": step(timeout=".5"),
    "timeout-plus": step(timeout="+5"),
    "timeout-bool": step(timeout=True),
    "timeout-unit-only": step(timeout="s"),
    "timeout-bad-unit": step(timeout="5d"),
    "retry-delay-negative": step(retry_delay=-0.5),
    "default-timeout-nan": plan(defaults={"timeout": "NaN"}),
    "on-failure-unknown": step(on_failure="explode"),
    "on-failure-number": step(on_failure=1),
    "server-neither": plan(servers={"s": {"args": []}}),
    "server-both": plan(servers={"s": {"command": "x", "url": "http://h/mcp"}}),
    "server-command-number": plan(servers={"s": {"command": 5}}),
    "server-env-number": plan(servers={"s": {"command": "x", "env": {"A": 1}}}),
    "server-args-number": plan(servers={"s": {"command": "x", "args": [8080]}}),
    "replan-both": plan(replan={"command": "x", "tool": "s.t"}),
    "replan-neither": plan(replan={}),
    "unknown-top-key": plan(stepz=[]),
    "unknown-step-key": step(dependson=["b"]),
    "unknown-defaults-key": plan(defaults={"retry": 1}),
    "version-2": plan(version=2),
    "version-true": plan(version=True),
    "version-string": plan(version="1"),
    "result-variable-pattern": step(result_variable="1x"),
    "when-number": step(when=1),
    "depends-on-string": step(depends_on="a"),
    "variables-list": plan(variables=[]),
    "secrets-string": plan(secrets="x"),
    "executor-unknown": plan(executor={"type": "k8s"}),
    "name-number": plan(name=5),
    "title-number": step(title=5),
    "tool-number": step(tool=5),
    "args-list": step(args=[]),
    "resources-string": step(resources={"cpu": "2"}),
    "policy-string": plan(policy={"deny": "shell"}),
    # Numbers JSON cannot write but YAML (`.nan`, `.inf`) and JSON readers (`1e400`) produce.
    "timeout-nan-number": step(timeout=math.nan),
    "timeout-inf-number": step(timeout=math.inf),
    "timeout-1e400": '{"steps": [{"id": "a", "tool": "echo", "timeout": 1e400}]}',
    "retry-delay-nan-number": step(retry_delay=math.nan),
    "default-timeout-inf-number": plan(defaults={"timeout": math.inf}),
    "replan-timeout-nan-number": plan(replan={"command": "x", "timeout": math.nan}),
    "connect-timeout-inf-number": plan(
        servers={"s": {"command": "x", "connect_timeout": math.inf}}
    ),
    "timeout-overflowing-string": step(timeout="9" * 400 + "h"),
    "foreach-plain-string": step(foreach="xs"),
    "foreach-empty-string": step(foreach=""),
    "foreach-escaped": step(foreach="$${xs}"),
    "as-index": step(foreach=[1], **{"as": "index"}),
    "as-env": step(foreach=[1], **{"as": "env"}),
    "as-steps": step(foreach=[1], **{"as": "steps"}),
    "tool-empty": step(tool=""),
    "result-variable-env": step(result_variable="env"),
    "result-variable-steps": step(result_variable="steps"),
    "variable-named-env": plan(variables={"env": 1}),
    "variable-named-steps": plan(variables={"steps": 1}),
    "variable-named-self": plan(variables={"self": 1}),
    "variable-named-none": plan(variables={"none": 1}),
    "result-variable-range": step(result_variable="range"),
    "as-self": step(foreach=[1], **{"as": "self"}),
    "param-named-true": plan(params={"true": {}}),
    "param-empty-choices": plan(params={"n": {"choices": []}}),
    "run-with-args": {"steps": [{"id": "a", "run": "echo", "args": {"cmd": "x"}}]},
    "matrix-plain-string": step(matrix={"x": "xs"}),
    "matrix-number": step(matrix={"x": 1}),
    "run-empty": {"steps": [{"id": "a", "run": ""}]},
    "run-blank": {"steps": [{"id": "a", "run": " \n\t\r "}]},
    "run-empty-list": {"steps": [{"id": "a", "run": []}]},
    "run-blank-in-list": {"steps": [{"id": "a", "run": ["echo", " "]}]},
}


def test_the_schema_and_validate_give_the_same_verdict(tmp_path: Path) -> None:
    r = planrun("schema", cwd=tmp_path)
    assert r.code == 0, r
    schema = json.loads(r.out)
    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    files = []
    docs = {}
    for name, doc in {**GOOD, **BAD}.items():
        # A string is the file's text as written (a number like 1e400 that json.dumps
        # cannot write); the schema sees what a JSON reader makes of it.
        text = doc if isinstance(doc, str) else json.dumps(doc)
        (tmp_path / f"{name}.json").write_text(text)
        docs[name] = json.loads(text)
        files.append(f"{name}.json")
    v = planrun("validate", "--format", "json", *files, cwd=tmp_path)
    assert v.code in (0, 3), v
    rejected_by_validate = {
        d["file"].removesuffix(".json") for d in v.json["diagnostics"] if d["severity"] == "error"
    }
    disagree = []
    for name, doc in docs.items():
        by_schema = not validator.is_valid(doc)
        by_validate = name in rejected_by_validate
        expected = name in BAD
        if (by_schema, by_validate) != (expected, expected):
            disagree.append(f"{name}: schema rejects={by_schema}, validate rejects={by_validate}")
    assert not disagree, "\n".join(disagree)


def test_a_yaml_yes_is_not_a_boolean(run, write):
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: echo, args: {value: 1}, approval: yes}
          - {id: b, tool: echo, args: {value: 1}, retries: "3"}
        limits: {max_steps: "10", max_concurrency: "2"}
        """,
    )
    r = run("validate", "plan.yaml")
    assert r.code == 3, r
    assert r.out.splitlines() == [
        "plan.yaml:2:53: error: step 'a': approval: expected true, false or a question of two words or more, got \"yes\"",
        "plan.yaml:3:52: error: step 'b': retries: expected a whole number, got \"3\"",
        'plan.yaml:4:21: error: limits.max_steps: expected a whole number, got "10"',
        'plan.yaml:4:44: error: limits.max_concurrency: expected a whole number, got "2"',
    ]


# Lines an editor (YAML 1.2) accepted with the schema although `planrun validate` rejects
# them, and the value the editor's YAML reader gives (`1e400` is a number there, infinity).
EDITOR_VALUES = {
    "timeout: .nan": {"timeout": math.nan},
    "timeout: .inf": {"timeout": math.inf},
    "timeout: 1e400": {"timeout": float("1e400")},
    "foreach: xs": {"foreach": "xs"},
    "foreach: [1]\n    as: index": {"foreach": [1], "as": "index"},
    "tool: ''": {"tool": ""},
}


@pytest.mark.parametrize("line", list(EDITOR_VALUES))
def test_what_validate_rejects_an_editor_flags(run, write, line):
    write("plan.yaml", f"steps:\n  - id: a\n    tool: echo\n    args: {{value: 1}}\n    {line}\n")
    assert run("validate", "plan.yaml").code == 3
    schema = json.loads(run("schema").out)
    doc = {"steps": [{**STEP, **EDITOR_VALUES[line]}]}
    assert not jsonschema.Draft202012Validator(schema).is_valid(doc)


# ---- random values in the fields whose verdict is about the value alone ------------------

# Strings that are, or are nearly, durations, names and `${...}` forms (only `${xs}`, a defined
# variable: an undefined name is a reference error, which no schema can see).
WORDS = st.sampled_from(
    ["", " ", "5", "5s", "1m30s", "1m 30s", "500ms", "1h", "5d", "-5", "+5", ".5", "1e3", "nan",
     "inf", "Infinity", "NaN", "9" * 400, "0" * 400 + "1s", "x", "pkg", "my_var", "1x", "env",
     "steps", "index", "item", "${xs}", "$${xs}", "${xs} ", " ${xs}", "xs}", "${", "abort",
     "continue", "ignore", "replan", "echo", "true", "1"]
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 2.0, 1e300, 1.7976931348623157e308, math.inf, -math.inf, math.nan]),
)
VALUES = st.one_of(st.none(), st.booleans(), NUMBERS, WORDS, st.lists(WORDS, max_size=2))
STEP_FIELDS = [
    "timeout", "retry_delay", "retries", "on_failure", "approval", "cache", "as",
    "result_variable", "foreach", "tool", "title", "expected_outcome", "index",
]  # fmt: skip
PLAN_FIELDS = [
    ("defaults", "timeout"), ("defaults", "retry_delay"), ("defaults", "retries"),
    ("limits", "max_steps"), ("limits", "max_replans"), ("limits", "max_concurrency"),
    ("replan", "timeout"), ("servers", "connect_timeout"), ("variables", None), ("version", None),
]  # fmt: skip


@functools.cache
def plan_schema() -> Any:
    return jsonschema.Draft202012Validator(plan_json_schema())


def _doc_with(field: str | tuple[str, str | None], value: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"variables": {"xs": [1]}, "steps": [dict(STEP)]}
    if isinstance(field, str):
        s = base["steps"][0]
        if field == "index":
            del s["id"]
        if field == "as":
            s["foreach"] = [1]
        s[field] = value
        return base
    top, key = field
    if top == "version":
        base["version"] = value
    elif top == "variables":  # a variable's name
        if isinstance(value, str):
            base["variables"] = {value: 1}
    elif top == "servers":
        base["servers"] = {"s": {"command": "x", key: value}}
    elif top == "replan":
        base["replan"] = {"command": "x", key: value}
    else:
        base[top] = {key: value}
    return base


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(STEP_FIELDS + PLAN_FIELDS), VALUES)
def test_random_values_get_the_same_verdict(field, value):
    # Not about the value alone: a tool that does not exist, an expression's syntax.
    assume(field != "tool" or value in ("", "echo") or not isinstance(value, str))
    # (A foreach string is the exception: the schema checks that it is one `${...}`.)
    inner = value if isinstance(value, list) else [] if field == "foreach" else [value]
    assume(not any(isinstance(t, str) and "${" in t for t in inner))
    doc = _doc_with(field, value)
    by_schema = not plan_schema().is_valid(doc)
    try:
        text, name, fmt = json.dumps(doc, allow_nan=False), "p.json", "json"
    except ValueError:  # infinity or NaN: JSON has neither, YAML writes them `.inf`, `.nan`
        with pytest.raises(PlanInvalid):  # and the loader refuses them, before any schema
            load_text(yaml.safe_dump(doc), "p.yaml", "yaml")
        return
    document = load_text(text, name, fmt)
    diags = check_document(document).diagnostics
    by_validate = any(d.severity == "error" for d in diags)
    assert by_schema == by_validate, (field, value, [d.message for d in diags])


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
