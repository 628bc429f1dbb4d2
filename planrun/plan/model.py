"""The plan format's validator and JSON Schema: pydantic models made from planrun.plan.definition's
dataclasses (their fields, defaults and Spec), with the rules of each Kind of value and of each
object written here."""

from __future__ import annotations

import dataclasses
from enum import Enum
from types import GenericAlias, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    WithJsonSchema,
    create_model,
    model_validator,
)

from planrun.plan import definition as runtime
from planrun.plan.data import ANY, ENUM, NODE, NODES, PLAIN, Kind, PlanNode, Spec, rows
from planrun.plan.definition import STEP_ID_PATTERN
from planrun.plan.durations import DURATION_PATTERN, LONGEST_DURATION
from planrun.plan.kinds import KIND_RULES, KindRule

# Some rules below are checked by validate.py, not by pydantic: it words them itself and keeps
# checking the rest of the step. The schema still has to say them (`json_schema_extra` in
# planrun.plan.definition's Spec), and tests/test_schema_agrees.py holds both to the same verdict.


# The schema must accept what parse_duration accepts ("30s" as well as 30), so it replaces
# pydantic's generated `"type": "number"` rather than adding to it. No comparison holds for
# NaN (`.nan` in YAML), so `minimum` lets it through in python-jsonschema and in the YAML
# language server alike; `not: {exclusiveMaximum: 0}` ("not below 0") is valid for NaN, so
# it is refused. (Validators that fail every comparison on NaN, as ajv does, refuse it at
# `minimum`.) `maximum` refuses infinity, which is what `.inf` and `1e400` are read as.
_SCHEMAS: dict[str, dict[str, Any]] = {
    "duration": {
        "anyOf": [
            {
                "type": "number",
                "minimum": 0,
                "maximum": LONGEST_DURATION,
                "not": {"exclusiveMaximum": 0},
            },
            {"type": "string", "pattern": DURATION_PATTERN},
        ]
    },
    "foreach_expression": {"type": "string", "pattern": r"^\$\{[\s\S]*\}$"},
    # mcp-cli plans number their steps (`index: 1`, `depends_on: [1]`): the schema allows ints.
    "step_id": {"anyOf": [{"type": "string", "pattern": STEP_ID_PATTERN}, {"type": "integer"}]},
}


def _kind_type(name: str, rule: KindRule) -> Any:
    """The pydantic type of a kind of value (planrun.plan.kinds says its rules)."""
    base: Any = Literal[rule.values] if rule.values else rule.type  # type: ignore[valid-type]
    meta: list[Any] = []
    limits: dict[str, Any] = {"ge": rule.ge, "min_length": rule.min_length, "pattern": rule.pattern}
    if any(v is not None for v in limits.values()):
        meta.append(Field(**{k: v for k, v in limits.items() if v is not None}))
    if rule.after is not None:
        meta.append(AfterValidator(rule.after))
    if rule.before is not None:
        meta.append(BeforeValidator(rule.before))
    if name in _SCHEMAS:
        meta.append(WithJsonSchema(_SCHEMAS[name]))
    return Annotated[(base, *meta)] if meta else base


def _alias(data: Any, alias: str, name: str) -> Any:
    """`data` with the `alias` key renamed to `name` (when `name` itself is absent)."""
    if isinstance(data, dict) and alias in data and name not in data:
        data = dict(data)
        data[name] = data.pop(alias)
    return data


class _Node(BaseModel):
    # Strict: `approval: "yes"`, `retries: "3"` or `max_concurrency: "2"` are mistakes the
    # schema rejects, so validation rejects them too instead of converting them. A step's
    # `as_` is written and dumped as `as`.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        strict=True,
        serialize_by_alias=True,
    )


# The rules of a whole object (aliases, one key or the other), on top of its fields.


class _StepRules(_Node):
    @model_validator(mode="before")
    @classmethod
    def _index_alias(cls, data: Any) -> Any:
        data = _alias(data, "index", "id")
        # `run:` is `tool: shell` (validate.py refuses a step that writes both).
        return runtime.with_run_tool(data) if isinstance(data, dict) else data


