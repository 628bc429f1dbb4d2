"""The schedule stage of the run path: state, reporters, MCP servers, executor and the scheduler,
for a top-level run or a sub-plan inside its parent; it ends in a `Finished` run."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the cache, MCP, Dask, replanning and the
# scheduler's helpers only for the runs that use them.
import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from planrun.cache import step_cached
from planrun.errors import PlanInvalid, UsageError
from planrun.events import Event, EventBus
from planrun.masking import mask_keeping_names
from planrun.parent import (
    STEP_SEPARATOR,
    Budget,
    MaskChain,
    Notice,
    ParentContext,
    Slots,
    SubPlanCall,
    forward_steps,
)
from planrun.plan import Plan
from planrun.record import Record
from planrun.request import EXIT_FOR_STATUS, Finished, Prepared, RunRequest, plan_stack
from planrun.runopen import (
    OpenedState,
    attach_reporters,
    new_run_id,
    open_state,
    started_event,
)
from planrun.runstate import decide_resume
from planrun.tools.base import Services, ToolCaller, ToolFn

if TYPE_CHECKING:
    from planrun.executors.base import Executor
    from planrun.executors.local import LocalExecutor
    from planrun.mcp_client import ServerPool
    from planrun.state import StateStore


async def _check_mcp_tools(
    plan: Plan, prep: Prepared, pool: ServerPool, notice: Notice | None
) -> None:
    """Before the first step: every SERVER.TOOL exists and its literal arguments fit."""
    from planrun.checktools import check_tools

    found = await check_tools(
        plan, prep.checked.doc, pool, unreachable_is_error=False, selected=set(prep.selected)
    )
    if notice is not None:
        for d in found:
            if d.severity == "warning":
                notice(d.render(), warning=True)
    errors = [d for d in found if d.severity == "error"]
    if errors:
        raise PlanInvalid(errors)


class Attached(Record):
    """Where a run's events go and what to close after it."""

    __slots__ = ("bus", "masks", "notice", "console", "closers", "substeps")
    bus: EventBus
    masks: MaskChain  # the secrets of every run in the tree
    notice: Notice | None
    console: Any  # the ConsoleReporter of a top-level run
    closers: list[Callable[[], None]]
    substeps: Any  # planrun.substeps.SubStepRows of a top-level run

    def __init__(
        self,
        bus: EventBus,
        masks: MaskChain,
        notice: Notice | None = None,
        console: Any = None,
        closers: list[Callable[[], None]] | None = None,
        substeps: Any = None,
    ) -> None:
        self.bus = bus
        self.masks = masks
        self.notice = notice
        self.console = console
        self.closers = [] if closers is None else closers
        self.substeps = substeps


def _attach(
    req: RunRequest, prep: Prepared, store: StateStore | None, call: SubPlanCall | None
) -> Attached:
    """A top-level run: its own bus, masked by the whole tree's secrets, with the console,
    state and reports subscribed. A sub-plan: a bus whose step events go to the top run's."""
    if call is not None:
        bus = EventBus()
        bus.subscribe(forward_steps(call.parent, call.prefix))
        return Attached(bus, call.parent.masks, call.parent.notice)
    from planrun.resumehint import resume_hint
    from planrun.substeps import SubStepRows

    masks = MaskChain()
    bus = EventBus(mask=masks)
    try:
        hint = resume_hint(req, prep.targets, prep.plan.secrets)  # `resume with: ...`
        console, closers = attach_reporters(req, bus, store, prep.plan.dotenv, hint)
    except BaseException:
        if store is not None:
            store.release()
        raise
    substeps = SubStepRows()
    bus.subscribe(substeps)
    notice = console.notice if console is not None else None
    return Attached(bus, masks, notice, console, closers, substeps)


