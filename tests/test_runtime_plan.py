"""planrun.plan.definition, the plan format's one definition: validation (pydantic models made from it)
hands on its dataclasses, whose dump (derived from their fields) is pydantic's JSON dump, so the
state's plan digest of a plan does not change with the classes behind it."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from planrun.plan import definition as runtime
from planrun.plan import model
from planrun.plan.loader import load_document, load_text
from planrun.plan.validate import check_document, default_name
from planrun.run.runopen import plan_digest

ROOT = Path(__file__).parent.parent

# Every field of every object set.
RICH = """\
version: 1
id: rich-plan
title: Rich
description: every field
variables: {who: world, n: 3, ratio: 0.5, big: 1.0e+300, list: [1, "a", null, true], nested: {k: [ {x: 1} ]}}
servers:
  git: {command: uvx, args: [mcp-server-git], env: {A: "1"}, cwd: /tmp, connect_timeout: 5s}
  web: {type: http, url: "http://127.0.0.1:1/mcp", headers: {Authorization: "Bearer x"}}
  plain: {command: srv}
defaults: {timeout: 1m30s, retries: 2, retry_delay: 500ms, on_failure: continue}
limits: {max_steps: 50, max_replans: 1, max_concurrency: 4, tool_caps: {shell: 3}}
policy: {require_approval: ["git.*"], deny: ["web.*"]}
replan: {command: [python3, planner.py], timeout: 10}
secrets: [who]
executor: {type: local}
dotenv: [".env?"]
steps:
  - index: 1
    title: "first ${who}"
    tool: shell
    args: {cmd: "echo hi", env: {X: "1"}}
    result_variable: first
    when: true
    timeout: 30
    retries: 0
    retry_delay: 0
    on_failure: ignore
    expected_outcome: prints hi
    approval: true
    description: d
    resources: {cpu: 2, mem: 0.5}
    sources: ["src/**/*.py", "!src/skip.py"]
    outputs: ["out/*.txt"]
    cache: false
  - id: each
    tool: echo
    args: {value: "${item.k} ${index}", big: 1.0e+300, small: -1.0e-300}
    depends_on: [1]
    foreach: {a: 1, b: 2}
    as: item
    on_failure: replan
  - {id: lst, tool: echo, args: {value: "${x}"}, foreach: [1, 2.5, "s"], as: x, when: "${n > 1}"}
  - {id: expr, tool: echo, args: {value: "${e}"}, foreach: "${list}", as: e}
  - {id: g, tool: git.status, args: {}, retries: 1, on_failure: abort}
"""

DASK = """\
name: d
executor: {type: dask, address: "tcp://127.0.0.1:1"}
replan: {tool: git.plan}
servers: {git: {command: x}}
steps: [{id: a, tool: echo, args: {value: 1}}]
"""

EXTRA_SERVERS = {"extra": {"command": "e", "args": ["1"]}}

# plan_digest of these plans as computed before planrun.plan.definition existed (pydantic's model_dump):
# a state file written then must still match the plan it was written for. (Changed with the
# step's `run`, `env` and `cwd` and the plan's `env`: a new field is in every plan's dump.
# The examples whose shell steps are now written `run:` are other plans, with their own.)
DIGESTS = {
    "examples/conditional.yaml": "5c89d8c26acae5a0",
    "examples/dataflow.yaml": "c27f311a88b30c95",
    "examples/default-plan/planrun.yaml": "c18598521fc5b31b",
    "examples/diamond.yaml": "ecd043883df10415",
    "examples/failure-policies.yaml": "5a73cb78ddfc6e04",
    "examples/foreach.yaml": "83525b3057dffe44",
    "examples/hello.yaml": "70d45023a7d552a3",
    "examples/http.yaml": "d9877279a964c292",
    "examples/mcp-git.yaml": "5ab81d0dcae314ad",
    "examples/mcp-time.yaml": "38e8616f199eb238",
    "examples/parallel.yaml": "514ae18b3a63853f",
    "examples/python-step.yaml": "5d9a91de23870d92",
    "examples/replan/plan.yaml": "36f2f4537d36597e",
    "examples/retries.yaml": "b5ecbc423d2321c5",
    "examples/sub/greet.yaml": "b1e06d0b3be375f8",
    "examples/subplan.yaml": "b3fe303d72e0d93a",
}
TEXT_DIGESTS = {
    "rich.yaml": (RICH, "1d073b1e52deba67"),  # (no .inf in it since it is refused)
    "dask.yaml": (DASK, "75014032612ce48b"),
    "plain.yaml": ("steps: []\n", "091476ab1c5be99d"),
}


def pydantic_plan(data: dict[str, Any], file: str) -> model.Plan:
    """The whole plan validated by pydantic in one go (named as check_document names it)."""
    if "id" not in data and "name" not in data:
        data = {**data, "name": default_name(file)}
    return model.Plan.model_validate(data)


def documents() -> list[tuple[str, dict[str, Any]]]:
    docs = [(p, load_document(str(ROOT / p)).data) for p in DIGESTS]
    docs += [(name, load_text(text, name).data) for name, (text, _) in TEXT_DIGESTS.items()]
    return docs


@pytest.mark.parametrize(
    ("file", "data"), documents(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_to_dict_is_pydantic_model_dump(file: str, data: dict[str, Any]) -> None:
    validated = pydantic_plan(data, file)
    plan = model.to_runtime(validated)
    for exclude in (False, True):
        dump = validated.model_dump(mode="json", exclude_defaults=exclude)
        if "steps" in dump:
            dump["steps"] = [as_written(s) for s in dump["steps"]]
        assert plan.to_dict(exclude_defaults=exclude) == dump
        for step, pstep in zip(plan.steps, validated.steps, strict=True):
            assert step.to_dict(exclude) == as_written(
                pstep.model_dump(mode="json", exclude_defaults=exclude)
            )


def as_written(step: dict[str, Any]) -> dict[str, Any]:
    """A step's dump as planrun.plan.definition writes it: a `run:` step without its implied `tool`."""
    if step.get("run") is None:
        return step
    assert step.pop("tool") == "shell", step
    return step


