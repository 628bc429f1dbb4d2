"""A run's context: where it sits in its tree of runs, decided once by a factory.

`root_context(req)` makes the context of a top-level run (`planrun run`, the library, `planrun
mcp`'s plan_run); `child_context(parent, step_id, path, req)` the context of a sub-plan a `plan`
step starts. Both go through the one run path (planrun.run.runner, planrun.run.launch), which asks its
context what to do where the two differ (its state, reporters, executor, approvals, cache) and
never whether it is a sub-plan.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the local executor, the substeps rows, the
# cache wiring and the unstarted-run records only for the runs that use them.
import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from planrun.cache import credentials_masker, step_cached
from planrun.plan.definition import Plan, Policy
from planrun.records import record
from planrun.reporters.termsafe import terminal_safe
from planrun.run.events import EventBus
from planrun.run.parent import (
    STEP_SEPARATOR,
    AskFn,
    Budget,
    MaskChain,
    Notice,
    ParentContext,
    Slots,
    forward_steps,
)
from planrun.run.procgroups import ProcessGroups
from planrun.run.request import Finished, Prepared, RunRequest, plan_stack
from planrun.run.runopen import OpenedState, attach_reporters, new_run_id, open_state
from planrun.tools.base import ToolCaller

if TYPE_CHECKING:
    from planrun.cache.session import CacheOptions
    from planrun.state import StateStore

__all__ = ["Attached", "ChildContext", "RootContext", "RunContext", "child_context", "root_context"]


class Attached:
    """Where a run's events go and what to close after it."""

    __slots__ = ("bus", "masks", "notice", "console", "closers", "substeps")
    bus: EventBus
    masks: MaskChain  # the secrets of every run in the tree
    notice: Notice | None
    console: Any  # the ConsoleReporter of a top-level run
    closers: list[Callable[[], None]]
    substeps: Any  # planrun.run.substeps.SubStepRows of a top-level run

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


@record(frozen=True)
class RunContext:
    """What the run path needs to know of a run's place in its tree (made by a factory)."""

    request: RunRequest
    prefix: str  # this run's id path: "" at the top, "deploy/" inside step deploy, "a/b/" ...
    stack: tuple[str, ...]  # real paths of the plan files running, outermost first
    yes: bool  # every approval gate is answered
    can_ask: bool  # someone can be asked at a gate (a TTY)
    forced: tuple[str, ...] = ()  # --force: steps the cache and resume must not keep

    # What a run does where a top-level run and a sub-plan differ (see the two below).

    @property
    def outer_policy(self) -> Policy | None:
        """The enclosing plans' policy, put on top of the plan's own (None at the top)."""
        raise NotImplementedError

    @property
    def results_read(self) -> bool:
        """Whether the run's results are read by an enclosing run (a sub-plan's are)."""
        raise NotImplementedError

    def blocked_masker(self, prep: Prepared) -> Callable[[Any], Any]:
        """What masks the document of a run blocked at its gate."""
        raise NotImplementedError

    def record_blocked(self, prep: Prepared, doc: dict[str, Any], kept: dict[str, Any]) -> None:
        """Record a run blocked at its gate where its runs are recorded (`kept`: on resume,
        the steps kept from the previous run, by id)."""
        raise NotImplementedError

    def cache_options(self, prep: Prepared) -> CacheOptions | None:
        """The run's cache options; None when its steps are not cached."""
        raise NotImplementedError

    def open_state(self, prep: Prepared) -> tuple[Prepared, OpenedState]:
        """The run's locked state (and what a resume takes from it)."""
        raise NotImplementedError

    def attach(self, prep: Prepared, store: StateStore | None, explains: bool) -> Attached:
        """The run's event bus, its reporters and the secrets its events are masked with."""
        raise NotImplementedError

    def inherited_executor(self) -> ToolCaller | None:
        """The executor the run shares (None: it starts its own)."""
        raise NotImplementedError

    def stopped_while_starting(self, prep: Prepared, bus: EventBus, resumed: bool) -> Finished:
        """A run cancelled before its first step (servers, executor starting)."""
        raise NotImplementedError

    def tree(
        self, plan: Plan, attached: Attached, executor: ToolCaller, opened: OpenedState
    ) -> ParentContext:
        """This run as the parent of the sub-plans its steps start (and its bounds)."""
        raise NotImplementedError

    def step_ask(self, here: ParentContext) -> AskFn | None:
        """The question asked at a gate of this run's steps, None when no one can be asked."""
        raise NotImplementedError

    def inherited_groups(self) -> ProcessGroups | None:
        """The registry of process groups this run shares with its parent (a sub-plan's)."""
        return None

    def run_id(self, here: ParentContext) -> str | None:
        """The id the run's run.started event carries (None: a new one of its own)."""
        raise NotImplementedError