def _context(
    req: RunRequest, plan: Plan, attached: Attached, executor: ToolCaller, call: SubPlanCall | None
) -> ParentContext:
    """This run as the parent of the sub-plans its steps start (and the bounds it runs under)."""
    name = plan.name or "plan"
    if call is None:
        jobs = req.jobs or (plan.limits.max_concurrency or os.cpu_count() or 1)
        return ParentContext(
            prefix="",
            plan=name,
            plan_stack=plan_stack(req),
            cwd=req.cwd,
            yes=req.yes,
            ask=_tty_ask(attached.console) if req.interactive and not req.yes else None,
            policy=plan.policy,
            jobs=jobs,
            slots=Slots(jobs),
            budget=Budget(plan.limits, name),
            masks=attached.masks,
            emit=attached.bus.emit,
            executor=executor,
            keep_going=req.keep_going,
            stream=req.stream,
            notice=attached.notice,
            mcp_config=req.mcp_config,
            run_id=new_run_id(),
        )
    parent = call.parent
    own = plan.limits.max_concurrency
    return ParentContext(
        prefix=call.prefix,
        plan=parent.plan,
        plan_stack=call.stack,
        cwd=req.cwd,
        yes=parent.yes,
        ask=parent.ask,
        policy=plan.policy,  # merged in prepare()
        jobs=min(parent.jobs, own) if own else parent.jobs,
        slots=parent.slots,
        budget=Budget(plan.limits, name, parent.budget),
        masks=parent.masks,
        emit=parent.emit,
        executor=parent.executor,
        keep_going=parent.keep_going,
        stream=parent.stream,
        notice=parent.notice,
        mcp_config=parent.mcp_config,
        run_id=parent.run_id,
        previous=parent.previous,
    )


def _unforced(previous: dict[str, Any], force: list[str]) -> dict[str, Any]:
    """What sub-plans may keep on resume: nothing under a forced `plan` step (all of it runs)."""
    if "*" in force:
        return {}
    inside = tuple(f"{sid}{STEP_SEPARATOR}" for sid in force)
    return (
        {sid: p for sid, p in previous.items() if not sid.startswith(inside)}
        if inside
        else previous
    )


def _sub_plan_previous(call: SubPlanCall) -> dict[str, Any] | None:
    """On resume, what the previous run recorded of this sub-plan's steps, by their own ids."""
    previous = call.parent.previous
    if previous is None:
        return None
    prefix = call.prefix
    return {sid[len(prefix) :]: p for sid, p in previous.items() if sid.startswith(prefix)}


async def launch(
    req: RunRequest, prep: Prepared, call: SubPlanCall | None, plan_tool: ToolFn | None = None
) -> Finished:
    """Open state → reporters → servers and executor → schedule → the result document.

    `plan_tool` runs the `plan` steps of a top-level run (sub-plans share their parent's executor).
    """
    from planrun.executors.local import LocalExecutor

    # Sub-plans' steps are not cached; an unknown --force ID stops the run before any state.
    cache_options = None
    if call is None and (prep.forced or req.explain or any(map(step_cached, prep.plan.steps))):
        from planrun.cache.wiring import run_cache_options  # ~10 ms: only when it can matter

        cache_options = run_cache_options(req, prep)
    if call is None:
        prep, opened = open_state(req, prep)
    else:
        opened = OpenedState(None, _sub_plan_previous(call))
    plan, store = prep.plan, opened.store
    attached = _attach(req, prep, store, call)
    pool: ServerPool | None = None
    cache = None
    # A sub-plan uses its parent's executor; a top-level run starts (and closes) its own.
    own: Executor | None = None
    local: LocalExecutor | None = None
    if call is not None:
        executor: ToolCaller = call.parent.executor
    else:
        executor = local = LocalExecutor(plan_tool)
    try:
        try:
            if plan.servers:
                from planrun.checktools import make_pool

                pool = make_pool(plan, prep.variables, req.cwd)
                await _check_mcp_tools(plan, prep, pool, attached.notice)
            if local is not None:
                executor = own = _make_executor(req, plan, local)
                await own.start()
        except asyncio.CancelledError:
            if call is not None:
                raise
            from planrun.unstarted import stopped_while_starting

            return stopped_while_starting(prep, attached.bus, opened.previous is not None)
        here = _context(req, plan, attached, executor, call)
        if call is None and opened.previous is not None:
            here = here._replace(previous=_unforced(opened.previous, prep.forced))
        services = Services(mcp=pool, notice=attached.notice, dotenv=prep.dotenv)
        if cache_options is not None:
            from planrun.cache.wiring import open_run_cache

            cache = open_run_cache(req, prep, cache_options, attached.console)
        return await _schedule(req, prep, opened, attached, here, services, call, cache)
    finally:
        if cache is not None:
            await cache.aclose()
        try:
            if pool is not None:
                await pool.aclose()
            if own is not None:
                await own.aclose()
        finally:
            for close in attached.closers:
                close()
            if store is not None:
                store.close()