class _ServerRules(_Node):
    @model_validator(mode="after")
    def _command_or_url(self) -> Any:
        problem = runtime.server_problem(getattr(self, "command"), getattr(self, "url"))  # noqa: B009
        if problem:
            raise ValueError(problem)
        return self


class _ReplanRules(_Node):
    @model_validator(mode="after")
    def _one_source(self) -> Any:
        problem = runtime.replan_problem(getattr(self, "command"), getattr(self, "tool"))  # noqa: B009
        if problem:
            raise ValueError(problem)
        return self


class _HeaderRules(_Node):
    @model_validator(mode="before")
    @classmethod
    def _id_alias(cls, data: Any) -> Any:
        return _alias(data, "id", "name")


_RULES: dict[type, type[_Node]] = {
    runtime.Step: _StepRules,
    runtime.ServerEntry: _ServerRules,
    runtime.Replan: _ReplanRules,
    runtime.Plan: _HeaderRules,
}

# What each planrun.plan.definition Kind accepts (planrun.plan.kinds), and how the schema says it.
KINDS: dict[str, Any] = {name: _kind_type(name, rule) for name, rule in KIND_RULES.items()}

_MODELS: dict[type, type[BaseModel]] = {}
_RUNTIME: dict[type[BaseModel], type[PlanNode]] = {}


