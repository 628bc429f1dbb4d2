"""`planrun schema` and `planrun validate` agree: what one rejects, the other rejects.

Each document below is checked twice — by `jsonschema` against the JSON Schema that
`planrun schema` prints, and by `planrun validate` — and both must give the same verdict.
The documents are otherwise valid plans (known tools, known ids), so a verdict is about the
plan's types and structure only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
}


def test_the_schema_and_validate_give_the_same_verdict(tmp_path: Path) -> None:
    r = planrun("schema", cwd=tmp_path)
    assert r.code == 0, r
    schema = json.loads(r.out)
    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    files = []
    for name, doc in {**GOOD, **BAD}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        files.append(f"{name}.json")
    v = planrun("validate", "--format", "json", *files, cwd=tmp_path)
    assert v.code in (0, 3), v
    rejected_by_validate = {
        d["file"].removesuffix(".json") for d in v.json["diagnostics"] if d["severity"] == "error"
    }
    disagree = []
    for name, doc in {**GOOD, **BAD}.items():
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
