"""The plan format, defined once: the frozen dataclasses a run reads, whose fields and
annotations planrun.plan.model turns into the validator and the JSON Schema.

A field's type, default and documentation are written here and nowhere else. What pydantic
needs beyond the type is metadata in `Annotated[...]` that only planrun.plan.model reads: `Spec`
(pydantic.Field's keywords: a description, a pattern, an alias) and `Kind` (a value with
planrun's own rules, such as a duration or a step id, which the model validates and
describes). Annotations are strings (`from __future__ import annotations`), so the run path
never evaluates them; only validation and the first dump or load of a plan do.

This module imports nothing heavy: a run whose checked plan is cached (planrun.plan.cache) builds
it with `Plan.from_dict`, a loader derived from the dataclass fields, without pydantic.
`to_dict` gives what pydantic's `model_dump(mode="json")` of the validated plan gives, so the
state's plan digest and a planner's context do not depend on which of the two dumped it.
"""

from __future__ import annotations

# Lazy import (inside a method), for start-up time: fnmatch only for a plan with a policy.
import dataclasses
from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Annotated, Any, Literal

from planrun.plan.data import Kind, PlanNode, Spec
from planrun.records import record

__all__ = [
    "INDEX_NAME",
    "RUN_TOOL",
    "NAME_PATTERN",
    "SCOPE_NAMES",
    "EXPRESSION_NAMES",
    "RESERVED_NAMES",
    "STEP_ID_PATTERN",
    "Defaults",
    "ExecutorConfig",
    "Kind",
    "Limits",
    "OnFailure",
    "Param",
    "Plan",
    "PlanNode",
    "Policy",
    "Replan",
    "ServerEntry",
    "Spec",
    "Step",
    "replace",
    "replan_problem",
    "server_problem",
    "transport_kind",
    "with_run_tool",
]

replace = dataclasses.replace
"""A copy of a part of a plan with some fields changed (a new object; the one way to change one)."""

STEP_ID_PATTERN = r"^[A-Za-z0-9_.-]+$"
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
SCOPE_NAMES = frozenset({"env", "steps"})
"""Names every expression can read: no variable, result variable or `as` may take them."""
EXPRESSION_NAMES = frozenset(
    {"true", "false", "none", "True", "False", "None", "self"}
    | {"range", "dict", "cycler", "joiner", "namespace"}
)
"""Names `${...}` does not read as a variable: Jinja's constants, `self` (its template) and its
functions (tests/test_plan_semantics.py holds this to Jinja's). No name in scope may take them."""
RESERVED_NAMES = SCOPE_NAMES | EXPRESSION_NAMES


def reserved(name: str) -> str:
    """Why a variable cannot be called `env`, `steps` or one of the expression language's names."""
    what = {
        "env": "the process environment",
        "steps": "the steps' status, result and error",
    }.get(name, "the expression language's own")
    return f"the name '{name}' is reserved ({what})"


INDEX_NAME = "index"
"""The name a `foreach` instance's position is bound to."""
RUN_TOOL = "shell"
"""The tool of a step written with `run:`."""


BLANK = "^[ \t\n\r]*$"
"""A command that is empty or only blanks (what YAML and /bin/sh read as white space): a `run`
string, or an entry of a `run` list, that would run nothing."""
_BLANK_RUN = {
    "anyOf": [
        {"type": "string", "pattern": BLANK},
        {"type": "array", "maxItems": 0},
        {"type": "array", "contains": {"type": "string", "pattern": BLANK}},
    ]
}


def none_of(names: frozenset[str]) -> dict[str, Any]:
    """The JSON Schema of "any value but these names"."""
    return {"not": {"enum": sorted(names)}}


# The kinds of value (planrun.plan.model's KINDS says what each accepts and how the schema words it).
StepId = Annotated[str, Kind("step_id")]  # [A-Za-z0-9_.-]+, or a whole number (mcp-cli)
Duration = Annotated[float, Kind("duration")]  # seconds, or a string like "1m30s"
Count = Annotated[int, Kind("count")]  # a whole number, 0 or more (not `true`)
PositiveCount = Annotated[int, Kind("positive_count")]  # a whole number, 1 or more
SourceGlob = Annotated[str, Kind("source_glob")]  # a glob relative to the working directory
OutputGlob = Annotated[str, Kind("output_glob")]  # the same, for files a step writes
ForeachExpression = Annotated[str, Kind("foreach_expression")]  # one ${expression}
Version = Annotated[Literal[1], Kind("version")]  # 1, and not `true`
# A question of at least two words (`Deploy ${version} to ${target}?`): a lone word such as
# `yes`, `no` or `on` is a YAML 1.1 boolean written as a string, not a question.
ApprovalText = Annotated[str, Kind("approval_text")]


