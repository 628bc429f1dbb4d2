"""`planrun run` as a pipeline: load → validate → select → (dry-run) → approve → state → schedule → report.

Each stage is a small function; `execute` strings them together and returns the result document
and the exit code. Nothing here imports click: the CLI and the MCP server both call it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planrun.errors import ExitCode, PlanInvalid, PlanrunError, StateError, UsageError
from planrun.events import Event, EventBus
from planrun.graph import PlanGraph
from planrun.model import Plan
from planrun.secrets import Masker
from planrun.validate import CheckedPlan, check_document


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


@dataclass
class Prepared:
    checked: CheckedPlan
    plan: Plan
    variables: dict[str, Any]
    selected: list[str]
    graph: PlanGraph
    dotenv: dict[str, str] = field(default_factory=dict)  # from the plan's `dotenv:` files

    def environment(self) -> dict[str, str]:
        """The steps' environment: the dotenv values under the process environment."""
        from planrun.dotenv import step_environment

        return step_environment(self.dotenv, dict(os.environ))

    def masker(self, variables: dict[str, Any]) -> Masker:
        """Masks `secrets:`, whether variables or environment values (a dotenv secret)."""
        env = self.environment() if self.plan.secrets and self.dotenv else None
        return Masker(self.plan.secrets, variables, env)


EXIT_FOR_STATUS = {
    "succeeded": ExitCode.OK,
    "failed": ExitCode.RUN_FAILED,
    "interrupted": ExitCode.INTERRUPTED,
    "blocked": ExitCode.BLOCKED,
}


def _abs(path: str, cwd: str) -> str:
    return path if os.path.isabs(path) else os.path.join(cwd, path)


def load_vars_file(path: str, cwd: str) -> dict[str, Any]:
    """`--vars-file`: a YAML or JSON mapping (read by the plan loader: JSON types only)."""
    from planrun.inputfiles import NotARegularFile, read_regular_file
    from planrun.loader import load_text

    try:
        raw = read_regular_file(_abs(path, cwd))  # a FIFO is refused, never read
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"vars file not found: {path}") from None
    except NotARegularFile as exc:
        raise UsageError(f"vars file {path} is {exc.kind}, not a regular file") from None
    except OSError as exc:
        raise UsageError(f"cannot read vars file {path}: {exc.strerror or exc}") from None
    if not raw.strip():
        return {}  # an empty vars file sets nothing
    suffix = os.path.splitext(path)[1].lower()
    fmt = "json" if suffix == ".json" else "yaml" if suffix in (".yaml", ".yml") else None
    try:
        doc = load_text(raw, path, fmt)
    except PlanInvalid as exc:
        first = exc.diagnostics[0]
        raise UsageError(f"vars file {path}:{first.line}:{first.col}: {first.message}") from None
    if not isinstance(doc.data, dict):
        raise UsageError(f"vars file {path} must hold a mapping of names to values")
    return doc.data


def load_checked(req: RunRequest, extra_vars: dict[str, Any]) -> CheckedPlan:
    """Load and check the plan; PlanInvalid on any error."""
    from planrun.loader import load_document, load_text

    if req.text is not None:
        doc = load_text(req.text, req.plan)
    else:
        doc = load_document(_abs(req.plan, req.cwd))
        doc.file = req.plan
    servers = None
    if req.mcp_config:
        from planrun.mcp_client import parse_mcp_config

        servers = parse_mcp_config(_abs(req.mcp_config, req.cwd))
    checked = check_document(doc, extra_vars, servers)
    errors = [d for d in checked.diagnostics if d.severity == "error"]
    if errors or checked.plan is None:
        raise PlanInvalid(errors)
    return checked


def prepare(req: RunRequest) -> Prepared:
    """Load, validate, merge variables and select the steps to run."""
    extra = {**(load_vars_file(req.vars_file, req.cwd) if req.vars_file else {}), **req.variables}
    checked = load_checked(req, extra)
    plan = checked.plan
    assert plan is not None
    variables = {**plan.variables, **extra}
    dotenv: dict[str, str] = {}
    if plan.dotenv:
        from planrun.dotenv import load_dotenv

        dotenv = load_dotenv(checked.doc, plan.dotenv, req.cwd)
    graph = PlanGraph.build(plan.steps)
    selected = list(graph.order)
    if req.only:
        unknown = [o for o in req.only if o not in graph.deps]
        if unknown:
            from planrun.validate import did_you_mean

            hint = did_you_mean(unknown[0], set(graph.order))
            raise UsageError(
                f"no step '{unknown[0]}' in {req.plan}" + (f" ({hint})" if hint else "")
            )
        keep = graph.upstream(req.only)
        selected = [sid for sid in graph.order if sid in keep]
    return Prepared(checked, plan, variables, selected, graph, dotenv)


