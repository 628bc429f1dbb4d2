"""The schedule stage of the run path: state, reporters, MCP servers, executor and the scheduler,
for a top-level run or a sub-plan inside its parent; it ends in a `Finished` run."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the cache, MCP, Dask, replanning and the
# scheduler's helpers only for the runs that use them.
import asyncio
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from planrun.errors import PlanInvalid, UsageError
from planrun.masking import mask_keeping_names
from planrun.plan.definition import Plan
from planrun.run.context import Attached, RunContext
from planrun.run.events import RunFinished
from planrun.run.parent import Notice, ParentContext
from planrun.run.procgroups import ProcessGroups
from planrun.run.request import EXIT_FOR_STATUS, ExecutorRequest, Finished, Prepared
from planrun.run.runopen import OpenedState, started_event
from planrun.run.runstate import decide_resume
from planrun.tools.base import RunPlanFn, Services, ToolCaller

if TYPE_CHECKING:
    from planrun.cache.session import CacheSession
    from planrun.executors.base import Executor
    from planrun.executors.local import LocalExecutor
    from planrun.mcp.client import ServerPool
    from planrun.state import StateStore


async def _check_mcp_tools(
    plan: Plan, prep: Prepared, pool: ServerPool, notice: Notice | None
) -> None:
    """Before the first step: every SERVER.TOOL exists and its literal arguments fit."""
    from planrun.run.checktools import check_tools

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


async def launch(ctx: RunContext, prep: Prepared, run_plan: RunPlanFn) -> Finished:
    """Open state → reporters → servers and executor → schedule → the result document.

    `run_plan` is the one run path: the `plan` tool finds it in its context (ParentContext)
    to run a sub-plan."""
    from planrun.executors.local import LocalExecutor

    # The run starts here: its duration covers starting its MCP servers (their tools listed
    # and checked) and its executor, which it waits for as it waits for its steps.
    began = (time.time(), time.monotonic())
    req = ctx.request
    if tuple(prep.forced) != ctx.forced:  # a top-level --force, as selected (planrun.plan.targets)
        ctx = replace(ctx, forced=tuple(prep.forced))
    cache_options = ctx.cache_options(prep)  # an unknown --force ID stops the run here
    prep, opened = ctx.open_state(prep)
    plan, store = prep.plan, opened.store
    attached = ctx.attach(prep, store, cache_options is not None)
    pool: ServerPool | None = None
    cache = None
    own: Executor | None = None  # started (and closed) by this run
    finished: Finished | None = None  # the run's result, once its scheduler has returned
    shared = ctx.inherited_executor()
    executor: ToolCaller = shared if shared is not None else LocalExecutor()
    try:
        try:
            if plan.servers:
                from planrun.run.checktools import make_pool

                pool = make_pool(plan, prep.variables, req.cwd)
                await _check_mcp_tools(plan, prep, pool, attached.notice)
            if shared is None:
                assert isinstance(executor, LocalExecutor)
                executor = own = _make_executor(req.executor_request, req.cwd, plan, executor)
                await own.start()
        except asyncio.CancelledError:
            if plan.secrets:  # masked from the first event, as once the steps are scheduled
                attached.masks.add(prep.masker(prep.variables))
            stopped = ctx.stopped_while_starting(prep, attached.bus, opened.previous is not None)
            stopped.document = mask_keeping_names(attached.masks, stopped.document)
            return stopped
        groups = _process_groups(ctx, plan)
        here = ctx.tree(plan, attached, executor, opened)._replace(groups=groups, run_plan=run_plan)
        added = prep.added_environment()
        services = Services(mcp=pool, notice=attached.notice, dotenv=added, groups=groups)
        if cache_options is not None:
            from planrun.cache.wiring import open_run_cache

            # A result holding a secret of the tree (the remote's token too) is not stored.
            cache = open_run_cache(req.cwd, prep, cache_options, attached.notice, here.masks.values)
        finished = await _schedule(ctx, prep, opened, attached, here, services, began, cache)
        return finished
    finally:
        try:
            await _close_run(cache, pool, own, attached, store)
        except asyncio.CancelledError:
            if finished is None:
                raise
            # The run has ended and is recorded: an interrupt while its servers and executor
            # shut down (each within its bound) does not undo its result.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()


async def _close_run(
    cache: CacheSession | None,
    pool: ServerPool | None,
    own: Executor | None,
    attached: Attached,
    store: StateStore | None,
) -> None:
    """Close what the run opened, each part even when closing one before it was cancelled or
    failed (that is passed on at the end)."""
    try:
        if cache is not None:
            await cache.aclose()
    finally:
        try:
            if pool is not None:
                await pool.aclose()
        finally:
            try:
                if own is not None:
                    await own.aclose()
            finally:
                for close in attached.closers:
                    close()
                if store is not None:
                    store.close()


async def _schedule(
    ctx: RunContext,
    prep: Prepared,
    opened: OpenedState,
    attached: Attached,
    here: ParentContext,
    services: Services,
    began: tuple[float, float],
    cache: CacheSession | None = None,
) -> Finished:
    """Schedule the run's steps; `began`: when the run started (time.time(), time.monotonic()),
    the time of its run.started event and the start of its duration."""
    from planrun.run.scheduler import RunSettings, Scheduler, result_document

    plan, bus = prep.plan, attached.bus
    variables = dict(prep.variables)  # the scheduler binds result variables into it
    masker = prep.masker(variables)  # live: result variables count once bound
    if plan.secrets:
        here.masks.add(masker)
    # Fingerprints and results, as stored. The tree's chain even when empty now: a sub-plan
    # adds its secrets to it, and they are masked in this run's record of its `plan` step.
    mask = here.masks
    settings = RunSettings(
        here, env=prep.environment(), ask=ctx.step_ask(here), services=services, cache=cache
    )
    replanner = None
    if plan.replan is not None or ctx.request.planner:
        from planrun.run.replan import make_replanner

        replanner = make_replanner(plan, ctx.request, services, here.masks)
    resume = decide_resume(prep, opened.previous, mask, ctx.forced, results_read=ctx.results_read)
    sched = Scheduler(
        plan,
        prep.selected,
        variables,
        here.executor,
        bus,
        settings,
        resume,
        replanner,
        graph=prep.graph,
        revisions=opened.revisions,  # numbering goes on; the budget is this run's
    )
    name = plan.name or "plan"
    run_id = ctx.run_id(here)
    resumed = opened.previous is not None
    kept = resume.kept if resume is not None else None
    started = started_event(prep, dict(prep.variables), resumed, here.jobs, run_id, kept)
    bus.emit(started._replace(ts=began[0]))
    outcome = await sched.run()
    outcome.duration_s = round(time.monotonic() - began[1], 3)  # the run's, not only its steps'
    bus.emit(RunFinished(name, outcome.status, outcome.reason, outcome.duration_s, outcome.error))
    doc = result_document(name, sched.report_order(), sched.records, outcome, sched.variables)
    if sched.revisions:
        doc["revisions"] = sched.revisions
    if attached.substeps is not None:
        doc["steps"] = attached.substeps.merge_into(doc["steps"])
    doc = mask_keeping_names(here.masks, doc)
    return Finished(doc, EXIT_FOR_STATUS[outcome.status], sched.variables)


def _make_executor(req: ExecutorRequest, cwd: str, plan: Plan, local: LocalExecutor) -> Executor:
    kind = req.kind or (plan.executor.type if plan.executor else None)
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

        return DaskExecutor(address, local=local, cwd=cwd)
    raise UsageError(f"unknown executor '{kind}': use 'local' or 'dask'")


def _process_groups(ctx: RunContext, plan: Plan) -> ProcessGroups:
    """The run's registry of its commands' process groups (a sub-plan's is its parent's), with
    the grace an interrupt gives them: --grace, else the plan's `grace`, else the default."""
    inherited = ctx.inherited_groups()
    if inherited is not None:
        return inherited
    req = ctx.request
    groups = req.groups if req.groups is not None else ProcessGroups()
    if req.grace is not None:
        groups.grace = req.grace
    elif plan.grace is not None:
        groups.grace = plan.grace
    return groups