class RootContext(RunContext):
    """A top-level run: its own state, reporters, executor, cache, slots and budget."""

    __slots__ = ()

    @property
    def outer_policy(self) -> Policy | None:
        return None

    @property
    def results_read(self) -> bool:
        return False

    def blocked_masker(self, prep: Prepared) -> Callable[[Any], Any]:
        return prep.masker(prep.variables)

    def record_blocked(self, prep: Prepared, doc: dict[str, Any], kept: dict[str, Any]) -> None:
        from planrun.run.unstarted import record_blocked  # its state, events and JUnit say it

        record_blocked(self.request, prep, doc, kept)

    def cache_options(self, prep: Prepared) -> CacheOptions | None:
        req = self.request
        if self.forced or req.explain or any(map(step_cached, prep.plan.steps)):
            from planrun.cache.wiring import run_cache_options  # ~10 ms: only when it can matter

            return run_cache_options(req.cache_request, prep)  # an unknown --force ID stops here
        return None

    def open_state(self, prep: Prepared) -> tuple[Prepared, OpenedState]:
        return open_state(self.request, prep)

    def attach(self, prep: Prepared, store: StateStore | None, explains: bool) -> Attached:
        """Its own bus, masked by the whole tree's secrets, with the console, state and
        reports subscribed."""
        from planrun.run.resumehint import resume_hint
        from planrun.run.substeps import SubStepRows

        req = self.request
        masks = MaskChain()
        credentials = credentials_masker(req.cache_request.remote, os.environ)
        if credentials is not None:  # the signing key, the remote's token and password
            masks.add(credentials)
        bus = EventBus(mask=masks)
        try:
            # --explain (and --no-cache: each step says `cache off`) when the cache can matter
            explain = explains and (req.explain or req.no_cache)
            hint = resume_hint(req, prep.targets, prep.plan.secrets, prep.plan.params)
            matrices = frozenset(s.id for s in prep.plan.steps if s.matrix is not None)
            console, closers = attach_reporters(
                req, bus, store, prep.plan.dotenv, explain, hint, matrices
            )
        except BaseException:
            if store is not None:
                store.release()
            raise
        substeps = SubStepRows()
        bus.subscribe(substeps)
        notice = console.notice if console is not None else None
        return Attached(bus, masks, notice, console, closers, substeps)

    def inherited_executor(self) -> ToolCaller | None:
        return None

    def stopped_while_starting(self, prep: Prepared, bus: EventBus, resumed: bool) -> Finished:
        from planrun.run.runstate import kept_on_resume
        from planrun.run.unstarted import stopped_while_starting

        kept = kept_on_resume(self.request, prep) if resumed else None
        return stopped_while_starting(prep, bus, resumed, kept)

    def tree(
        self, plan: Plan, attached: Attached, executor: ToolCaller, opened: OpenedState
    ) -> ParentContext:
        req = self.request
        name = plan.name or "plan"
        jobs = req.jobs or (plan.limits.max_concurrency or os.cpu_count() or 1)
        previous = (
            None if opened.previous is None else _unforced(opened.previous, list(self.forced))
        )
        return ParentContext(
            prefix="",
            plan=name,
            plan_stack=self.stack,
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
            previous=previous,
            aborts={},
            invocation_dir=_invocation_dir(req),
        )

    def step_ask(self, here: ParentContext) -> AskFn | None:
        return here.ask

    def run_id(self, here: ParentContext) -> str | None:
        return here.run_id


