"""The schedule stage of the run path: state, reporters, MCP servers, executor and the scheduler,
for a top-level run or a sub-plan inside its parent; it ends in a `Finished` run."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planrun.errors import PlanInvalid, StateError, UsageError
from planrun.events import Event, EventBus
from planrun.graph import PlanGraph
from planrun.model import Plan
from planrun.parent import (
    Budget,
    MaskChain,
    Notice,
    ParentContext,
    Slots,
    SubPlanCall,
    forward_steps,
)
from planrun.request import EXIT_FOR_STATUS, Finished, Prepared, RunRequest, abs_path, plan_stack
from planrun.resume import PreviousStep
from planrun.runstate import decide_resume, previous_steps


@dataclass
class OpenedState:
    """The locked state store of a run (None with --no-state) and what resume needs from it."""

    store: Any
    previous: dict[str, PreviousStep] | None = None
    revisions: list[dict[str, Any]] = field(default_factory=list)


def open_state(req: RunRequest, prep: Prepared) -> tuple[Prepared, OpenedState]:
    """Lock the state file; on resume, load it: the previous steps, results and revisions."""
    if req.no_state:
        if req.resume:
            raise UsageError("--resume needs state: drop --no-state")
        return prep, OpenedState(None)
    from planrun.state import StateStore, default_state_path

    name = prep.plan.name or "plan"
    path = abs_path(req.state, req.cwd) if req.state else str(default_state_path(req.cwd, name))
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
        opened.previous = previous_steps(old)
        if old.revisions:
            prep = _revised(prep, old.revisions, req, path)
            opened.revisions = list(old.revisions)
    except BaseException:
        store.release()
        raise
    return prep, opened


def attach_reporters(
    req: RunRequest, bus: EventBus, store: Any
) -> tuple[Any, list[Callable[[], None]]]:
    """Subscribe the console, the state store, --events, --junit and library subscribers.

    Returns (console, closers). Sub-plans' steps reach them all, as PARENT_STEP/CHILD_STEP.
    """
    closers: list[Callable[[], None]] = []
    console = None
    if req.console:
        from planrun.reporters.console import ConsoleReporter

        console = ConsoleReporter(
            sys.stderr,
            quiet=req.quiet,
            stream_output=req.stream,
            resume_hint=req.plan if store is not None else None,
        )
        bus.subscribe(console.handle)
        closers.append(console.close)
    if store is not None:
        bus.subscribe(store.handle)
    try:
        if req.events:
            from planrun.reporters.jsonl import JsonLinesReporter

            jl = JsonLinesReporter(abs_path(req.events, req.cwd))
            bus.subscribe(jl.handle)
            closers.append(jl.close)
        if req.junit:
            from planrun.reporters.junit import JUnitReporter

            ju = JUnitReporter(abs_path(req.junit, req.cwd))
            bus.subscribe(ju.handle)
            closers.append(ju.close)
    except OSError as exc:
        for close in closers:
            close()
        raise UsageError(f"cannot write {exc.filename}: {exc.strerror}") from None
    for fn in req.subscribers:
        bus.subscribe(fn)
    return console, closers


async def _check_mcp_tools(plan: Plan, prep: Prepared, pool: Any, notice: Notice | None) -> None:
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


@dataclass
class Attached:
    """Where a run's events go and what to close after it."""

    bus: EventBus
    masks: MaskChain  # the secrets of every run in the tree
    notice: Notice | None = None
    console: Any = None  # the ConsoleReporter of a top-level run
    closers: list[Callable[[], None]] = field(default_factory=list)
    substeps: Any = None  # planrun.substeps.SubStepRows of a top-level run


def _attach(req: RunRequest, prep: Prepared, store: Any, call: SubPlanCall | None) -> Attached:
    """A top-level run: its own bus, masked by the whole tree's secrets, with the console,
    state and reports subscribed. A sub-plan: a bus whose step events go to the top run's."""
    if call is not None:
        bus = EventBus()
        bus.subscribe(forward_steps(call.parent, call.prefix))
        return Attached(bus, call.parent.masks, call.parent.notice)
    from planrun.substeps import SubStepRows

    masks = MaskChain()
    bus = EventBus(mask=masks)
    try:
        console, closers = attach_reporters(req, bus, store)
    except BaseException:
        if store is not None:
            store.release()
        raise
    substeps = SubStepRows()
    bus.subscribe(substeps)
    notice = console.notice if console is not None else None
    return Attached(bus, masks, notice, console, closers, substeps)


def _context(
    req: RunRequest, plan: Plan, attached: Attached, executor: Any, call: SubPlanCall | None
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
    )


async def launch(req: RunRequest, prep: Prepared, call: SubPlanCall | None) -> Finished:
    """Open state → reporters → servers and executor → schedule → the result document."""
    from planrun.cache.wiring import run_cache_options
    from planrun.executors.local import LocalExecutor

    # Sub-plans' steps are not cached; an unknown --force ID stops the run before any state.
    cache_options = run_cache_options(req, prep) if call is None else None
    prep, opened = open_state(req, prep) if call is None else (prep, OpenedState(None))
    plan, store = prep.plan, opened.store
    attached = _attach(req, prep, store, call)
    pool = None
    cache = None
    executor: Any = call.parent.executor if call else LocalExecutor()
    try:
        # dotenv: sent along with the steps that run elsewhere (the Dask executor)
        services: dict[str, Any] = {"notice": attached.notice, "dotenv": prep.dotenv}
        try:
            if plan.servers:
                from planrun.checktools import make_pool

                pool = services["mcp"] = make_pool(plan, prep.variables, req.cwd)
                await _check_mcp_tools(plan, prep, pool, attached.notice)
            if call is None:
                executor = _make_executor(req, plan, executor)
                await executor.start()
        except asyncio.CancelledError:
            if call is not None:
                raise
            from planrun.unstarted import stopped_while_starting

            return stopped_while_starting(prep, attached.bus, opened.previous is not None)
        here = _context(req, plan, attached, executor, call)
        if cache_options is not None:
            from planrun.cache.wiring import open_run_cache

            cache = open_run_cache(req, prep, cache_options, attached.console)
        return await _schedule(req, prep, opened, attached, here, services, call, cache)
    finally:
        if cache is not None:
            cache.close()
        try:
            if pool is not None:
                await pool.aclose()
            if call is None:
                await executor.aclose()
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
    services: dict[str, Any],
    call: SubPlanCall | None,
    cache: Any = None,
) -> Finished:
    from planrun.scheduler import RunSettings, Scheduler, result_document

    plan, bus = prep.plan, attached.bus
    masker = prep.masker(prep.variables)  # made live below: result variables count once bound
    if plan.secrets:
        here.masks.add(masker)
    mask = None if here.masks.empty else here.masks  # fingerprints and results, as stored
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
    resume = decide_resume(prep, opened.previous, mask)
    sched = Scheduler(
        plan, prep.selected, prep.variables, here.executor, bus, settings, resume, replanner
    )
    masker.variables = sched.variables  # live: result variables count once bound
    if cache is not None:
        cache.secret_values = masker.values  # a result holding one is not stored
    sched.revisions = opened.revisions  # numbering goes on; the budget is this run's
    name = plan.name or "plan"
    bus.emit(_started_event(prep, dict(prep.variables), opened.previous is not None, here.jobs))
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
    return Finished(here.masks(doc), EXIT_FOR_STATUS[outcome.status], sched.variables)


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