# ---- the run -----------------------------------------------------------------------------


def blocked_document(plan: Plan, selected: list[str], steps: list[str]) -> dict[str, Any]:
    return {
        "plan": plan.name,
        "status": "blocked",
        "reason": "approval_required",
        "duration_s": 0.0,
        "error": f"approval required for: {', '.join(steps)}",
        "steps": [
            {
                "id": s,
                "status": "pending",
                "attempts": 0,
                "duration_s": None,
                "result": None,
                "error": None,
            }
            for s in selected
        ],
        "variables": {},
    }


async def execute(req: RunRequest) -> tuple[dict[str, Any], ExitCode]:
    """Run (or dry-run) a plan; returns the result document and the exit code.

    Raises PlanrunError (PlanInvalid, UsageError, StateError) for problems found before any step.
    """
    prep = prepare(req)
    plan = prep.plan
    if req.dry_run:
        from planrun.dryrun import dry_run_document

        doc = dry_run_document(plan, prep.graph, prep.selected, prep.variables, prep.environment())
        return prep.masker(prep.variables)(doc), ExitCode.OK
    from planrun.conditions import steps_needing_approval

    gated = steps_needing_approval(plan, prep.selected, prep.variables, prep.environment())
    if gated and not req.yes and not req.interactive:
        doc = blocked_document(plan, prep.selected, gated)
        return prep.masker(prep.variables)(doc), ExitCode.BLOCKED
    return await _run(req, prep)


@dataclass
class OpenedState:
    """The locked state store of a run (None with --no-state) and what resume needs from it."""

    store: Any
    previous: dict[str, Any] | None = None  # step id -> scheduler.PreviousStep
    revisions: list[dict[str, Any]] = field(default_factory=list)


def open_state(req: RunRequest, prep: Prepared) -> tuple[Prepared, OpenedState]:
    """Lock the state file; on resume, load it: the previous steps, results and revisions."""
    if req.no_state:
        if req.resume:
            raise UsageError("--resume needs state: drop --no-state")
        return prep, OpenedState(None)
    from planrun.scheduler import PreviousStep
    from planrun.state import StateStore, default_state_path

    name = prep.plan.name or "plan"
    path = _abs(req.state, req.cwd) if req.state else str(default_state_path(req.cwd, name))
    store = StateStore(Path(path), name)
    store.acquire()
    opened = OpenedState(store)
    if not req.resume:
        return prep, opened
    try:
        old = store.load()
        if old is None:
            raise StateError(
                f"no saved state for plan '{name}' at {path}: start it with 'planrun run {req.plan}'"
            )
        opened.previous = {
            sid: PreviousStep(
                st.status, st.fingerprint, st.result, st.result_variable, st.attempts, st.duration_s
            )
            for sid, st in old.steps.items()
        }
        if old.revisions:
            prep = _revised(prep, old.revisions, req, path)
            opened.revisions = list(old.revisions)
        for st in old.steps.values():
            if st.status in ("succeeded", "ignored") and st.result_variable:
                prep.variables[st.result_variable] = st.result
    except BaseException:
        store.release()
        raise
    return prep, opened


