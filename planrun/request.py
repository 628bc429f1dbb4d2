"""A run request (`planrun run`'s options, or an MCP call's arguments), a prepared plan, and a
finished run: the values that pass between the stages of the run path."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from planrun.checked import CheckedPlan
from planrun.dotenv import step_environment
from planrun.errors import ExitCode
from planrun.events import RunEvent
from planrun.graph import PlanGraph
from planrun.masking import Masker
from planrun.plan import Plan
from planrun.procgroups import ProcessGroups
from planrun.record import FrozenRecord, Record
from planrun.reporters.failures import WriteFailures
from planrun.status import Status

_set = object.__setattr__  # a frozen record's fields are set once, in __init__


class CacheRequest(FrozenRecord):
    """What a run is told about its step cache: --force, --no-cache, --cache-dir, --explain and
    the remote cache (read by planrun.cache.wiring)."""

    __slots__ = ("force", "no_cache", "cache_dir", "explain", "remote", "read_only", "timeout")
    force: tuple[str, ...]  # step ids, or "*" for all
    no_cache: bool
    cache_dir: str | None
    explain: bool
    remote: str | None  # --remote-cache URL (else $PLANRUN_REMOTE_CACHE)
    read_only: bool
    timeout: str | None  # --remote-cache-timeout, in seconds as given

    def __init__(
        self,
        force: tuple[str, ...] = (),
        no_cache: bool = False,
        cache_dir: str | None = None,
        explain: bool = False,
        remote: str | None = None,
        read_only: bool = False,
        timeout: str | None = None,
    ) -> None:
        _set(self, "force", force)
        _set(self, "no_cache", no_cache)
        _set(self, "cache_dir", cache_dir)
        _set(self, "explain", explain)
        _set(self, "remote", remote)
        _set(self, "read_only", read_only)
        _set(self, "timeout", timeout)


class OutputRequest(FrozenRecord):
    """Where a top-level run's events go besides its state: the console, --events, --junit,
    --report (written by the CLI) and library subscribers (read by planrun.runopen)."""

    __slots__ = ("console", "quiet", "stream", "events", "junit", "report", "subscribers")
    console: bool  # human progress on stderr
    quiet: bool
    stream: bool
    events: str | None
    junit: str | None
    report: str | None
    subscribers: tuple[Callable[[RunEvent], None], ...]

    def __init__(
        self,
        console: bool = False,
        quiet: bool = False,
        stream: bool = False,
        events: str | None = None,
        junit: str | None = None,
        report: str | None = None,
        subscribers: tuple[Callable[[RunEvent], None], ...] = (),
    ) -> None:
        _set(self, "console", console)
        _set(self, "quiet", quiet)
        _set(self, "stream", stream)
        _set(self, "events", events)
        _set(self, "junit", junit)
        _set(self, "report", report)
        _set(self, "subscribers", subscribers)


class ExecutorRequest(FrozenRecord):
    """--executor and --address, as given (the plan's `executor:` fills in what is not)."""

    __slots__ = ("kind", "address")
    kind: str | None
    address: str | None

    def __init__(self, kind: str | None = None, address: str | None = None) -> None:
        _set(self, "kind", kind)
        _set(self, "address", address)


class RunRequest(Record):
    """Everything `planrun run` can be told (CLI options, MCP tool arguments)."""

    __slots__ = (
        "plan",
        "text",
        "variables",
        "vars_file",
        "jobs",
        "state",
        "no_state",
        "resume",
        "keep_going",
        "yes",
        "only",
        "dry_run",
        "output",
        "events",
        "junit",
        "report",
        "quiet",
        "stream",
        "executor",
        "address",
        "planner",
        "mcp_config",
        "force",
        "no_cache",
        "cache_dir",
        "explain",
        "remote_cache",
        "remote_cache_read_only",
        "remote_cache_timeout",
        "cwd",
        "interactive",
        "console",
        "subscribers",
        "start_hint",
        "grace",
        "groups",
        "report_failures",
    )
    plan: str  # a path, or a label for inline text
    text: str | None  # inline plan text (MCP)
    variables: dict[str, Any]  # --var
    vars_file: str | None
    jobs: int | None
    state: str | None
    no_state: bool
    resume: bool
    keep_going: bool
    yes: bool
    only: list[str]
    dry_run: bool
    output: str
    events: str | None
    junit: str | None
    report: str | None  # --report: written by the CLI at the end; here so no file of the run is it
    quiet: bool
    stream: bool
    executor: str | None
    address: str | None
    planner: str | None
    mcp_config: str | None
    force: list[str]  # step ids, or "*" for all
    no_cache: bool
    cache_dir: str | None
    explain: bool
    remote_cache: str | None  # --remote-cache URL (else $PLANRUN_REMOTE_CACHE)
    remote_cache_read_only: bool
    remote_cache_timeout: str | None  # seconds, as given
    cwd: str  # the process's working directory by default
    interactive: bool  # a TTY to ask approval questions at
    console: bool  # human progress on stderr
    subscribers: list[Callable[[RunEvent], None]]
    start_hint: str | None  # how a hint says "start a run" (None: the CLI command)
    grace: float | None  # --grace, seconds (None: the plan's `grace`, else the default)
    groups: ProcessGroups | None  # the run's commands' process groups (None: the run's own)
    report_failures: WriteFailures  # --events/--junit files this run could not write

    def __init__(
        self,
        plan: str,
        text: str | None = None,
        variables: dict[str, Any] | None = None,
        vars_file: str | None = None,
        jobs: int | None = None,
        state: str | None = None,
        no_state: bool = False,
        resume: bool = False,
        keep_going: bool = False,
        yes: bool = False,
        only: list[str] | None = None,
        dry_run: bool = False,
        output: str = "text",
        events: str | None = None,
        junit: str | None = None,
        report: str | None = None,
        quiet: bool = False,
        stream: bool = False,
        executor: str | None = None,
        address: str | None = None,
        planner: str | None = None,
        mcp_config: str | None = None,
        force: list[str] | None = None,
        no_cache: bool = False,
        cache_dir: str | None = None,
        explain: bool = False,
        remote_cache: str | None = None,
        remote_cache_read_only: bool = False,
        remote_cache_timeout: str | None = None,
        cwd: str | None = None,
        interactive: bool = False,
        console: bool = True,
        subscribers: list[Callable[[RunEvent], None]] | None = None,
        start_hint: str | None = None,
        grace: float | None = None,
        groups: ProcessGroups | None = None,
        report_failures: WriteFailures | None = None,
    ) -> None:
        self.plan = plan
        self.text = text
        self.variables = {} if variables is None else variables
        self.vars_file = vars_file
        self.jobs = jobs
        self.state = state
        self.no_state = no_state
        self.resume = resume
        self.keep_going = keep_going
        self.yes = yes
        self.only = [] if only is None else only
        self.dry_run = dry_run
        self.output = output
        self.events = events
        self.junit = junit
        self.report = report
        self.quiet = quiet
        self.stream = stream
        self.executor = executor
        self.address = address
        self.planner = planner
        self.mcp_config = mcp_config
        self.force = [] if force is None else force
        self.no_cache = no_cache
        self.cache_dir = cache_dir
        self.explain = explain
        self.remote_cache = remote_cache
        self.remote_cache_read_only = remote_cache_read_only
        self.remote_cache_timeout = remote_cache_timeout
        self.cwd = os.getcwd() if cwd is None else cwd
        self.interactive = interactive
        self.console = console
        self.subscribers = [] if subscribers is None else subscribers
        self.start_hint = start_hint
        self.grace = grace
        self.groups = groups
        self.report_failures = WriteFailures() if report_failures is None else report_failures

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
    def output_request(self) -> OutputRequest:
        """Where the run's events go, as one value for the reporters' wiring."""
        return OutputRequest(
            self.console,
            self.quiet,
            self.stream,
            self.events,
            self.junit,
            self.report,
            tuple(self.subscribers),
        )

    @property
    def executor_request(self) -> ExecutorRequest:
        return ExecutorRequest(self.executor, self.address)

    def how_to_start(self) -> str:
        """How the caller starts a fresh run of this plan, as error hints name it: the CLI
        command, or what the caller set (`plan_run` for an MCP client)."""
        return self.start_hint or f"'planrun run {self.plan}'"


class Prepared(Record):
    """A plan ready to run: checked, its variables evaluated, its steps selected and ordered."""

    __slots__ = ("checked", "plan", "variables", "selected", "graph", "dotenv", "targets", "forced")
    checked: CheckedPlan
    plan: Plan  # for a sub-plan, with the enclosing plans' policy merged into its own
    variables: dict[str, Any]
    selected: list[str]
    graph: PlanGraph
    dotenv: dict[str, str]  # from the plan's `dotenv:` files
    targets: list[str] | None  # the ids the run targets (None: none given; planrun.targets)
    forced: list[str]  # the ids --force forces (a bare --force resolved to the targets)

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
    ) -> None:
        self.checked = checked
        self.plan = plan
        self.variables = variables
        self.selected = selected
        self.graph = graph
        self.dotenv = {} if dotenv is None else dotenv
        self.targets = targets
        self.forced = [] if forced is None else forced

    def environment(self) -> dict[str, str]:
        """The steps' environment: the dotenv values under the process environment."""
        return step_environment(self.dotenv, dict(os.environ))

    def masker(self, variables: dict[str, Any]) -> Masker:
        """Masks `secrets:`, whether variables or environment values (a dotenv secret)."""
        env = self.environment() if self.plan.secrets and self.dotenv else None
        return Masker(self.plan.secrets, variables, env)


class Finished(Record):
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
