"""A run request (`planrun run`'s options, or an MCP call's arguments), a prepared plan, and a
finished run: the values that pass between the stages of the run path."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import field
from typing import Any, NamedTuple

from planrun.cache import cache_credentials
from planrun.errors import ExitCode
from planrun.masking import Masker
from planrun.plan.checked import CheckedPlan
from planrun.plan.definition import Plan
from planrun.plan.dotenv import step_environment
from planrun.plan.graph import PlanGraph
from planrun.records import record
from planrun.reporters.failures import WriteFailures
from planrun.run.events import RunEvent
from planrun.run.procgroups import ProcessGroups
from planrun.status import Status


class CacheRequest(NamedTuple):
    """What a run is told about its step cache: --force, --no-cache, --cache-dir, --explain and
    the remote cache (read by planrun.cache.wiring)."""

    force: tuple[str, ...] = ()  # step ids, or "*" for all
    no_cache: bool = False
    cache_dir: str | None = None
    explain: bool = False
    remote: str | None = None  # --remote-cache URL (else $PLANRUN_REMOTE_CACHE)
    read_only: bool = False
    timeout: str | None = None  # --remote-cache-timeout, in seconds as given


class ExecutorRequest(NamedTuple):
    """--executor and --address, as given (the plan's `executor:` fills in what is not)."""

    kind: str | None = None
    address: str | None = None


@record()
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
    report: str | None = (
        None  # --report: written by the CLI at the end; here so no file of the run is it
    )
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
    remote_cache: str | None = None  # --remote-cache URL (else $PLANRUN_REMOTE_CACHE)
    remote_cache_read_only: bool = False
    remote_cache_timeout: str | None = None  # seconds, as given
    cwd: str = field(default_factory=os.getcwd)  # the process's working directory by default
    interactive: bool = False  # a TTY to ask approval questions at
    console: bool = True  # human progress on stderr
    subscribers: list[Callable[[RunEvent], None]] = field(default_factory=list)
    start_hint: str | None = None  # how a hint says "start a run" (None: the CLI command)
    grace: float | None = None  # --grace, seconds (None: the plan's `grace`, else the default)
    groups: ProcessGroups | None = None  # the run's commands' process groups (None: the run's own)
    report_failures: WriteFailures = field(
        default_factory=WriteFailures
    )  # --events/--junit files this run could not write
    params_required: bool = True  # False for `show`: a required param may be missing there
    internal_targets: bool = False  # True for `show`: it may name an internal step (runs nothing)
    # The environment the run starts in (None: planrun's own). A sub-plan's is the environment
    # its plan step has (the parent's dotenv, process environment, plan and step `env`).
    environ: dict[str, str] | None = None
    plan_found: bool = False  # the default plan, found in a parent directory: hints do not name it
    # `planrun -C DIR ...`: the directories, as given (the resume hint repeats them)
    directories: tuple[str, ...] = ()

    @property
    def cache_request(self) -> CacheRequest:
        """The cache options, as one value for the modules that read them."""
        return CacheRequest(
            tuple(self.force),
            self.no_cache,
            self.cache_dir,
            self.explain,
            self.remote_cache,
            self.remote_cache_read_only,
            self.remote_cache_timeout,
        )

    @property
    def executor_request(self) -> ExecutorRequest:
        return ExecutorRequest(self.executor, self.address)

    def how_to_start(self) -> str:
        """How the caller starts a fresh run of this plan, as error hints name it: the CLI
        command, or what the caller set (`plan_run` for an MCP client)."""
        if self.start_hint:
            return self.start_hint
        from planrun.text import command_shown

        return command_shown("planrun", "run", self.plan)


class Prepared:
    """A plan ready to run: checked, its variables evaluated, its steps selected and ordered."""

    __slots__ = (
        "checked",
        "plan",
        "variables",
        "selected",
        "graph",
        "dotenv",
        "targets",
        "forced",
        "environ",
    )
    checked: CheckedPlan
    plan: Plan  # for a sub-plan, with the enclosing plans' policy merged into its own
    variables: dict[str, Any]
    selected: list[str]
    graph: PlanGraph
    dotenv: dict[str, str]  # from the plan's `dotenv:` files
    targets: list[str] | None  # the ids the run targets (None: none given; planrun.plan.targets)
    forced: list[str]  # the ids --force forces (a bare --force resolved to the targets)
    environ: dict[str, str] | None  # the environment the run starts in (None: planrun's own)

    def __init__(
        self,
        checked: CheckedPlan,
        plan: Plan,
        variables: dict[str, Any],
        selected: list[str],
        graph: PlanGraph,
        dotenv: dict[str, str] | None = None,
        targets: list[str] | None = None,
        forced: list[str] | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.checked = checked
        self.plan = plan
        self.variables = variables
        self.selected = selected
        self.graph = graph
        self.dotenv = {} if dotenv is None else dotenv
        self.targets = targets
        self.forced = [] if forced is None else forced
        self.environ = environ

    def environment(self) -> dict[str, str]:
        """The steps' environment: the dotenv values under the environment the run started in
        (the process environment; a sub-plan's, its plan step's)."""
        return step_environment(
            self.dotenv, dict(os.environ if self.environ is None else self.environ)
        )

    def added_environment(self) -> dict[str, str]:
        """What the steps' environment adds to or changes in planrun's own (what a step run
        elsewhere is sent): the dotenv values the process environment does not override, and
        in a sub-plan what its plan step passed down."""
        return {k: v for k, v in self.environment().items() if os.environ.get(k) != v}

    def masker(self, variables: dict[str, Any]) -> Masker:
        """Masks `secrets:`, whether variables or environment values (a dotenv secret), and the
        cache's credentials that the environment holds (planrun.cache.cache_credentials)."""
        env = self.environment() if self.plan.secrets and self.dotenv else None
        credentials = cache_credentials(None, os.environ)
        if not credentials:
            return Masker(self.plan.secrets, variables, env)
        names = [*self.plan.secrets, *(n for n in credentials if n not in self.plan.secrets)]
        return Masker(names, variables, {**credentials, **(env or {})})


class Finished:
    """A run's end: the result document (secrets masked), its exit code, and the final
    variables as the steps saw them (what a `plan` step returns to its parent)."""

    __slots__ = ("document", "code", "variables")
    document: dict[str, Any]
    code: ExitCode
    variables: dict[str, Any]

    def __init__(
        self, document: dict[str, Any], code: ExitCode, variables: dict[str, Any] | None = None
    ) -> None:
        self.document = document
        self.code = code
        self.variables = {} if variables is None else variables


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