def attach_reporters(
    req: RunRequest, bus: EventBus, store: Any
) -> tuple[Any, list[Callable[[], None]], list[Callable[[Event], None]]]:
    """Subscribe the console, the state store, --events and --junit.

    Returns (console, closers, reporters): the reporters also see sub-plans' events (the
    state store and library subscribers do not: they follow this plan only).
    """
    closers: list[Callable[[], None]] = []
    reporters: list[Callable[[Event], None]] = []
    console = None
    if req.console:
        from planrun.reporters.console import ConsoleReporter

        console = ConsoleReporter(
            sys.stderr,
            quiet=req.quiet,
            stream_output=req.stream,
            resume_hint=req.plan if store is not None else None,
        )
        if req.resume:
            bus.subscribe(_why_notices(console))
        bus.subscribe(console.handle)
        reporters.append(console.handle)
        closers.append(console.close)
    if store is not None:
        bus.subscribe(store.handle)
    try:
        if req.events:
            from planrun.reporters.jsonl import JsonLinesReporter

            jl = JsonLinesReporter(_abs(req.events, req.cwd))
            bus.subscribe(jl.handle)
            reporters.append(jl.handle)
            closers.append(jl.close)
        if req.junit:
            from planrun.reporters.junit import JUnitReporter

            ju = JUnitReporter(_abs(req.junit, req.cwd))
            bus.subscribe(ju.handle)
            reporters.append(ju.handle)
            closers.append(ju.close)
    except OSError as exc:
        for close in closers:
            close()
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None
    for fn in req.subscribers:
        bus.subscribe(fn)
    return console, closers, reporters


async def _check_mcp_tools(plan: Plan, prep: Prepared, pool: Any, console: Any) -> None:
    """Before the first step: every SERVER.TOOL exists and its literal arguments fit."""
    from planrun.checktools import check_tools

    found = await check_tools(
        plan, prep.checked.doc, pool, unreachable_is_error=False, selected=set(prep.selected)
    )
    if console is not None:
        for d in found:
            if d.severity == "warning":
                console.notice(d.render(), warning=True)
    errors = [d for d in found if d.severity == "error"]
    if errors:
        raise PlanInvalid(errors)


def _started_event(
    prep: Prepared, variables: dict[str, Any], resumed: bool, jobs: int | None = None
) -> Event:
    plan = prep.plan
    selected = set(prep.selected)
    steps = [
        {"id": s.id, "title": s.title or s.id, "tool": s.tool, "depends_on": prep.graph.deps[s.id]}
        for s in plan.steps
        if s.id in selected
    ]
    data = {
        "run_id": uuid.uuid4().hex[:12],
        "digest": plan_digest(plan),
        "resumed": resumed,
        "title": plan.title,
        "jobs": jobs,
        "variables": variables,
        "steps": steps,
    }
    return Event("run.started", plan.name or "plan", None, data)


async def _run(req: RunRequest, prep: Prepared) -> tuple[dict[str, Any], ExitCode]:
    """Open state → reporters → servers and executor → schedule → the result document."""
    from planrun.executors.local import LocalExecutor
    from planrun.scheduler import RunSettings, Scheduler, result_document

    prep, opened = open_state(req, prep)
    plan, store = prep.plan, opened.store
    name = plan.name or "plan"
    variables = dict(prep.variables)
    masker = prep.masker(variables)
    bus = EventBus(mask=masker if plan.secrets else None)
    try:
        console, closers, reporters = attach_reporters(req, bus, store)
    except BaseException:
        if store is not None:
            store.release()
        raise

    services: dict[str, Any] = {
        "notice": console.notice if console is not None else None,
        "plan_stack": (os.path.realpath(_abs(req.plan, req.cwd)),),
        "reporters": reporters,  # sub-plans report their steps to these too
    }
    pool = None
    executor: Any = LocalExecutor()
    try:
        if plan.servers:
            from planrun.checktools import make_pool

            pool = services["mcp"] = make_pool(plan, variables, req.cwd)
            await _check_mcp_tools(plan, prep, pool, console)
        executor = _make_executor(req, plan, executor)
        await executor.start()
        settings = RunSettings(
            jobs=req.jobs or (plan.limits.max_concurrency or os.cpu_count() or 1),
            keep_going=req.keep_going,
            yes=req.yes,
            stream=req.stream,
            cwd=req.cwd,
            env=prep.environment(),
            ask=_tty_ask(console) if req.interactive and not req.yes else None,
            services=services,
        )
        replanner = None
        if plan.replan is not None or req.planner:
            from planrun.replan import make_replanner

            replanner = make_replanner(plan, req, services)
        sched = Scheduler(
            plan, prep.selected, variables, executor, bus, settings, opened.previous, replanner
        )
        masker.variables = sched.variables
        sched.revisions = opened.revisions
        sched.replans = len(opened.revisions)
        bus.emit(_started_event(prep, variables, opened.previous is not None, settings.jobs))
        outcome = await sched.run()
        finished = {
            "status": outcome.status,
            "reason": outcome.reason,
            "duration_s": outcome.duration_s,
            "error": outcome.error,
        }
        bus.emit(Event("run.finished", name, None, finished))
        doc = result_document(name, sched.order, sched.records, outcome, sched.variables)
        if sched.revisions:
            doc["revisions"] = sched.revisions
        return masker(doc), EXIT_FOR_STATUS[outcome.status]
    finally:
        try:
            if pool is not None:
                await pool.aclose()
            await executor.aclose()
        finally:
            for close in closers:
                close()
            if store is not None:
                store.close()