@pytest.mark.parametrize(
    ("file", "data"), documents(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_from_dict_rebuilds_the_plan(file: str, data: dict[str, Any]) -> None:
    plan = model.to_runtime(pydantic_plan(data, file))
    if "inf" in repr(plan):  # pydantic's JSON mode writes infinity as null: not a round trip
        plan = runtime.replace(
            plan, variables={}, steps=[runtime.replace(s, args={}) for s in plan.steps]
        )
    for exclude in (False, True):
        again = runtime.Plan.from_dict(plan.to_dict(exclude_defaults=exclude))
        assert again == plan
        assert [type(s) for s in again.steps] == [runtime.Step] * len(plan.steps)
        assert again.to_dict() == plan.to_dict()


def test_plan_digest_is_what_it_was_before_planrun_plan() -> None:
    for path, digest in DIGESTS.items():
        checked = check_document(load_document(str(ROOT / path)))
        assert checked.plan is not None, path
        assert plan_digest(checked.plan) == digest, path
    for name, (text, digest) in TEXT_DIGESTS.items():
        checked = check_document(load_text(text, name), servers=EXTRA_SERVERS)
        assert checked.plan is not None, name
        assert plan_digest(checked.plan) == digest, name


def test_values_and_types_survive_conversion() -> None:
    plan = model.to_runtime(pydantic_plan(load_text(RICH, "rich.yaml").data, "rich.yaml"))
    assert plan.name == "rich-plan" and plan.version == 1
    assert plan.defaults == runtime.Defaults(
        timeout=90.0, retries=2, retry_delay=0.5, on_failure=runtime.OnFailure.continue_
    )
    assert plan.servers["git"].connect_timeout == 5.0 and plan.servers["web"].type == "http"
    first = plan.step("1")
    assert (first.on_failure, first.timeout, first.resources) == (
        runtime.OnFailure.ignore,
        30.0,
        {"cpu": 2.0, "mem": 0.5},
    )
    assert plan.step("each").as_ == "item" and plan.step("each").depends_on == ["1"]
    assert plan.needs_approval(first) and plan.needs_approval(plan.step("g"))
    assert not plan.needs_approval(plan.step("lst"))
    assert plan.goal == "every field"


def test_step_index_follows_replace() -> None:
    a = runtime.Step(id="a", tool="echo")
    plan = runtime.Plan(name="p", steps=[a])
    assert plan.step("a") is a
    b = runtime.replace(a, tool="shell")
    changed = runtime.replace(plan, steps=[b])
    assert changed.step("a") is b and plan.step("a") is a
    with pytest.raises(KeyError):
        plan.step("nope")
    with pytest.raises(AttributeError):
        plan.name = "q"  # type: ignore[misc]


def test_planrun_plan_imports_no_pydantic() -> None:
    code = "import sys, planrun.plan.definition; print(sorted(m for m in ('pydantic', 'yaml') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == "[]"


def test_schema_is_unchanged_byte_for_byte() -> None:
    """The schema comes from planrun.plan.model alone: the runtime classes change nothing in it."""
    result = subprocess.run(
        [sys.executable, "-m", "planrun", "schema"], capture_output=True, check=True, cwd=ROOT
    )
    assert result.stdout == (ROOT / "tests" / "data" / "plan-schema.json").read_bytes()


def test_check_document_gives_the_runtime_plan() -> None:
    """Validation is pydantic's; what it hands on is planrun.plan.definition, equal to the model's data."""
    doc = load_text(RICH, "rich.yaml")
    checked = check_document(doc, servers={**EXTRA_SERVERS, "own": runtime.ServerEntry(url="u")})
    plan = checked.plan
    assert isinstance(plan, runtime.Plan)
    assert {type(s) for s in plan.steps} == {runtime.Step}
    assert {type(e) for e in plan.servers.values()} == {runtime.ServerEntry}
    assert plan.servers["extra"] == runtime.ServerEntry(command="e", args=["1"])
    assert plan.servers["own"] == runtime.ServerEntry(url="u")
    validated = pydantic_plan(doc.data, "rich.yaml")
    assert plan.to_dict() == validated.model_dump(mode="json") | {
        "servers": plan.to_dict()["servers"]
    }
    assert runtime.replace(plan, servers={}) == runtime.replace(
        model.to_runtime(validated), servers={}
    )


def test_replace_refuses_an_unknown_field() -> None:
    with pytest.raises(TypeError):
        runtime.replace(runtime.Step(id="a", tool="t"), ass="x")


def test_to_dict_exact_keeps_infinity_for_a_round_trip() -> None:
    """`exact=True` is the dump a store keeps: Python's json writes and reads infinity and NaN,
    so from_dict gives back the plan the validator gave."""
    data = load_text(RICH, "rich.yaml").data
    data["variables"]["big"] = math.inf  # (a plan file cannot hold it: JSON has no infinity)
    plan = model.to_runtime(pydantic_plan(data, "rich.yaml"))
    for exclude in (False, True):
        data = json.loads(json.dumps(plan.to_dict(exclude, exact=True)))
        assert runtime.Plan.from_dict(data) == plan
    assert plan.to_dict()["variables"]["big"] is None  # what pydantic's JSON mode gives


def test_a_field_added_to_the_definition_reaches_schema_validation_and_cache(
    tmp_path: Path,
) -> None:
    """docs/architecture.md, "Adding a plan key": one field in planrun/plan/definition.py, nothing else,
    and the schema, the messages, did-you-mean and a plan cache hit all know it."""
    # With its byte-code: copied with their sources' times, it spares each process compiling
    # planrun; the edited module's no longer matches its source, so it is compiled afresh.
    shutil.copytree(ROOT / "planrun", tmp_path / "planrun")
    source = tmp_path / "planrun" / "plan" / "definition.py"
    anchor = "    description: str | None = None\n"
    assert source.read_text().count(anchor) == 2  # the step's (first) and the plan's
    note = '    note: Annotated[str | None, Spec(description="Free text.")] = None\n'
    source.write_text(source.read_text().replace(anchor, anchor + note, 1))
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: echo, note: hi}\n")
    (tmp_path / "bad.yaml").write_text(
        "steps:\n  - {id: a, tool: echo, note: 1}\n  - {id: b, tool: echo, nots: x}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def python(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, cwd=tmp_path, env=env
        )
        return proc.stdout + proc.stderr

    schema = json.loads(python("-m", "planrun", "schema"))
    assert schema["$defs"]["Step"]["properties"]["note"]["description"] == "Free text."
    bad = python("-m", "planrun", "validate", "bad.yaml")
    assert "bad.yaml:2:31: error: step 'a': note: expected a string, got 1" in bad
    assert "unknown key 'nots' in step 'b' (did you mean 'note'?)" in bad
    code = (
        "from planrun.plan.cache import check_plan_file as c; print(c('p.yaml').plan.steps[0].note)"
    )
    for _ in range(2):  # a miss that stores the plan, then a hit that loads it
        assert python("-c", code).strip() == "hi"
    assert len(list((tmp_path / ".planrun" / "plans").glob("*.json"))) == 1


def test_a_run_step_is_written_without_its_tool_and_read_back() -> None:
    text = "env: {A: a}\nsteps:\n  - {id: s, run: [echo 1, echo 2], cwd: d, env: {B: b}}\n"
    plan = check_document(load_text(text, "run.yaml")).plan
    assert plan is not None
    step = plan.steps[0]
    assert (step.tool, step.env) == ("shell", {"A": "a", "B": "b"})  # the plan's env under
    for exclude in (False, True):
        data = plan.to_dict(exclude_defaults=exclude)
        assert "tool" not in data["steps"][0]
        assert runtime.Plan.from_dict(data) == plan
        # a dump validates again (a planner's revision, a replanned state) to the same plan
        again = check_document(load_text(json.dumps(data), "again.json", "json"))
        assert again.ok and again.plan == plan
