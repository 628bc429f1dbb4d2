"""The plan as it runs: frozen dataclasses, built from data planrun.model has already validated.

planrun.model (pydantic) is the validator and the JSON Schema; this module is what the
scheduler, the tools and the state read. It imports nothing heavy, so a run that does not
validate (a plan cache hit) never loads pydantic. The classes mirror the pydantic models:
same names, same fields, same defaults. `from_dict` trusts its input (it validates nothing);
`to_dict` gives what pydantic's `model_dump(mode="json")` gives for the same plan, so the
state's plan digest and a planner's context do not depend on which of the two dumped it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self, TypeVar

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


def _json_value(value: Any) -> Any:
    """A free-form value (args, variables, foreach) as pydantic's JSON mode dumps it: a copy,
    with infinity and NaN (YAML's `.inf`, `.nan`) as null and every key a string."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _json_key(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_key(key: Any) -> str:
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    return str(key)


# How to_dict writes a field: as it is (a scalar), copied (a list or dict of strings), as a
# free-form value, as a nested runtime object, or as a mapping of those.
_PLAIN, _COPY, _ANY, _NODE, _NODES, _LIST_NODES, _ENUM = range(7)


class PlanNode:
    """Any part of a plan: to_dict / from_dict, driven by a per-class field table."""

    __slots__ = ()
    # (attribute, key in the dumped data, how to dump it); filled in by _table below.
    _TABLE: ClassVar[tuple[tuple[str, str, int], ...]] = ()
    _DEFAULTS: ClassVar[dict[str, Any]] = {}
    _NAMES: ClassVar[tuple[str, ...]] = ()

    def to_dict(self, exclude_defaults: bool = False) -> dict[str, Any]:
        """JSON-compatible data, equal to pydantic's `model_dump(mode="json", exclude_defaults=...)`
        of the equivalent planrun.model object (fields in the same order, `as` for `as_`)."""
        out: dict[str, Any] = {}
        defaults = self._DEFAULTS
        for name, key, kind in self._TABLE:
            value = getattr(self, name)
            if exclude_defaults and name in defaults and value == defaults[name]:
                continue
            if value is None or kind == _PLAIN:
                out[key] = value
            elif kind == _COPY:
                out[key] = value.copy()
            elif kind == _ANY:
                out[key] = _json_value(value)
            elif kind == _ENUM:
                out[key] = value.value if isinstance(value, OnFailure) else value
            elif kind == _NODE:
                out[key] = value.to_dict(exclude_defaults)
            elif kind == _NODES:
                out[key] = {k: v.to_dict(exclude_defaults) for k, v in value.items()}
            else:
                out[key] = [v.to_dict(exclude_defaults) for v in value]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The object for validated data (to_dict's output, or model_dump's); missing keys take
        their defaults. Nothing is checked: the data must have passed planrun.model."""
        return cls(**cls._kwargs(data))

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        return dict(data)


def _table(
    cls: type[PlanNode], kinds: Mapping[str, int], keys: Mapping[str, str] | None = None
) -> None:
    """Record each field's key and dump kind, and the defaults exclude_defaults compares with."""
    table = []
    defaults: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if not f.init:
            continue
        table.append((f.name, (keys or {}).get(f.name, f.name), kinds.get(f.name, _PLAIN)))
        if f.default_factory is not MISSING:
            defaults[f.name] = f.default_factory()
        elif f.default is not MISSING:
            defaults[f.name] = f.default
    cls._TABLE = tuple(table)
    cls._DEFAULTS = defaults
    cls._NAMES = tuple(name for name, _, _ in table)


N = TypeVar("N", bound=PlanNode)


def replace(obj: N, /, **changes: Any) -> N:
    """A copy of `obj` with `changes` (what dataclasses.replace does, at a third of its cost:
    a foreach makes one per instance). A Plan's step index starts afresh."""
    values = {name: getattr(obj, name) for name in obj._NAMES}
    values.update(changes)
    return type(obj)(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step(PlanNode):
    """One tool call in the plan (or, with `foreach`, one per element of a list)."""

    id: str
    title: str | None = None
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    depends_on: list[str] = field(default_factory=list)
    result_variable: str | None = None
    when: str | bool | None = None
    timeout: float | None = None
    retries: int | None = None
    retry_delay: float | None = None
    on_failure: OnFailure | None = None
    expected_outcome: str | None = None
    approval: bool = False
    description: str | None = None
    resources: dict[str, float] | None = None
    sources: list[str] | None = None
    outputs: list[str] | None = None
    cache: bool | None = None
    foreach: list[Any] | dict[str, Any] | str | None = None
    # `as` is a Python keyword: the field is `as_`, written and dumped as `as`.
    as_: str | None = None

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = dict(data)
        if "as" in kwargs:
            kwargs["as_"] = kwargs.pop("as")
        if kwargs.get("on_failure") is not None:
            kwargs["on_failure"] = OnFailure(kwargs["on_failure"])
        return kwargs


_table(
    Step,
    {
        "args": _ANY,
        "depends_on": _COPY,
        "on_failure": _ENUM,
        "resources": _ANY,
        "sources": _COPY,
        "outputs": _COPY,
        "foreach": _ANY,
    },
    {"as_": "as"},
)


@dataclass(frozen=True, slots=True, kw_only=True)
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
    connect_timeout: float | None = None

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


_table(ServerEntry, {"args": _COPY, "env": _COPY, "headers": _COPY})


@dataclass(frozen=True, slots=True, kw_only=True)
class Defaults(PlanNode):
    timeout: float | None = None
    retries: int = 0
    retry_delay: float = 1.0
    on_failure: OnFailure = OnFailure.abort

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = dict(data)
        if "on_failure" in kwargs:
            kwargs["on_failure"] = OnFailure(kwargs["on_failure"])
        return kwargs


_table(Defaults, {"on_failure": _ENUM})


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits(PlanNode):
    max_steps: int | None = None
    max_replans: int = 2
    max_concurrency: int | None = None
    tool_caps: dict[str, int] = field(default_factory=dict)


_table(Limits, {"tool_caps": _COPY})


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy(PlanNode):
    require_approval: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


_table(Policy, {"require_approval": _COPY, "deny": _COPY})


@dataclass(frozen=True, slots=True, kw_only=True)
class Replan(PlanNode):
    command: list[str] | str | None = None
    tool: str | None = None
    timeout: float = 60.0


_table(Replan, {"command": _ANY})


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutorConfig(PlanNode):
    type: Literal["local", "dask"] = "local"
    address: str | None = None


_table(ExecutorConfig, {})


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(PlanNode):
    """A whole plan. `name` is always set once loaded (the file stem by default)."""

    version: Literal[1] | None = None
    name: str | None = None
    title: str | None = None
    description: str | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    servers: dict[str, ServerEntry] = field(default_factory=dict)
    defaults: Defaults = field(default_factory=Defaults)
    limits: Limits = field(default_factory=Limits)
    policy: Policy = field(default_factory=Policy)
    replan: Replan | None = None
    secrets: list[str] = field(default_factory=list)
    executor: ExecutorConfig | None = None
    dotenv: list[str] = field(default_factory=list)
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
        """`approval: true`, or a tool matched by `policy.require_approval`."""
        import fnmatch

        return step.approval or any(
            fnmatch.fnmatchcase(step.tool, p) for p in self.policy.require_approval
        )

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


_table(
    Plan,
    {
        "variables": _ANY,
        "servers": _NODES,
        "defaults": _NODE,
        "limits": _NODE,
        "policy": _NODE,
        "replan": _NODE,
        "secrets": _COPY,
        "executor": _NODE,
        "dotenv": _COPY,
        "steps": _LIST_NODES,
    },
)
