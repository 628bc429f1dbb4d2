"""The plan as it runs: frozen value objects, built from data planrun.model has already validated.

planrun.model (pydantic) is the validator and the JSON Schema; this module is what the
scheduler, the tools and the state read. It imports nothing heavy, so a run that does not
validate (a plan cache hit) never loads pydantic. The classes mirror the pydantic models:
same names, same fields, same defaults. They are slotted classes written out rather than
made with @dataclass: generating the methods of eight frozen dataclasses costs about a third
of what building the pydantic models does, on every start. `from_dict` trusts its input (it validates nothing);
`to_dict` gives what pydantic's `model_dump(mode="json")` gives for the same plan, so the
state's plan digest and a planner's context do not depend on which of the two dumped it.
"""

from __future__ import annotations

# Lazy import (inside a method), for start-up time: fnmatch only for a plan with a policy.
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from planrun.plannode import ANY, COPY, ENUM, LIST_NODES, NODE, NODES, PlanNode, replace, table

__all__ = [
    "Defaults",
    "ExecutorConfig",
    "Limits",
    "OnFailure",
    "Plan",
    "PlanNode",
    "Policy",
    "Replan",
    "ServerEntry",
    "Step",
    "replace",
    "transport_kind",
]


class OnFailure(StrEnum):
    abort = "abort"
    continue_ = "continue"
    ignore = "ignore"
    replan = "replan"


_set = object.__setattr__


class Step(PlanNode):
    """One tool call in the plan (or, with `foreach`, one per element of a list)."""

    __slots__ = (
        "id",
        "title",
        "tool",
        "args",
        "depends_on",
        "result_variable",
        "when",
        "timeout",
        "retries",
        "retry_delay",
        "on_failure",
        "expected_outcome",
        "approval",
        "description",
        "resources",
        "sources",
        "outputs",
        "cache",
        "foreach",
        "as_",
    )
    id: str
    title: str | None
    tool: str
    args: dict[str, Any]
    depends_on: list[str]
    result_variable: str | None
    when: str | bool | None
    timeout: float | None
    retries: int | None
    retry_delay: float | None
    on_failure: OnFailure | None
    expected_outcome: str | None
    approval: bool
    description: str | None
    resources: dict[str, float] | None
    sources: list[str] | None
    outputs: list[str] | None
    cache: bool | None
    foreach: list[Any] | dict[str, Any] | str | None
    # `as` is a Python keyword: the field is `as_`, written and dumped as `as`.
    as_: str | None

    def __init__(
        self,
        *,
        id: str,
        title: str | None = None,
        tool: str,
        args: dict[str, Any] | None = None,
        depends_on: list[str] | None = None,
        result_variable: str | None = None,
        when: str | bool | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        retry_delay: float | None = None,
        on_failure: OnFailure | None = None,
        expected_outcome: str | None = None,
        approval: bool = False,
        description: str | None = None,
        resources: dict[str, float] | None = None,
        sources: list[str] | None = None,
        outputs: list[str] | None = None,
        cache: bool | None = None,
        foreach: list[Any] | dict[str, Any] | str | None = None,
        as_: str | None = None,
    ) -> None:
        _set(self, "id", id)
        _set(self, "title", title)
        _set(self, "tool", tool)
        _set(self, "args", {} if args is None else args)
        _set(self, "depends_on", [] if depends_on is None else depends_on)
        _set(self, "result_variable", result_variable)
        _set(self, "when", when)
        _set(self, "timeout", timeout)
        _set(self, "retries", retries)
        _set(self, "retry_delay", retry_delay)
        _set(self, "on_failure", on_failure)
        _set(self, "expected_outcome", expected_outcome)
        _set(self, "approval", approval)
        _set(self, "description", description)
        _set(self, "resources", resources)
        _set(self, "sources", sources)
        _set(self, "outputs", outputs)
        _set(self, "cache", cache)
        _set(self, "foreach", foreach)
        _set(self, "as_", as_)

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = dict(data)
        if "as" in kwargs:
            kwargs["as_"] = kwargs.pop("as")
        if kwargs.get("on_failure") is not None:
            kwargs["on_failure"] = OnFailure(kwargs["on_failure"])
        return kwargs