class OnFailure(StrEnum):
    abort = "abort"
    continue_ = "continue"
    ignore = "ignore"
    replan = "replan"


@record(frozen=True, kw_only=True)
class Step(PlanNode):
    """One tool call in the plan (or, with `foreach`, one per element of a list)."""

    id: Annotated[StepId, Spec(description="Unique step id ([A-Za-z0-9_.-]+). Alias: index.")]
    title: str | None = None
    tool: Annotated[
        str,
        Spec(
            description="Built-in tool name, or SERVER.TOOL for an MCP server. A step has "
            "'tool' or 'run', not both ('run' is tool: shell).",
            json_schema_extra={"minLength": 1},  # validate.py: unknown tool ''
        ),
    ]
    args: dict[str, Any] = field(default_factory=dict)
    depends_on: list[StepId] = field(default_factory=list)
    result_variable: Annotated[
        str | None, Spec(pattern=NAME_PATTERN, json_schema_extra=none_of(RESERVED_NAMES))
    ] = None
    when: str | bool | None = None
    timeout: Duration | None = None
    retries: Count | None = None
    retry_delay: Duration | None = None
    on_failure: OnFailure | None = None
    expected_outcome: str | None = None
    approval: Annotated[
        bool | ApprovalText,
        Spec(
            description="true: asked with the step's title (and command); a text: the question "
            "asked."
        ),
    ] = False
    description: str | None = None
    resources: Annotated[
        dict[str, float] | None,
        Spec(description="Dask worker resources this step needs, e.g. {cpu: 2}."),
    ] = None
    sources: Annotated[
        list[SourceGlob] | None,
        Spec(
            description="Files the step reads (globs, ** across directories, ! excludes): "
            "in its cache key."
        ),
    ] = None
    outputs: Annotated[
        list[OutputGlob] | None,
        Spec(description="Files the step produces (globs): stored and restored by the cache."),
    ] = None
    cache: Annotated[
        bool | None,
        Spec(description="Cache this step (default: true when sources or outputs are given)."),
    ] = None
    foreach: Annotated[
        list[Any] | dict[str, Any] | ForeachExpression | None,
        Spec(
            description="Run the step once per element: a list, a mapping (elements {key, "
            "value}) or one ${expression} giving either. Instances are ID[0], ID[1], ..."
        ),
    ] = None
    # `as` is a Python keyword: the field is `as_`, written and dumped as `as`.
    as_: Annotated[
        str | None,
        Spec(
            alias="as",
            pattern=NAME_PATTERN,
            description="The element's name in args, when and title (default: item).",
            json_schema_extra=none_of(RESERVED_NAMES | {INDEX_NAME}),
        ),
    ] = None
    # ---- selecting steps (planrun.plan.targets) ----
    aliases: Annotated[
        list[StepId],
        Spec(
            description="Other names of the step as a target: `planrun run ALIAS`, --only, "
            "--force=ALIAS. None may be another step's id or alias."
        ),
    ] = field(default_factory=list)
    internal: Annotated[
        bool,
        Spec(
            description="A helper step: not shown by `list` (`list --all` shows it), refused "
            "as a target; runs as a dependency of the steps that need it."
        ),
    ] = False

    # `run`, step `env` and `cwd` (SPEC 13). A step with `run` is a `shell` step: its `tool` is
    # "shell" once loaded, and it is written without `tool` (to_dict), as the user wrote it.
    run: Annotated[
        str | list[str] | None,
        Spec(
            description="A shell step (tool: shell) in short: a string is one script run by "
            "/bin/sh -e -c (it stops at its first failing command); a list runs each string "
            "by /bin/sh -c in order and stops at the first that fails. ${...} values are "
            "quoted for the shell.",
            json_schema_extra={"not": _BLANK_RUN},  # validate_places.check_run words it
        ),
    ] = None
    env: Annotated[
        dict[str, str] | None,
        Spec(
            description="Environment variables for a run, shell or python step (over the "
            "plan's env; a shell step's args.env wins). Values may hold ${...}."
        ),
    ] = None
    cwd: Annotated[
        str | None,
        Spec(
            description="The directory a run or shell step runs in, and a plan step's sub-plan "
            "runs in (relative to the working directory; may hold ${...}). The step's sources "
            "and outputs are relative to it."
        ),
    ] = None

    # ---- §13: always, matrix, max_parallel (planrun.plan.fanout, planrun.run.scheduler) ----
    always: Annotated[
        bool,
        Spec(
            description="Run once every dependency has finished, whatever its status (also "
            "after an abort; not after an interrupt). Its failure fails the run."
        ),
    ] = False
    matrix: Annotated[
        dict[str, list[Any] | ForeachExpression] | None,
        Spec(
            description="Run the step once per combination of these lists (the first name "
            "varies slowest), each bound to `matrix` (${matrix.NAME}); `exclude: [{...}]` drops "
            "combinations. A list may be one ${expression} giving it. Instances are ID[0], "
            "ID[1], ..."
        ),
    ] = None
    max_parallel: Annotated[
        PositiveCount | None,
        Spec(description="A foreach or matrix step: at most this many instances at once."),
    ] = None

    def to_dict(self, exclude_defaults: bool = False, *, exact: bool = False) -> dict[str, Any]:
        # super() without arguments fails in a slotted record: slots make a new class.
        out = super(Step, self).to_dict(exclude_defaults, exact=exact)  # noqa: UP008
        if self.run is not None:  # `tool: shell` is implied; written, it would be an error
            out.pop("tool", None)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return super(Step, cls).from_dict(with_run_tool(data))  # noqa: UP008


