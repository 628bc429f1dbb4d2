"""A run request (`planrun run`'s options, or an MCP call's arguments), a prepared plan, and a
finished run: the values that pass between the stages of the run path."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planrun.checked import CheckedPlan
from planrun.dotenv import step_environment
from planrun.errors import ExitCode
from planrun.events import Event
from planrun.graph import PlanGraph
from planrun.masking import Masker
from planrun.plan import Plan
from planrun.status import Status


@dataclass
class RunRequest:
    """Everything `planrun run` can be told (CLI options, MCP tool arguments)."""

    plan: str  # a path, or a label for inline text
    text: str | None = None  # inline plan text (MCP)
    variables: dict[str, Any] = field(default_factory=dict)  # --var
    vars_file: str | None = None
    jobs: int | None = None
    state: str | None = None
    no_state: bool = False
    resume: bool = False
    keep_going: bool = False
    yes: bool = False
    only: list[str] = field(default_factory=list)
    dry_run: bool = False
    output: str = "text"
    events: str | None = None
    junit: str | None = None
    quiet: bool = False
    stream: bool = False
    executor: str | None = None
    address: str | None = None
    planner: str | None = None
    mcp_config: str | None = None
    force: list[str] = field(default_factory=list)  # step ids, or "*" for all
    no_cache: bool = False
    cache_dir: str | None = None
    explain: bool = False
    cwd: str = field(default_factory=os.getcwd)
    interactive: bool = False  # a TTY to ask approval questions at
    console: bool = True  # human progress on stderr
    subscribers: list[Callable[[Event], None]] = field(default_factory=list)
    start_hint: str | None = None  # how a hint says "start a run" (None: the CLI command)

    def how_to_start(self) -> str:
        """How the caller starts a fresh run of this plan, as error hints name it: the CLI
        command, or what the caller set (`plan_run` for an MCP client)."""
        return self.start_hint or f"'planrun run {self.plan}'"


@dataclass
class Prepared:
    checked: CheckedPlan
    plan: Plan  # for a sub-plan, with the enclosing plans' policy merged into its own
    variables: dict[str, Any]
    selected: list[str]
    graph: PlanGraph
    dotenv: dict[str, str] = field(default_factory=dict)  # from the plan's `dotenv:` files

    def environment(self) -> dict[str, str]:
        """The steps' environment: the dotenv values under the process environment."""
        return step_environment(self.dotenv, dict(os.environ))

    def masker(self, variables: dict[str, Any]) -> Masker:
        """Masks `secrets:`, whether variables or environment values (a dotenv secret)."""
        env = self.environment() if self.plan.secrets and self.dotenv else None
        return Masker(self.plan.secrets, variables, env)


@dataclass
class Finished:
    """A run's end: the result document (secrets masked), its exit code, and the final
    variables as the steps saw them (what a `plan` step returns to its parent)."""

    document: dict[str, Any]
    code: ExitCode
    variables: dict[str, Any] = field(default_factory=dict)


EXIT_FOR_STATUS = {
    Status.SUCCEEDED: ExitCode.OK,
    Status.FAILED: ExitCode.RUN_FAILED,
    Status.INTERRUPTED: ExitCode.INTERRUPTED,
    Status.BLOCKED: ExitCode.BLOCKED,
}


def abs_path(path: str, cwd: str) -> str:
    """A path relative to the working directory planrun was started in."""
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def plan_stack(req: RunRequest) -> tuple[str, ...]:
    """The real path of a top-level plan file (to find a sub-plan that includes it)."""
    return () if req.text is not None else (os.path.realpath(abs_path(req.plan, req.cwd)),)