table(
    Step,
    {
        "args": ANY,
        "depends_on": COPY,
        "on_failure": ENUM,
        "resources": ANY,
        "sources": COPY,
        "outputs": COPY,
        "foreach": ANY,
    },
    {"as_": "as"},
    required=("id", "tool"),
)


class ServerEntry(PlanNode):
    """An MCP server, in the shape of the common `mcpServers` client config."""

    __slots__ = (
        "type",
        "command",
        "args",
        "env",
        "cwd",
        "envFile",
        "url",
        "headers",
        "connect_timeout",
    )
    type: Literal["stdio", "http", "sse", "streamable-http"] | None
    command: str | None
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    envFile: str | None  # noqa: N815 - VS Code's spelling
    url: str | None
    headers: dict[str, str]
    connect_timeout: float | None

    def __init__(
        self,
        *,
        type: Literal["stdio", "http", "sse", "streamable-http"] | None = None,
        command: str | None = None,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        envFile: str | None = None,  # noqa: N803
        url: str | None = None,
        headers: dict[str, str] | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        _set(self, "type", type)
        _set(self, "command", command)
        _set(self, "args", [] if args is None else args)
        _set(self, "env", {} if env is None else env)
        _set(self, "cwd", cwd)
        _set(self, "envFile", envFile)
        _set(self, "url", url)
        _set(self, "headers", {} if headers is None else headers)
        _set(self, "connect_timeout", connect_timeout)

    @property
    def transport(self) -> str:
        """How planrun talks to it: stdio, http, sse or streamable-http (transport_kind)."""
        return transport_kind(self.type, self.url, self.command)


def transport_kind(type_: str | None, url: object, command: object) -> str:
    """A server entry's transport: its `type`; without one, http for a url and no command,
    else stdio. (Also applied to a config file's raw entry before it is a ServerEntry.)"""
    if type_ is not None:
        return type_
    return "http" if url is not None and command is None else "stdio"


table(ServerEntry, {"args": COPY, "env": COPY, "headers": COPY})


class Defaults(PlanNode):
    __slots__ = ("timeout", "retries", "retry_delay", "on_failure")
    timeout: float | None
    retries: int
    retry_delay: float
    on_failure: OnFailure

    def __init__(
        self,
        *,
        timeout: float | None = None,
        retries: int = 0,
        retry_delay: float = 1.0,
        on_failure: OnFailure = OnFailure.abort,
    ) -> None:
        _set(self, "timeout", timeout)
        _set(self, "retries", retries)
        _set(self, "retry_delay", retry_delay)
        _set(self, "on_failure", on_failure)

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = dict(data)
        if "on_failure" in kwargs:
            kwargs["on_failure"] = OnFailure(kwargs["on_failure"])
        return kwargs


table(Defaults, {"on_failure": ENUM})


class Limits(PlanNode):
    __slots__ = ("max_steps", "max_replans", "max_concurrency", "tool_caps")
    max_steps: int | None
    max_replans: int
    max_concurrency: int | None
    tool_caps: dict[str, int]

    def __init__(
        self,
        *,
        max_steps: int | None = None,
        max_replans: int = 2,
        max_concurrency: int | None = None,
        tool_caps: dict[str, int] | None = None,
    ) -> None:
        _set(self, "max_steps", max_steps)
        _set(self, "max_replans", max_replans)
        _set(self, "max_concurrency", max_concurrency)
        _set(self, "tool_caps", {} if tool_caps is None else tool_caps)


table(Limits, {"tool_caps": COPY})


class Policy(PlanNode):
    __slots__ = ("require_approval", "deny")
    require_approval: list[str]
    deny: list[str]

    def __init__(
        self, *, require_approval: list[str] | None = None, deny: list[str] | None = None
    ) -> None:
        _set(self, "require_approval", [] if require_approval is None else require_approval)
        _set(self, "deny", [] if deny is None else deny)


table(Policy, {"require_approval": COPY, "deny": COPY})


class Replan(PlanNode):
    __slots__ = ("command", "tool", "timeout")
    command: list[str] | str | None
    tool: str | None
    timeout: float

    def __init__(
        self,
        *,
        command: list[str] | str | None = None,
        tool: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        _set(self, "command", command)
        _set(self, "tool", tool)
        _set(self, "timeout", timeout)


table(Replan, {"command": ANY})


class ExecutorConfig(PlanNode):
    __slots__ = ("type", "address")
    type: Literal["local", "dask"]
    address: str | None

    def __init__(
        self, *, type: Literal["local", "dask"] = "local", address: str | None = None
    ) -> None:
        _set(self, "type", type)
        _set(self, "address", address)


table(ExecutorConfig, {})


class Plan(PlanNode):
    """A whole plan. `name` is always set once loaded (the file stem by default)."""

    __slots__ = (
        "version",
        "name",
        "title",
        "description",
        "variables",
        "servers",
        "defaults",
        "limits",
        "policy",
        "replan",
        "secrets",
        "executor",
        "dotenv",
        "grace",
        "steps",
        "_index",
    )
    version: Literal[1] | None
    name: str | None
    title: str | None
    description: str | None
    variables: dict[str, Any]
    servers: dict[str, ServerEntry]
    defaults: Defaults
    limits: Limits
    policy: Policy
    replan: Replan | None
    secrets: list[str]
    executor: ExecutorConfig | None
    dotenv: list[str]
    grace: float | None  # seconds an interrupt waits for running commands (None: the default)
    steps: list[Step]
    # Step by id, built on first use (replace() makes a new Plan, so a new index).
    _index: dict[str, Step] | None

    def __init__(
        self,
        *,
        version: Literal[1] | None = None,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        variables: dict[str, Any] | None = None,
        servers: dict[str, ServerEntry] | None = None,
        defaults: Defaults | None = None,
        limits: Limits | None = None,
        policy: Policy | None = None,
        replan: Replan | None = None,
        secrets: list[str] | None = None,
        executor: ExecutorConfig | None = None,
        dotenv: list[str] | None = None,
        grace: float | None = None,
        steps: list[Step] | None = None,
    ) -> None:
        _set(self, "version", version)
        _set(self, "name", name)
        _set(self, "title", title)
        _set(self, "description", description)
        _set(self, "variables", {} if variables is None else variables)
        _set(self, "servers", {} if servers is None else servers)
        _set(self, "defaults", Defaults() if defaults is None else defaults)
        _set(self, "limits", Limits() if limits is None else limits)
        _set(self, "policy", Policy() if policy is None else policy)
        _set(self, "replan", replan)
        _set(self, "secrets", [] if secrets is None else secrets)
        _set(self, "executor", executor)
        _set(self, "dotenv", [] if dotenv is None else dotenv)
        _set(self, "grace", grace)
        _set(self, "steps", [] if steps is None else steps)
        _set(self, "_index", None)

    def step(self, step_id: str) -> Step:
        """The step with this id (KeyError if none)."""
        index = self._index
        if index is None:
            index = {s.id: s for s in self.steps}
            _set(self, "_index", index)
        return index[step_id]

    def needs_approval(self, step: Step) -> bool:
        """`approval: true`, or a tool matched by `policy.require_approval`."""
        if step.approval or not self.policy.require_approval:
            return step.approval
        import fnmatch

        return any(fnmatch.fnmatchcase(step.tool, p) for p in self.policy.require_approval)

    @property
    def goal(self) -> str:
        return self.description or self.title or self.name or ""

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = dict(data)
        if "servers" in kwargs:
            kwargs["servers"] = {n: ServerEntry.from_dict(e) for n, e in kwargs["servers"].items()}
        for name, node in (("defaults", Defaults), ("limits", Limits), ("policy", Policy)):
            if name in kwargs:
                kwargs[name] = node.from_dict(kwargs[name])
        for name, maybe in (("replan", Replan), ("executor", ExecutorConfig)):
            if kwargs.get(name) is not None:
                kwargs[name] = maybe.from_dict(kwargs[name])
        if "steps" in kwargs:
            kwargs["steps"] = [Step.from_dict(s) for s in kwargs["steps"]]
        return kwargs


table(
    Plan,
    {
        "variables": ANY,
        "servers": NODES,
        "defaults": NODE,
        "limits": NODE,
        "policy": NODE,
        "replan": NODE,
        "secrets": COPY,
        "executor": NODE,
        "dotenv": COPY,
        "steps": LIST_NODES,
    },
)