def with_run_tool(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A step's data with `tool: shell` where it is written with `run:` and no `tool`."""
    if "run" in data and data["run"] is not None and "tool" not in data:
        return {**data, "tool": RUN_TOOL}
    return data


ParamType = Literal["string", "integer", "number", "boolean", "list", "mapping"]


@record(frozen=True, kw_only=True)
class Param(PlanNode):
    """A variable set from the command line, converted to its declared type and checked."""

    type: Annotated[
        ParamType, Spec(description="What --var VALUE is converted to (default: string).")
    ] = "string"
    default: Annotated[Any, Spec(description="The value without --var / --vars-file.")] = None
    required: Annotated[
        bool, Spec(description="A run without a value for it is refused (exit 2).")
    ] = False
    choices: Annotated[
        list[Any] | None,
        Spec(description="The only values it may take.", json_schema_extra={"minItems": 1}),
    ] = None
    description: Annotated[str | None, Spec(description="Shown by `planrun list`.")] = None


@record(frozen=True, kw_only=True)
class ServerEntry(PlanNode):
    """An MCP server, in the shape of the common `mcpServers` client config."""

    type: Literal["stdio", "http", "sse", "streamable-http"] | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    envFile: str | None = None  # noqa: N815 - VS Code's spelling
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    connect_timeout: Annotated[
        Duration | None,
        Spec(description="planrun: how long the start-up handshake may take (default 20s)."),
    ] = None

    @property
    def transport(self) -> str:
        """How planrun talks to it: stdio, http, sse or streamable-http (transport_kind)."""
        return transport_kind(self.type, self.url, self.command)


def server_problem(command: object, url: object) -> str | None:
    """What is wrong with a server entry's `command` and `url` as a pair (None: nothing)."""
    if command is None and url is None:
        return "a server needs 'command' (stdio) or 'url' (http)"
    if command is not None and url is not None:
        return "a server has either 'command' (stdio) or 'url' (http), not both"
    return None


def replan_problem(command: object, tool: object) -> str | None:
    """What is wrong with a planner's `command` and `tool` as a pair (None: nothing)."""
    if (command is None) == (tool is None):
        return "replan needs exactly one of 'command' or 'tool'"
    return None


def planner_argv(command: list[str] | str) -> list[str]:
    """A planner `command` as the words it runs (a string is split as the shell splits words);
    ValueError saying why it names no program."""
    if isinstance(command, str):
        import shlex  # (only where a planner is used)

        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"the planner command does not parse ({exc})") from None
    else:
        argv = list(command)
    if not argv or not argv[0].strip():
        raise ValueError("the planner command is empty")
    return argv


