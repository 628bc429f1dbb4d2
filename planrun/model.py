"""The plan format (docs/reference.md, Plan files) as frozen pydantic models, with JSON Schema export."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the cache's glob checks (wcmatch) only for a
# plan with cache globs.
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    WithJsonSchema,
    model_validator,
)

from planrun import plan as runtime
from planrun.durations import DURATION_PATTERN, parse_duration
from planrun.plan import OnFailure

STEP_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")

# The schema must accept what parse_duration accepts ("30s" as well as 30), so it replaces
# pydantic's generated `"type": "number"` rather than adding to it.
Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": DURATION_PATTERN},
            ]
        }
    ),
]


def _not_bool(value: Any) -> Any:
    # pydantic takes `true` as 1 for an int field; `retries: true` is a mistake, not a count.
    if isinstance(value, bool):
        raise ValueError(f"expected a whole number, got {str(value).lower()}")
    return _whole(value)


def _whole(value: Any) -> Any:
    # `2.0` is the number 2 to JSON (and to the schema's "integer"): taken as 2, not refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Count = Annotated[int, Field(ge=0), BeforeValidator(_not_bool)]
PositiveCount = Annotated[int, Field(ge=1), BeforeValidator(_not_bool)]


def _step_id(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    value = _whole(value)
    if isinstance(value, int):
        return str(value)
    return value


# mcp-cli plans number their steps (`index: 1`, `depends_on: [1]`): the schema allows ints too.
StepId = Annotated[
    str,
    BeforeValidator(_step_id),
    Field(pattern=STEP_ID_RE.pattern),
    WithJsonSchema(
        {"anyOf": [{"type": "string", "pattern": STEP_ID_RE.pattern}, {"type": "integer"}]}
    ),
]


def _glob(output: bool) -> Any:
    def check(value: str) -> str:
        from planrun.cache.globs import pattern_problem

        problem = pattern_problem(value, output=output)
        if problem:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


# `sources` / `outputs` entries: globs relative to the working directory, `!` excludes.
SourceGlob = Annotated[str, Field(min_length=1), _glob(False)]
OutputGlob = Annotated[str, Field(min_length=1), _glob(True)]


def _alias(data: Any, alias: str, name: str) -> Any:
    """`data` with the `alias` key renamed to `name` (when `name` itself is absent)."""
    if isinstance(data, dict) and alias in data and name not in data:
        data = dict(data)
        data[name] = data.pop(alias)
    return data


class _Frozen(BaseModel):
    # Strict: `approval: "yes"`, `retries: "3"` or `max_concurrency: "2"` are mistakes the
    # schema rejects, so validation rejects them too instead of converting them.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)


# Enums are written as their string values, which strict mode alone would refuse.
OnFailureName = Annotated[OnFailure, Strict(False)]


class Step(_Frozen):
    """One tool call in the plan (or, with `foreach`, one per element of a list)."""

    # `as` is a Python keyword: the field is `as_`, written and dumped as `as`.
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True
    )

    id: StepId = Field(description="Unique step id ([A-Za-z0-9_.-]+). Alias: index.")
    title: str | None = None
    tool: str = Field(description="Built-in tool name, or SERVER.TOOL for an MCP server.")
    args: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[StepId] = Field(default_factory=list)
    result_variable: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    when: str | bool | None = None
    timeout: Duration | None = None
    retries: Count | None = None
    retry_delay: Duration | None = None
    on_failure: OnFailureName | None = None
    expected_outcome: str | None = None
    approval: bool = False
    description: str | None = None
    resources: dict[str, float] | None = Field(
        default=None, description="Dask worker resources this step needs, e.g. {cpu: 2}."
    )
    sources: list[SourceGlob] | None = Field(
        default=None,
        description="Files the step reads (globs, ** across directories, ! excludes): in its cache key.",
    )
    outputs: list[OutputGlob] | None = Field(
        default=None,
        description="Files the step produces (globs): stored and restored by the cache.",
    )
    cache: StrictBool | None = Field(
        default=None,
        description="Cache this step (default: true when sources or outputs are given).",
    )
    foreach: list[Any] | dict[str, Any] | str | None = Field(
        default=None,
        description="Run the step once per element: a list, a mapping (elements {key, value}) "
        "or one ${expression} giving either. Instances are ID[0], ID[1], ...",
    )
    as_: str | None = Field(
        default=None,
        alias="as",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The element's name in args, when and title (default: item).",
    )

    @model_validator(mode="before")
    @classmethod
    def _index_alias(cls, data: Any) -> Any:
        return _alias(data, "index", "id")


class ServerEntry(_Frozen):
    """An MCP server, in the shape of the common `mcpServers` client config."""

    type: Literal["stdio", "http", "sse", "streamable-http"] | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    envFile: str | None = None  # noqa: N815 - VS Code's spelling
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: Duration | None = Field(
        default=None, description="planrun: how long the start-up handshake may take (default 20s)."
    )

    @model_validator(mode="after")
    def _command_or_url(self) -> ServerEntry:
        if self.command is None and self.url is None:
            raise ValueError("a server needs 'command' (stdio) or 'url' (http)")
        if self.command is not None and self.url is not None:
            raise ValueError("a server has either 'command' (stdio) or 'url' (http), not both")
        return self


class Defaults(_Frozen):
    timeout: Duration | None = None
    retries: Count = 0
    retry_delay: Duration = 1.0
    on_failure: OnFailureName = OnFailure.abort


class Limits(_Frozen):
    max_steps: PositiveCount | None = None
    max_replans: Count = 2
    max_concurrency: PositiveCount | None = None
    tool_caps: dict[str, Count] = Field(default_factory=dict)


class Policy(_Frozen):
    require_approval: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class Replan(_Frozen):
    command: list[str] | str | None = None
    tool: str | None = None
    timeout: Duration = 60.0

    @model_validator(mode="after")
    def _one_source(self) -> Replan:
        if (self.command is None) == (self.tool is None):
            raise ValueError("replan needs exactly one of 'command' or 'tool'")
        return self


class ExecutorConfig(_Frozen):
    type: Literal["local", "dask"] = "local"
    address: str | None = None


class PlanHeader(_Frozen):
    """Everything in a plan but its steps (validated separately so every step's errors show)."""

    version: Annotated[Literal[1], BeforeValidator(_not_bool)] | None = None
    name: str | None = Field(default=None, description="Default: the file stem. Alias: id.")
    title: str | None = None
    description: str | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    servers: dict[str, ServerEntry] = Field(default_factory=dict)
    defaults: Defaults = Field(default_factory=Defaults)
    limits: Limits = Field(default_factory=Limits)
    policy: Policy = Field(default_factory=Policy)
    replan: Replan | None = None
    secrets: list[str] = Field(default_factory=list)
    executor: ExecutorConfig | None = None
    dotenv: list[str] = Field(
        default_factory=list,
        description="KEY=VALUE files added to the steps' environment; a name ending in ? is optional.",
    )
    grace: Duration | None = Field(
        default=None,
        description="How long an interrupt waits for running steps to end before killing them "
        "(default 10s; --grace overrides).",
    )

    @model_validator(mode="before")
    @classmethod
    def _id_alias(cls, data: Any) -> Any:
        return _alias(data, "id", "name")


class Plan(PlanHeader):
    """A whole plan. `name` is always set once loaded (the file stem by default)."""

    steps: list[Step] = Field(default_factory=list)


def runtime_step(step: Step) -> runtime.Step:
    """The runtime step (planrun.plan) for a validated step: same fields, same values."""
    return runtime.Step(**step.__dict__)


def runtime_server(entry: ServerEntry) -> runtime.ServerEntry:
    return runtime.ServerEntry(**entry.__dict__)


def runtime_plan(
    header: PlanHeader,
    *,
    name: str | None,
    steps: list[runtime.Step],
    servers: dict[str, runtime.ServerEntry],
) -> runtime.Plan:
    """The runtime plan for a validated header, its (converted) steps and servers."""
    h = header
    return runtime.Plan(
        version=h.version,
        name=name,
        title=h.title,
        description=h.description,
        variables=h.variables,
        servers=servers,
        defaults=runtime.Defaults(**h.defaults.__dict__),
        limits=runtime.Limits(**h.limits.__dict__),
        policy=runtime.Policy(**h.policy.__dict__),
        replan=None if h.replan is None else runtime.Replan(**h.replan.__dict__),
        secrets=h.secrets,
        executor=None if h.executor is None else runtime.ExecutorConfig(**h.executor.__dict__),
        dotenv=h.dotenv,
        grace=h.grace,
        steps=steps,
    )


def to_runtime(plan: Plan) -> runtime.Plan:
    """The runtime plan for a whole validated plan."""
    return runtime_plan(
        plan,
        name=plan.name,
        steps=[runtime_step(s) for s in plan.steps],
        servers={n: runtime_server(e) for n, e in plan.servers.items()},
    )


PLAN_FIELDS = sorted(set(Plan.model_fields) | {"id"})
STEP_FIELDS = sorted((set(Step.model_fields) - {"as_"}) | {"index", "as"})


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema (Draft 2020-12) of the plan format, for editors and `planrun schema`.

    It rejects what validation rejects for the plan's structure too: `steps` is required (an
    empty list is valid), a step has exactly one of `id`/`index`, a server exactly one of
    `command`/`url`, a planner exactly one of `command`/`tool`, a plan at most one of
    `name`/`id`, and `as` only with `foreach`.
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
    step["required"] = ["tool"]
    step["oneOf"] = [{"required": ["id"]}, {"required": ["index"]}]
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
