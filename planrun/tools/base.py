"""The tool protocol: one async call `(args, context) -> result`, registered by name."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from planrun.errors import one_line
from planrun.records import record
from planrun.run.runtree import Notice

if TYPE_CHECKING:
    from planrun.plan.expressions import Evaluate
    from planrun.run.parent import ParentContext
    from planrun.run.procgroups import ProcessGroups


MAX_RESULT_BYTES = 64 << 20
"""The most a `read_file` file or an `http` response body may hold: the text becomes the step's
result, kept in memory and in the state file. Larger fails the step in one line."""


class ToolFailed(Exception):
    """A tool call failed in an expected way (non-zero exit, HTTP 500, bad args...).

    `message` is one clear line; `detail` is extra text shown to the user (e.g. the
    stderr tail of a failed command); `result` is the partial result, if any.
    """

    def __init__(self, message: str, *, detail: str | None = None, result: Any = None) -> None:
        # One line whatever it quotes: a value with a line feed (a file name) must not cut the
        # message where the console shows its first line (`no such file: no`).
        message = one_line(message)
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.result = result


OutputCallback = Callable[[str, str], None]
"""Called with (stream, line) for each line a tool prints, for `--stream` output."""


class ToolPool(Protocol):
    """The plan's MCP servers, as a step calls their tools (planrun.mcp.client.ServerPool)."""

    async def call(
        self, server: str, tool: str, args: dict[str, Any], *, timeout: float | None = None
    ) -> Any: ...


@record(frozen=True)
class Services:
    """What a run lends the tools of all its steps, besides each step's own context."""

    mcp: ToolPool | None = None  # the plan's MCP servers; None when it names none
    notice: Notice | None = None  # the console's notice line
    # What the run's environment adds to planrun's own (dotenv values, a sub-plan's inherited
    # ones): sent with steps run elsewhere (Dask).
    dotenv: Mapping[str, str] = field(default_factory=dict)
    groups: ProcessGroups | None = None  # the run's commands' process groups, for its interrupt


class ToolContext:
    """What a tool may know about the run it is part of."""

    __slots__ = (
        "step_id", "cwd", "env", "timeout", "on_output", "services", "resources", "output", "parent",
    )  # fmt: skip

    def __init__(
        self,
        step_id: str,
        cwd: str,
        env: dict[str, str],
        timeout: float | None = None,
        on_output: OutputCallback | None = None,
        services: Services | None = None,
        resources: dict[str, float] | None = None,
        output: str | None = None,
        parent: ParentContext | None = None,
    ) -> None:
        self.step_id = step_id
        self.cwd = cwd  # the working directory planrun was started in; relative paths resolve here
        self.env = env  # the process environment (read-only by convention)
        self.timeout = timeout  # the step timeout in seconds, for tools that enforce it remotely
        self.on_output = on_output
        self.services = Services() if services is None else services
        self.resources = resources  # the step's `resources`, for the Dask executor
        self.output = output  # what an in-process tool printed, shown as the step's output
        self.parent = parent  # the run this step is part of, for a `plan` step


ToolFn = Callable[[dict[str, Any], ToolContext], Awaitable[Any]]


class ToolCaller(Protocol):
    """Carries out one tool call: the part of an executor a sub-plan's run shares."""

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any: ...


RunPlanFn = Callable[[Any], Awaitable[Any]]
"""The one run path (planrun.run.runner.run_request: a planrun.run.context.RunContext -> a
planrun.run.request.Finished), handed to tools in their context so that this package imports
neither (planrun.run.context imports this module)."""

RenderFn = Callable[[dict[str, Any], "Evaluate"], dict[str, Any]]
"""How a tool's arguments are rendered: the arguments as written (their `${...}` strings) and
how to get each expression's value -> the arguments the tool gets. ExpressionError when they
cannot be rendered."""


class ToolSpec(NamedTuple):
    """A registered tool: its callable, a one-line description, a JSON Schema for its args,
    its own rendering of its arguments (None: plain, planrun.plan.expressions.render_args), and
    what it takes of its step (planrun.run.stepcall)."""

    name: str
    fn: ToolFn
    description: str
    input_schema: dict[str, Any]
    render: RenderFn | None = None
    step_env: bool = False  # gets the step's `env` (under its own `args.env`, which wins)
    step_cwd: bool = False  # gets the step's `cwd` (as `args.cwd`, unless it has one)
    commands: tuple[str, ...] = ()  # arguments an approval question shows as the command


class ToolRegistry:
    """Built-in tools by name."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}

    def register(self, spec: ToolSpec) -> None:
        self._tools[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [self._tools[n] for n in self.names()]


def resolve_path(path: str, ctx: ToolContext) -> str:
    """A path relative to the working directory planrun was started in.

    A NUL byte (from an interpolated value) fails the step in one line: no file name can
    hold one, and the OS call would raise a bare ValueError."""
    if "\0" in path:
        raise ToolFailed(f"path {path!r} contains a NUL byte, which no file name can hold")
    return path if os.path.isabs(path) else os.path.join(ctx.cwd, path)


def env_text(value: Any) -> str | None:
    """An `env` value as an environment holds it (shell and python steps alike): None for null
    (unset the name), true/false and numbers as YAML writes them, other values as JSON."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"  # not Python's True
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value)