def transport_kind(type_: str | None, url: object, command: object) -> str:
    """A server entry's transport: its `type`; without one, http for a url and no command,
    else stdio. (Also applied to a config file's raw entry before it is a ServerEntry.)"""
    if type_ is not None:
        return type_
    return "http" if url is not None and command is None else "stdio"


@record(frozen=True, kw_only=True)
class Defaults(PlanNode):
    timeout: Duration | None = None
    retries: Count = 0
    retry_delay: Duration = 1.0
    on_failure: OnFailure = OnFailure.abort


@record(frozen=True, kw_only=True)
class Limits(PlanNode):
    max_steps: PositiveCount | None = None
    max_replans: Count = 2
    max_concurrency: PositiveCount | None = None
    tool_caps: dict[str, Count] = field(default_factory=dict)


@record(frozen=True, kw_only=True)
class Policy(PlanNode):
    require_approval: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


@record(frozen=True, kw_only=True)
class Replan(PlanNode):
    command: list[str] | str | None = None
    tool: str | None = None
    timeout: Duration = 60.0


@record(frozen=True, kw_only=True)
class ExecutorConfig(PlanNode):
    type: Literal["local", "dask"] = "local"
    address: str | None = None


@record(frozen=True, kw_only=True)
class Plan(PlanNode):
    """A whole plan. `name` is always set once loaded (the file stem by default)."""

    version: Version | None = None
    name: Annotated[str | None, Spec(description="Default: the file stem. Alias: id.")] = None
    title: str | None = None
    description: str | None = None
    variables: Annotated[
        dict[str, Any], Spec(json_schema_extra={"propertyNames": none_of(RESERVED_NAMES)})
    ] = field(default_factory=dict)
    servers: dict[str, ServerEntry] = field(default_factory=dict)
    defaults: Defaults = field(default_factory=Defaults)
    limits: Limits = field(default_factory=Limits)
    policy: Policy = field(default_factory=Policy)
    replan: Replan | None = None
    secrets: list[str] = field(default_factory=list)
    executor: ExecutorConfig | None = None
    dotenv: Annotated[
        list[str],
        Spec(
            description="KEY=VALUE files added to the steps' environment; a name ending in ? "
            "is optional. Names may hold ${...} (variables)."
        ),
    ] = field(default_factory=list)
    grace: Annotated[
        Duration | None,
        Spec(
            description="How long an interrupt waits for running steps to end before killing "
            "them (default 10s; --grace overrides)."
        ),
    ] = None
    # Plan-level `env` (SPEC 13): every run, shell and python step's environment, under the
    # step's own `env` (planrun.run.stepcall). Its values may read variables and `env`.
    env: Annotated[
        dict[str, str],
        Spec(
            description="Environment variables for every run, shell and python step (over "
            "dotenv files and the process environment). Values may hold ${...}."
        ),
    ] = field(default_factory=dict)
    # ---- selecting steps (planrun.plan.targets) ----
    default: Annotated[
        list[StepId] | None,
        Spec(
            description="Step ids (or aliases) `planrun run` runs, with what they depend on, "
            "when no target is given; without it, every step."
        ),
    ] = None
    # ---- §13: params (planrun.plan.params) ----
    params: Annotated[
        dict[str, Param],
        Spec(
            description="Variables that are the plan's command-line interface (--var NAME=...): "
            "typed, with a default, choices, required.",
            json_schema_extra={
                "propertyNames": {"pattern": NAME_PATTERN, **none_of(RESERVED_NAMES)}
            },
        ),
    ] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    # Step by id, built on first use (replace() makes a new Plan, so a new index).
    _index: dict[str, Step] | None = field(default=None, init=False, repr=False, compare=False)

    def step(self, step_id: str) -> Step:
        """The step with this id (KeyError if none)."""
        index = self._index
        if index is None:
            index = {s.id: s for s in self.steps}
            object.__setattr__(self, "_index", index)
        return index[step_id]

    def needs_approval(self, step: Step) -> bool:
        """`approval: true` or a question, or a tool matched by `policy.require_approval`."""
        if step.approval or not self.policy.require_approval:
            return bool(step.approval)  # true, or the question's text
        import fnmatch

        return any(fnmatch.fnmatchcase(step.tool, p) for p in self.policy.require_approval)

    @property
    def goal(self) -> str:
        return self.description or self.title or self.name or ""