@record(frozen=True, kw_only=True)
class ChildContext(RunContext):
    """A sub-plan: inside its parent's state, events, executor, slots, budget and secrets."""

    parent: ParentContext  # the run whose `plan` step started this one
    step_id: str

    @property
    def outer_policy(self) -> Policy | None:
        return self.parent.policy

    @property
    def results_read(self) -> bool:
        return True

    def blocked_masker(self, prep: Prepared) -> Callable[[Any], Any]:
        return self.parent.masks

    def record_blocked(self, prep: Prepared, doc: dict[str, Any], kept: dict[str, Any]) -> None:
        return None  # the parent's `plan` step records it

    def cache_options(self, prep: Prepared) -> CacheOptions | None:
        return None  # sub-plans' steps are not cached

    def open_state(self, prep: Prepared) -> tuple[Prepared, OpenedState]:
        """No state of its own (its steps are in the parent's); on resume, what the previous
        run recorded of its steps, by their own ids."""
        previous = self.parent.previous
        if previous is None:
            return prep, OpenedState(None, None)
        n = len(self.prefix)
        mine = {sid[n:]: p for sid, p in previous.items() if sid.startswith(self.prefix)}
        return prep, OpenedState(None, mine)

    def attach(self, prep: Prepared, store: StateStore | None, explains: bool) -> Attached:
        """A bus whose step events go to the top run's."""
        bus = EventBus()
        bus.subscribe(forward_steps(self.parent, self.prefix))
        return Attached(bus, self.parent.masks, self.parent.notice)

    def inherited_executor(self) -> ToolCaller | None:
        return self.parent.executor

    def stopped_while_starting(self, prep: Prepared, bus: EventBus, resumed: bool) -> Finished:
        raise asyncio.CancelledError()  # the parent's step is interrupted, and says so

    def tree(
        self, plan: Plan, attached: Attached, executor: ToolCaller, opened: OpenedState
    ) -> ParentContext:
        """The parent's, but for its place, policy, concurrency and own budget (its `groups`
        and `run_plan` are set by the run path, as a top-level run's are)."""
        parent, own = self.parent, plan.limits.max_concurrency
        return parent._replace(
            prefix=self.prefix,
            plan_stack=self.stack,
            cwd=self.request.cwd,
            policy=plan.policy,  # merged in prepare()
            jobs=min(parent.jobs, own) if own else parent.jobs,
            budget=Budget(plan.limits, plan.name or "plan", parent.budget),
        )

    def inherited_groups(self) -> ProcessGroups | None:
        return self.parent.groups

    def step_ask(self, here: ParentContext) -> AskFn | None:
        """The parent's TTY question for this sub-plan's steps, which it names PREFIX + id."""
        ask, prefix = self.parent.ask, self.prefix
        if ask is None:
            return None

        async def ask_here(step_id: str, question: str) -> bool:
            return await ask(prefix + step_id, question)

        return ask_here

    def run_id(self, here: ParentContext) -> str | None:
        return None  # a sub-plan's own events get their own


def _invocation_dir(req: RunRequest) -> str | None:
    from planrun.plan.discovery import INVOCATION_DIR

    given = req.variables.get(INVOCATION_DIR)
    return given if isinstance(given, str) else None


def root_context(req: RunRequest) -> RunContext:
    """The context of a top-level run (the CLI, the library, `planrun mcp`)."""
    return RootContext(req, "", plan_stack(req), req.yes, req.interactive, tuple(req.force))


def child_context(parent: ParentContext, step_id: str, path: str, req: RunRequest) -> RunContext:
    """The context of the sub-plan at `path` (its real path) that step `step_id` of `parent`
    starts, with the request it runs by."""
    prefix = parent.child_prefix(step_id)
    stack = (*parent.plan_stack, path)
    return ChildContext(
        req, prefix, stack, parent.yes, parent.ask is not None, parent=parent, step_id=step_id
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


def _tty_ask(console: Any) -> AskFn:
    lock = asyncio.Lock()

    async def ask(step_id: str, question: str) -> bool:
        async with lock:

            def prompt() -> bool:
                sys.stderr.write(f"{terminal_safe(question)} [y/N] ")
                sys.stderr.flush()
                line = sys.stdin.readline()
                if not line.endswith("\n"):  # end of input (Ctrl-D): no answer, no newline
                    sys.stderr.write("\n")  # echoed, so what follows leaves the question be
                    sys.stderr.flush()
                return line.strip().lower() in ("y", "yes")

            if console is None:
                return await asyncio.to_thread(prompt)
            with console.suspend():  # the live view must not hide the question
                return await asyncio.to_thread(prompt)

    return ask