def _revised(
    prep: Prepared, revisions: list[dict[str, Any]], req: RunRequest, state_path: str
) -> Prepared:
    """On resume, continue the plan as the planner last revised it (once it passes the checks)."""
    from planrun.revision_check import checked_revision

    plan = checked_revision(
        prep.plan,
        revisions,
        state_path=state_path,
        planner=bool(req.planner),
        variables=prep.variables,
    )
    only = req.only
    graph = PlanGraph.build(plan.steps)
    keep = graph.upstream([o for o in only if o in graph.deps]) if only else set(graph.order)
    selected = [sid for sid in graph.order if sid in keep]
    return Prepared(prep.checked, plan, prep.variables, selected, graph, prep.dotenv)


def _why_notices(console: Any) -> Callable[[Event], None]:
    """On resume, say why each step that runs again does."""

    def on_event(event: Event) -> None:
        if event.event == "step.started" and event.data.get("why"):
            console.notice(f"running '{event.step}' again: {event.data['why']}")

    return on_event


def _make_executor(req: RunRequest, plan: Plan, local: Any) -> Any:
    kind = req.executor or (plan.executor.type if plan.executor else None)
    address = (
        req.address
        or (plan.executor.address if plan.executor else None)
        or os.environ.get("PLANRUN_DASK_ADDRESS")
    )
    if kind is None and req.address:
        kind = "dask"
    if kind in (None, "local"):
        return local
    if kind == "dask":
        from planrun.executors.dask import DaskExecutor

        return DaskExecutor(address, local=local, cwd=req.cwd)
    raise UsageError(f"unknown executor '{kind}': use 'local' or 'dask'")


def _tty_ask(console: Any) -> Callable[[str], Any]:
    lock = asyncio.Lock()

    async def ask(step_id: str) -> bool:
        async with lock:

            def prompt() -> bool:
                sys.stderr.write(f"step '{step_id}' needs approval. Run it? [y/N] ")
                sys.stderr.flush()
                answer = sys.stdin.readline().strip().lower()
                return answer in ("y", "yes")

            if console is None:
                return await asyncio.to_thread(prompt)
            with console.suspend():  # the live view must not hide the question
                return await asyncio.to_thread(prompt)

    return ask


def plan_digest(plan: Plan) -> str:
    import hashlib
    import json

    blob = json.dumps(plan.model_dump(mode="json"), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_sync(req: RunRequest) -> tuple[dict[str, Any], ExitCode]:
    """`execute` in a fresh event loop, with SIGINT/SIGTERM turned into a clean interruption."""
    import signal

    async def main() -> tuple[dict[str, Any], ExitCode]:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        hits = 0

        def on_signal() -> None:
            nonlocal hits
            hits += 1
            if hits > 1:  # second Ctrl-C: exit at once (the journal is valid), leave no process
                shell = sys.modules.get("planrun.tools.shell")
                if shell is not None:
                    shell.kill_live_groups()
                os._exit(int(ExitCode.INTERRUPTED))
            if task is not None:
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            return await _interruptible(execute(req))
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    return asyncio.run(main())


async def _interruptible(coro: Any) -> tuple[dict[str, Any], ExitCode]:
    """Cancellation before the scheduler runs (loading, starting servers) is an interruption too."""
    try:
        result: tuple[dict[str, Any], ExitCode] = await coro
        return result
    except asyncio.CancelledError:
        raise PlanrunError("interrupted before any step ran", ExitCode.INTERRUPTED) from None