def _validated(hint: Any) -> Any:
    """The pydantic type for an (evaluated) annotation of planrun.plan.definition."""
    origin = get_origin(hint)
    if origin is Annotated:
        kinds = [m.name for m in hint.__metadata__ if isinstance(m, Kind)]
        return KINDS[kinds[0]] if kinds else _validated(hint.__origin__)
    if isinstance(hint, type) and issubclass(hint, PlanNode):
        return _model(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return Annotated[hint, Strict(False)]  # written as its string value
    args = get_args(hint)
    if origin in (Union, UnionType):
        return Union[tuple(_validated(a) for a in args)]  # noqa: UP007
    if origin is list:
        return GenericAlias(list, (_validated(args[0]),))
    if origin is dict:
        return GenericAlias(dict, (args[0], _validated(args[1])))
    return hint


def _field(f: dataclasses.Field[Any], hint: Any) -> tuple[Any, Any]:
    """A dataclass field as a pydantic field: its type, default and Spec."""
    spec: dict[str, Any] = {}
    for meta in getattr(hint, "__metadata__", ()):
        if isinstance(meta, Spec):
            spec.update(meta.kwargs)
    if f.default is not dataclasses.MISSING:
        spec["default"] = f.default
    elif f.default_factory is not dataclasses.MISSING:
        factory = f.default_factory
        node = isinstance(factory, type) and issubclass(factory, PlanNode)
        spec["default_factory"] = _model(factory) if node else factory  # type: ignore[arg-type]
    return _validated(hint), Field(**spec)


def _model(cls: type[PlanNode], name: str | None = None, skip: tuple[str, ...] = ()) -> Any:
    """The pydantic model of a planrun.plan.definition class (made once): its fields, the Kinds' rules,
    the class's own rules (_RULES) and its docstring (not dataclass's generated one)."""
    name = name or cls.__name__
    if name in _BY_NAME:
        return _BY_NAME[name]
    hints = get_type_hints(cls, include_extras=True)
    fields: dict[str, Any] = {
        f.name: _field(f, hints[f.name])
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.init and f.name not in skip
    }
    doc = cls.__doc__ if not (cls.__doc__ or "").startswith(f"{cls.__name__}(") else None
    built: Any = create_model(
        name,
        __base__=_RULES.get(cls, _Node),
        __module__=__name__,
        __doc__=doc,
        **fields,
    )
    _BY_NAME[name] = built
    _MODELS.setdefault(cls, built)
    _RUNTIME[built] = cls
    return built


_BY_NAME: dict[str, Any] = {}

Step: Any = _model(runtime.Step)
ServerEntry: Any = _model(runtime.ServerEntry)
Defaults: Any = _model(runtime.Defaults)
Limits: Any = _model(runtime.Limits)
Policy: Any = _model(runtime.Policy)
Replan: Any = _model(runtime.Replan)
ExecutorConfig: Any = _model(runtime.ExecutorConfig)
Param: Any = _model(runtime.Param)
# Everything in a plan but its steps (validated separately so every step's errors show).
PlanHeader: Any = _model(runtime.Plan, "PlanHeader", skip=("steps",))
_RUNTIME[PlanHeader] = runtime.Plan
Plan: Any = _model(runtime.Plan)


def to_runtime(validated: BaseModel) -> Any:
    """The planrun.plan.definition object for a validated model: same fields, same values."""
    cls = _RUNTIME[type(validated)]
    return cls(**_runtime_fields(cls, validated))


def _runtime_fields(cls: type[PlanNode], validated: BaseModel) -> dict[str, Any]:
    values = validated.__dict__
    kwargs: dict[str, Any] = {}
    for name, _, kind, _, _ in rows(cls):
        if name not in values:
            continue
        value = values[name]
        if value is None or kind in (PLAIN, ANY, ENUM):
            kwargs[name] = value
        elif kind == NODE:
            kwargs[name] = to_runtime(value)
        elif kind == NODES:
            kwargs[name] = {k: to_runtime(v) for k, v in value.items()}
        else:
            kwargs[name] = [to_runtime(v) for v in value]
    return kwargs


def runtime_step(step: BaseModel) -> runtime.Step:
    """The runtime step (planrun.plan.definition) for a validated step."""
    made: runtime.Step = to_runtime(step)
    return made


def runtime_server(entry: BaseModel) -> runtime.ServerEntry:
    made: runtime.ServerEntry = to_runtime(entry)
    return made


PLAN_FIELDS = sorted(set(Plan.model_fields) | {"id"})
STEP_FIELDS = sorted((set(Step.model_fields) - {"as_"}) | {"index", "as"})


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema (Draft 2020-12) of the plan format, for editors and `planrun schema`.

    It rejects what validation rejects for the plan's structure too: `steps` is required (an
    empty list is valid), a step has exactly one of `id`/`index`, a server exactly one of
    `command`/`url`, a planner exactly one of `command`/`tool`, a plan at most one of
    `name`/`id`, a step exactly one of `tool`/`run`, and `as` only with `foreach`.
    """
    schema = Plan.model_json_schema()
    defs = schema["$defs"]
    schema["properties"]["id"] = {**schema["properties"]["name"], "description": "Alias of name."}
    schema["required"] = ["steps"]
    schema["not"] = {"required": ["name", "id"]}
    step = defs["Step"]
    step["properties"]["index"] = {
        **step["properties"]["id"],
        "description": "Alias of id (mcp-cli plans).",
    }
    # exactly one of `id`/`index`, and exactly one of `tool`/`run` (`run` is tool: shell)
    step.pop("required", None)
    step["allOf"] = [
        {"oneOf": [{"required": ["id"]}, {"required": ["index"]}]},
        {"oneOf": [{"required": ["tool"]}, {"required": ["run"]}]},
        # a `run` step takes no `args` (validate: "a 'run' step takes no 'args'")
        {
            "if": {"required": ["run"], "properties": {"run": {"not": {"type": "null"}}}},
            "then": {"properties": {"args": {"maxProperties": 0}}},
        },
    ]
    # `as` (a name, not null) names the element of a `foreach` (one that is not null)
    step["if"] = {"required": ["as"], "properties": {"as": {"type": "string"}}}
    step["then"] = {"required": ["foreach"], "properties": {"foreach": {"not": {"type": "null"}}}}
    defs["ServerEntry"]["oneOf"] = _exactly_one_string("command", "url")
    replan = defs["Replan"]
    replan["oneOf"] = [
        {"required": ["command"], "properties": {"command": {"not": {"type": "null"}}}},
        {"required": ["tool"], "properties": {"tool": {"type": "string"}}},
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://planrun.dev/schema/plan-v1.json",
        "title": "planrun plan",
        **schema,
    }


def _exactly_one_string(a: str, b: str) -> list[dict[str, Any]]:
    """A `oneOf` for "exactly one of keys a and b holds a string" (the other absent or null)."""
    return [{"required": [key], "properties": {key: {"type": "string"}}} for key in (a, b)]


__all__ = [
    "PLAN_FIELDS",
    "STEP_FIELDS",
    "Plan",
    "PlanHeader",
    "Step",
    "plan_json_schema",
    "runtime_server",
    "runtime_step",
    "to_runtime",
]