async def _schedule(
    req: RunRequest,
    prep: Prepared,
    opened: OpenedState,
    attached: Attached,
    here: ParentContext,
    services: Services,
    call: SubPlanCall | None,
    cache: Any = None,
) -> Finished:
    from planrun.scheduler import RunSettings, Scheduler, result_document

    plan, bus = prep.plan, attached.bus
    masker = prep.masker(prep.variables)  # made live below: result variables count once bound
    if plan.secrets:
        here.masks.add(masker)
    if cache is not None and cache.remote is not None:
        here.masks.add(cache.remote.masker())  # its token, if any, is a secret of the run
    # Fingerprints and results, as stored. The tree's chain even when empty now: a sub-plan
    # adds its secrets to it, and they are masked in this run's record of its `plan` step.
    mask = here.masks
    settings = RunSettings(
        jobs=here.jobs,
        keep_going=here.keep_going,
        yes=here.yes,
        stream=here.stream,
        cwd=req.cwd,
        env=prep.environment(),
        ask=call.ask() if call else here.ask,
        services=services,
        slots=here.slots,
        budget=here.budget,
        prefix=here.prefix,
        parent=here,
        mask=mask,
        cache=cache,
    )
    replanner = None
    if plan.replan is not None or req.planner:
        from planrun.replan import make_replanner

        replanner = make_replanner(plan, req, services, here.masks)
    forced = prep.forced if call is None else ()
    resume = decide_resume(prep, opened.previous, mask, forced, results_read=call is not None)
    sched = Scheduler(
        plan, prep.selected, prep.variables, here.executor, bus, settings, resume, replanner
    )
    masker.variables = sched.variables  # live: result variables count once bound
    if cache is not None:
        cache.secret_values = here.masks.values  # a result holding one is not stored
    sched.revisions = opened.revisions  # numbering goes on; the budget is this run's
    name = plan.name or "plan"
    run_id = here.run_id if call is None else None  # a sub-plan's own events get their own
    resumed = opened.previous is not None
    kept = list(resume.kept) if resume is not None else None
    bus.emit(started_event(prep, dict(prep.variables), resumed, here.jobs, run_id, kept))
    outcome = await sched.run()
    finished = {
        "status": outcome.status,
        "reason": outcome.reason,
        "duration_s": outcome.duration_s,
        "error": outcome.error,
    }
    bus.emit(Event("run.finished", name, None, finished))
    doc = result_document(name, sched.report_order(), sched.records, outcome, sched.variables)
    if sched.revisions:
        doc["revisions"] = sched.revisions
    if attached.substeps is not None:
        doc["steps"] = attached.substeps.merge_into(doc["steps"])
    doc = mask_keeping_names(here.masks, doc)
    return Finished(doc, EXIT_FOR_STATUS[outcome.status], sched.variables)


def _make_executor(req: RunRequest, plan: Plan, local: LocalExecutor) -> Executor:
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
