"""The DAG scheduler: starts each step the moment its dependencies are done, bounded by `jobs`.

It is the graphlib ready loop plus a concurrency bound, cancellation and events. How a tool
call is carried out is the executor's business; what happens to events is the subscribers';
what the planner answers is the replanner's. Every change to the run's state (step records,
variables, the plan itself after a revision) is made here, and announced as an event.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the cache session, the planner (replan),
# the resume rules (only a resumed run keeps steps), the approval question (only at a prompt).
import asyncio
import functools
import graphlib
import heapq
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from planrun.masking import masked_by, shown_result
from planrun.plan.conditions import reacts_to
from planrun.plan.definition import OnFailure, Plan, Step
from planrun.plan.expressions import ExpressionError
from planrun.plan.graph import PlanGraph
from planrun.plan.instances import parent_of
from planrun.run.attempts import AttemptFailed, attempt, output_of, stderr_tail, tool_context
from planrun.run.events import (
    ABSENT,
    Absent,
    EventBus,
    PlanDiff,
    RunEvent,
    RunFinished,
    RunStarted,
    StepFailed,
    StepInterrupted,
    StepOutput,
    StepRetrying,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from planrun.run.foreach import ForeachSteps
from planrun.run.outcome import Outcome, first_failure, result_document, verdict
from planrun.run.runtree import SUB_PLAN_TOOL, RunStopped
from planrun.run.scope import (
    Scope,
    StepRecord,
    rendered_title,
    step_args,
    step_condition,
    with_patterns,
)
from planrun.run.settings import RunSettings
from planrun.status import COMPLETED, CONDITION_FALSE, Reason, Status
from planrun.tools.base import ToolCaller, ToolContext

FAILED_STOPS = frozenset(
    {Reason.STEP_FAILED, Reason.STEP_BUDGET, Reason.REPLAN_BUDGET, Reason.NO_PLAN}
)
"""The stops of a run that failed (an abort, a budget, the planner giving up): the `always`
steps still run after them, never after an interrupt or an approval not given."""

if TYPE_CHECKING:
    from planrun.cache.session import Decision
    from planrun.run.planner import Replanner
    from planrun.run.resume import ResumePlan

__all__ = ["Outcome", "RunSettings", "Scheduler", "StepRecord", "result_document"]


class Scheduler:
    """Runs one plan (or its selected steps) once."""

    def __init__(
        self,
        plan: Plan,
        selected: list[str],
        variables: dict[str, Any],
        executor: ToolCaller,
        bus: EventBus,
        settings: RunSettings,
        resume: ResumePlan | None = None,
        replanner: Replanner | None = None,
        *,
        graph: PlanGraph | None = None,
        revisions: list[dict[str, Any]] | None = None,
    ) -> None:
        """`variables` is the run's own dict: result variables are bound into it (a masker
        made before may watch it). `graph`: the plan's graph as the run path built it (else
        built here); `revisions`: the planner's revisions so far (resume numbers on)."""
        self.plan = plan
        self.executor = executor
        self.bus = bus
        self.settings = settings
        self.here = settings.parent  # this run in its tree: -j, --yes, prefix, bounds, secrets
        self.resume = resume
        self.replanner = replanner
        self.variables = variables  # input variables + result variables bound so far
        self.records: dict[str, StepRecord] = {}
        self.reasons: dict[str, str] = dict(resume.reasons) if resume else {}  # why run again
        self.cache_reasons: dict[str, str] = {}  # why the cache did not have it
        self.foreach = ForeachSteps(self)
        self._set_steps(plan.steps, selected, graph)
        # This plan's limits, charged with every enclosing plan's; per invocation: a resume
        # starts from zero (steps, tool caps, replans). The slots are the tree's: -j in all.
        self.budget = self.here.budget
        self.slots = self.here.slots
        self.revisions: list[dict[str, Any]] = [] if revisions is None else revisions
        self.stop_reason: Reason | None = None
        self.stop_error: str | None = None
        self.failed_any = False
        self._aborted_from_above = False
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._done: asyncio.Queue[str] = asyncio.Queue()
        self._asking: set[str] = set()  # steps waiting for the remote cache's answer
        self._replan_requests: list[tuple[str, str]] = []  # (step, error): the planner's input

    def _set_steps(
        self, steps: list[Step], selected: list[str], graph: PlanGraph | None = None
    ) -> None:
        self.steps = {s.id: s for s in steps}
        # A title without `${...}` reads the same in every event: worked out once per plan.
        self._titles = {s.id: s.title or s.id for s in steps if not s.title or "${" not in s.title}
        # A copy: foreach instances are added to it as they are made.
        self.graph = graph.copy() if graph is not None else PlanGraph.build(steps)
        keep = set(selected)
        self.order = [sid for sid in self.graph.order if sid in keep]
        self.position = {sid: i for i, sid in enumerate(self.order)}
        for sid in self.order:
            self.records.setdefault(sid, StepRecord())

    def scope(self, sid: str | None = None) -> Mapping[str, Any]:
        """What expressions read; an instance's also holds its element and index."""
        base = Scope(self.variables, self.settings.env, self.records)
        return self.foreach.scope(sid, base) if sid is not None else base

    @property
    def mask(self) -> Callable[[Any], Any] | None:
        return self.here.masks

    def report_order(self) -> list[str]:
        """Step ids in run order, each foreach step followed by its instances."""
        return self.foreach.grouped(self.order)

    def emit(self, event: RunEvent) -> None:
        """Announce a change to the run's state on its bus; events about a step carry its
        rendered title. (The hot path's events are made with their title and time: an event
        given its title here is stamped in the same copy, not copied again by the bus.)"""
        unstepped = StepOutput | RunStarted | PlanDiff | RunFinished
        if not isinstance(event, unstepped) and event.title is None:  # its title not yet set
            title = self._titles.get(event.step)
            if title is None and event.step in self.steps:
                title = self.title(self.steps[event.step])
            if title is not None:
                event = event._replace(title=title, ts=event.ts or time.time())
        self.bus.emit(event)

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> Outcome:
        start = time.monotonic()
        aborts = self.here.aborts if self.here.prefix else None  # a sub-plan's
        if aborts is not None:
            aborts[self.here.prefix] = self._abort_from_above
        try:
            self._keep_previous()
            while True:
                await self._run_pass()
                if self.stop_reason is not None or not self._replan_requests:
                    break
                requests, self._replan_requests = self._replan_requests, []
                await self._replan(requests)
            if self.stop_reason in FAILED_STOPS:  # not an interrupt, not a "no"
                await self._run_always()
            if self._aborted_from_above:  # its `plan` step was stopped: it is interrupted
                self.stop_reason = Reason.INTERRUPTED
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.stop_reason = Reason.INTERRUPTED
            self.foreach.close()  # an always step an abort had left open: as it stands
        finally:
            if aborts is not None:
                aborts.pop(self.here.prefix, None)
        status, reason = verdict(self.stop_reason, self.failed_any)
        error = self.stop_error
        if error is None and status == Status.FAILED:
            error = first_failure(self.order, self.records)
        return Outcome(status, reason, error, round(time.monotonic() - start, 3))

    def _keep_previous(self) -> None:
        """On resume: the steps kept from the previous run are settled before any step starts."""
        if self.resume is None:
            return
        from planrun.run.resume import (  # Lazy import: only on resume
            bind_kept,
            kept_event,
            kept_sub_steps,
        )

        kept = {sid: replace(r) for sid, r in self.resume.kept.items() if sid in self.records}
        self.records.update(kept)
        bind_kept(self.variables, self.steps, kept)
        name = self.plan.name or ""
        for sid, rec in kept.items():
            self.foreach.keep(sid, self.resume)  # a kept foreach step: its instances too
            if self.steps[sid].tool == SUB_PLAN_TOOL:  # a kept sub-plan: its steps too
                for event in kept_sub_steps(name, sid, self.resume.previous):
                    self.emit(event)
            self.emit(kept_event(name, sid, rec, self.steps[sid]))

    async def _run_always(self) -> None:
        """After a failed stop (FAILED_STOPS): the `always` steps that did not run, one by one
        in run order (each one's `when` still decides; a foreach or matrix step's instances run
        as in a pass, and one the stop came in the middle of runs the instances it had not
        started). The run stays failed."""
        for sid in self.order:
            step = self.steps[sid]
            if not step.always:
                continue
            left = self.foreach.open_instances(sid)
            if left:
                await self._run_instances(left, step.max_parallel)
                continue
            if self.records[sid].status != Status.PENDING:
                continue
            if self.foreach.waiting(sid):
                await self._run_instances(self.foreach.expand(sid) or [], step.max_parallel)
                continue
            async with asyncio.TaskGroup() as tg:
                if await self._start(sid, tg):
                    await self._done.get()

    async def _run_instances(self, ids: list[str], max_parallel: int | None) -> None:
        """Run a foreach step's instances, at most `-j` (and `max_parallel`) at once, in order."""
        limit, running, queue = max(1, min(self.here.jobs, max_parallel or 1 << 30)), 0, ids
        try:
            async with asyncio.TaskGroup() as tg:
                while queue or running:
                    while queue and running < limit:
                        iid, queue = queue[0], queue[1:]
                        if self.records[iid].status == Status.PENDING and await self._start(
                            iid, tg
                        ):
                            running += 1
                        else:
                            self.foreach.settled(iid)
                    if running:
                        self.foreach.settled(await self._done.get())
                        running -= 1
        finally:
            self.foreach.close(self._finishes_after_abort)

    def _stopping(self) -> bool:
        return self.stop_reason is not None or bool(self._replan_requests)

    def _stop(self, reason: Reason, error: str | None = None) -> None:
        """End the run: start nothing more, and stop the steps still running (like abort)."""
        if self.stop_reason is not None:
            return
        self.stop_reason, self.stop_error = reason, error
        current = asyncio.current_task()
        aborts = self.here.aborts if reason in FAILED_STOPS else None
        for sid, task in list(self._tasks.items()):
            if task is current or self._finishes_after_abort(sid):
                continue
            abort = aborts.get(self.here.child_prefix(sid)) if aborts is not None else None
            if abort is not None:  # a sub-plan running: it stops as an abort stops it
                abort()
            else:
                task.cancel()

    def _abort_from_above(self) -> None:
        """This sub-plan's `plan` step is stopped by its parent's failure: stop as an abort
        does (its `always` steps still run), then end interrupted."""
        self._aborted_from_above = True
        self._stop(Reason.STEP_FAILED)

    def _finishes_after_abort(self, sid: str) -> bool:
        """Whether `sid` is an `always` step (or an instance of one) and the run was stopped by
        a failure (FAILED_STOPS): that stops everything else, it runs to its end."""
        step = self.steps.get(parent_of(sid) or sid)
        return self.stop_reason in FAILED_STOPS and step is not None and step.always

    async def _run_pass(self) -> None:
        """One pass of the ready loop over the current steps (replanning starts another)."""
        deps = {sid: [d for d in self.graph.deps[sid] if d in self.position] for sid in self.order}
        sorter = graphlib.TopologicalSorter(deps)
        sorter.prepare()
        heap: list[tuple[int, int, str]] = []  # (file position, instance index or -1, id)
        held: list[tuple[int, int, str]] = []  # instances waiting for their step's max_parallel
        running = 0
        jobs = max(1, self.here.jobs)
        try:
            async with asyncio.TaskGroup() as tg:
                while sorter.is_active():
                    for sid in sorter.get_ready():
                        heapq.heappush(heap, (self.position[sid], -1, sid))
                    settled = False
                    # until one settles: what it made ready may come first in file order
                    # A step asking the remote cache holds no job: many lookups go at once.
                    while (
                        heap
                        and running - len(self._asking) < jobs
                        and not settled
                        and not self._stopping()
                    ):
                        entry = heapq.heappop(heap)
                        sid = entry[2]
                        if self.foreach.held(sid):
                            held.append(entry)
                        elif self.foreach.waiting(sid):  # a foreach step: its instances go next
                            ids = self.foreach.expand(sid)
                            for n, iid in enumerate(ids or ()):
                                heapq.heappush(heap, (self.position[sid], n, iid))
                            if ids is None:
                                sorter.done(sid)
                                settled = True
                        # settled before (kept, or done before a replan), or settled now
                        elif self.records[sid].status == Status.PENDING and await self._start(
                            sid, tg
                        ):
                            running += 1
                            self.foreach.started(sid)
                        else:
                            settled = self._settled(sorter, sid) or settled
                    # A step settled without running (skipped, cached, kept) may have made
                    # others ready: look again before waiting for a running step to finish.
                    if settled and not self._stopping():
                        continue
                    if running == 0:
                        break
                    sid = await self._done.get()
                    running -= 1
                    if self.foreach.ended(sid):  # a place under its step's max_parallel
                        for entry in held:
                            heapq.heappush(heap, entry)
                        held.clear()
                    self._settled(sorter, sid)
        finally:  # a stop leaves a foreach step with open instances (an abort: not an always one)
            self.foreach.close(self._finishes_after_abort)

    def _settled(self, sorter: graphlib.TopologicalSorter[str], sid: str) -> bool:
        """Mark `sid` done (an instance: its step, with the last of its siblings). True when
        something the sorter waits for is done."""
        if parent_of(sid) is None:
            sorter.done(sid)
            return True
        parent = self.foreach.settled(sid)
        if parent is not None:
            sorter.done(parent)
        return parent is not None

    # ---- starting a step -----------------------------------------------------------------

    async def _start(self, sid: str, tg: asyncio.TaskGroup) -> bool:
        """Start `sid`, or settle it at once (skipped, failed, refused). True if a task started."""
        prepared = self._prepare(sid, self.steps[sid])
        if prepared is None or not await self._approved(sid, prepared[2], prepared[0]):
            return False
        args, fp, step = prepared  # the step with its `sources` and `outputs` rendered
        cache = self.settings.cache
        if cache is not None:  # hit: settled from the cache; miss: runs, and says why
            deps = {d: self.records[d] for d in self.graph.deps[sid] if d in self.records}
            decision = cache.before_local(sid, step, args, deps)
            if cache.asks_remote(decision):
                self._asking.add(sid)
                self._launch(sid, tg, self._ask_remote(sid, step, args, fp, decision))
                return True
            if decision.status == "hit":
                self._settle_cached(sid, step, fp, decision)
                return False
            self.cache_reasons[sid] = decision.reason
        self._launch(sid, tg, self._run_step(sid, step, args, fp))
        return True

    def _launch(self, sid: str, tg: asyncio.TaskGroup, work: Coroutine[Any, Any, None]) -> None:
        task = tg.create_task(work)
        # A callback, not the task's own `finally`: a task cancelled before its first step
        # (an abort right after it was started) never runs its body, yet must count as done.
        task.add_done_callback(functools.partial(self._task_done, sid))
        self._tasks[sid] = task

    async def _ask_remote(
        self, sid: str, step: Step, args: dict[str, Any], fp: str, decision: Decision
    ) -> None:
        """A local miss the remote cache may have: settled from it, else run."""
        cache = self.settings.cache
        assert cache is not None
        try:
            decision = await cache.ask_remote(sid, step, decision)
        finally:
            self._asking.discard(sid)
        if decision.status == "hit":
            self._settle_cached(sid, step, fp, decision)
            return
        self.cache_reasons[sid] = decision.reason
        await self._run_step(sid, step, args, fp)

    def _task_done(self, sid: str, _task: object = None) -> None:
        self._tasks.pop(sid, None)
        self._done.put_nowait(sid)

    def _settle_cached(self, sid: str, step: Step, fp: str, decision: Decision) -> None:
        """A cache hit: the step counts as succeeded with its recorded result; nothing ran,
        no budget is charged."""
        from planrun.cache.session import hit_event

        event = hit_event(self.plan.name or "", sid, decision, step, fp)
        rec = self.records[sid]
        rec.status, rec.result, rec.fingerprint = Status.CACHED, event.result, fp
        rec.cache_key = decision.key
        rec.duration_s = 0.0
        if step.result_variable:
            self.variables[step.result_variable] = event.result
        shown, rec.result_masked = shown_result(self.mask, rec.result, self._binds_secret(sid))
        if rec.result_masked:  # an entry made before the secret was one: not restored
            event = event._replace(result=shown, result_masked=True)
        self.emit(event)

    def skip_if_upstream_failed(self, sid: str, step: Step) -> bool:
        """Skip the step when a dependency failed, but for the ones its `when` decides about
        (a notify-on-failure step); True when it was skipped. (A foreach step too.)"""
        if step.always:  # it runs whatever its dependencies came to
            return False
        records = self.records
        failed = [d for d in self.graph.deps[sid] if d in records and records[d].blocks_dependents]
        if not failed:
            return False
        watched = reacts_to(step)  # read only when a dependency failed
        blocker = next((d for d in failed if d not in watched), None)
        if blocker:
            self._skip(sid, f"upstream failed: {blocker}", upstream_failed=True)
        return blocker is not None

    def _prepare(self, sid: str, step: Step) -> tuple[dict[str, Any], str, Step] | None:
        """The step's resolved args and fingerprint, and the step with its `sources` and
        `outputs` rendered; None when it is settled instead."""
        if self.skip_if_upstream_failed(sid, step):
            return None
        scope = self.scope(sid)
        try:
            if not step_condition(step, scope):
                self._skip(sid, CONDITION_FALSE)
                return None
            return (*step_args(step, scope, self.here.masks), with_patterns(step, scope))
        except ExpressionError as exc:
            self.fail_before_start(sid, f"step '{sid}': {exc.message}")
            return None

    async def _approved(self, sid: str, step: Step, args: dict[str, Any]) -> bool:
        """Whether a step may start: approval given (`--yes`, a "y" at the prompt) or not needed.
        A "no" stops the run like abort, the steps still running included."""
        if self.here.yes or not self.plan.needs_approval(step):
            return True
        ask = self.settings.ask
        if ask is None:  # a gated step the up-front check could not see (added by the planner)
            text = f"approval required for step '{self.here.prefix}{sid}'"
            self._stop(Reason.APPROVAL_REQUIRED, text)
            return False
        from planrun.run.approval import approval_question  # Lazy import: only at a prompt

        if await ask(sid, approval_question(sid, step, args, lambda: self.scope(sid), self.mask)):
            return self.stop_reason is None  # the run may have stopped while we asked
        rec = self.records[sid]
        rec.status = Status.INTERRUPTED
        self.emit(StepInterrupted(self.plan.name or "", sid, rec.status, 0, 0.0))
        self._stop(Reason.DENIED, f"approval denied for step '{self.here.prefix}{sid}'")
        return False

    def title(self, step: Step) -> str:
        """The step's title with `${...}` rendered (as written when it cannot be rendered)."""
        known = self._titles.get(step.id)
        return known if known is not None else rendered_title(step, lambda: self.scope(step.id))

    def _skip(self, sid: str, reason: str, *, upstream_failed: bool = False) -> None:
        rec = self.records[sid]
        rec.status, rec.upstream_failed, rec.reason = Status.SKIPPED, upstream_failed, reason
        rec.error = reason if upstream_failed else None  # a `when` skip is no error
        self.emit(StepSkipped(self.plan.name or "", sid, rec.status, reason, rec.error))

    def fail_before_start(self, sid: str, error: str) -> None:
        """A step that fails before any attempt (an expression it cannot evaluate now)."""
        self._finish_failure(sid, self.steps[sid], AttemptFailed(error), 0.0)

    def note_failed(self) -> None:
        """A step (a foreach step, from its instances) failed: the run will say so."""
        self.failed_any = True

    # ---- one step ------------------------------------------------------------------------

    async def _run_step(self, sid: str, step: Step, args: dict[str, Any], fp: str) -> None:
        started = time.monotonic()
        self.records[sid].fingerprint = fp
        secret = self._binds_secret(sid)  # not streamed: known only at its end
        out = self._output_cb(sid) if self.here.stream and not secret else None
        ctx = tool_context(sid, step, self.plan.defaults.timeout, self.settings, out)
        # Before the step starts, so not part of its timeout; cancelled here, it stays pending.
        await self.slots.acquire(step.tool)
        try:
            result, failure, budget = await self._attempts(sid, step, args, ctx)
            if failure is None and (self.settings.cache is not None or step.outputs):
                unstored = await self.settings.outputs_made(sid, step, result, secret)
                failure = AttemptFailed(unstored) if unstored else None  # an output missing
            if failure is None:
                self._succeed(sid, step, result, time.monotonic() - started, ctx.output)
            else:
                self._finish_failure(sid, step, failure, time.monotonic() - started, budget=budget)
        except RunStopped as exc:  # a sub-plan's gate or a shared budget stops the run
            self._stopped_by_sub_plan(sid, step, exc, time.monotonic() - started)
        except asyncio.CancelledError:
            self._interrupted(sid, time.monotonic() - started)
            raise
        finally:
            self.slots.release(step.tool)

    def _stopped_by_sub_plan(self, sid: str, step: Step, exc: RunStopped, duration: float) -> None:
        reason = Reason(exc.reason)
        if reason == Reason.STEP_BUDGET:
            self._finish_failure(sid, step, AttemptFailed(exc.message), duration, budget=True)
            self.stop_error = exc.message  # the budget as the sub-plan named it
            return
        self._interrupted(sid, duration)
        self._stop(reason, exc.message)

    def _interrupted(self, sid: str, duration: float) -> None:
        rec = self.records[sid]
        rec.status, rec.duration_s = Status.INTERRUPTED, round(duration, 3)
        name = self.plan.name or ""
        self.emit(StepInterrupted(name, sid, rec.status, rec.attempts, rec.duration_s))

    async def _attempts(
        self, sid: str, step: Step, args: dict[str, Any], ctx: ToolContext
    ) -> tuple[Any, AttemptFailed | None, bool]:
        """Attempt until one succeeds or the retries are spent: (result, failure, by_budget)."""
        defaults = self.plan.defaults
        retries = step.retries if step.retries is not None else defaults.retries
        delay = step.retry_delay if step.retry_delay is not None else defaults.retry_delay
        rec = self.records[sid]
        while True:
            refusal = self.budget.charge(step.tool)
            if refusal:
                return None, AttemptFailed(refusal), True
            rec.attempts += 1
            rec.status = Status.RUNNING
            reason, again = None, None
            if rec.attempts == 1 and sid in self.reasons:
                reason, again = self.reasons[sid], True
            elif rec.attempts == 1:
                reason = self.cache_reasons.get(sid, "cache off")
            fp, title = rec.fingerprint, self.title(step)
            name = self.plan.name or ""
            self.emit(
                StepStarted(
                    name,
                    sid,
                    rec.status,
                    rec.attempts,
                    fp,
                    step.tool,
                    title,
                    reason,
                    again,
                    ts=time.time(),
                )
            )
            result, failure = await attempt(self.executor, step, args, ctx, ctx.timeout)
            if failure is None or rec.attempts > retries:
                return result, failure, False
            tail = stderr_tail(failure.partial)
            name = self.plan.name or ""
            self.emit(StepRetrying(name, sid, rec.attempts, failure.error, delay, tail))
            await asyncio.sleep(delay)
            delay *= 2

    def _binds_secret(self, sid: str) -> bool:
        if not self.plan.secrets:
            return False
        return self.steps[parent_of(sid) or sid].result_variable in self.plan.secrets

    def _output_cb(self, sid: str) -> Callable[[str, str], None]:
        def emit(stream: str, line: str) -> None:
            self.emit(StepOutput(self.plan.name or "", sid, stream, line))

        return emit

    def _succeed(
        self, sid: str, step: Step, result: Any, duration: float, printed: str | None = None
    ) -> None:
        rec = self.records[sid]
        rec.status, rec.result, rec.error = Status.SUCCEEDED, result, None
        rec.duration_s = round(duration, 3)
        secret = self._binds_secret(sid)  # its own record is masked with it
        shown, rec.result_masked = shown_result(self.mask, result, secret)
        if secret and printed:
            printed = masked_by(result, printed)
        if step.result_variable:
            self.variables[step.result_variable] = result
        key: str | None | Absent = ABSENT
        if self.settings.cache is not None:  # the key its dependents, and a resume, take
            key = rec.cache_key = self.settings.cache.keys.get(sid)
        event = StepSucceeded(
            self.plan.name or "",
            sid,
            rec.status,
            rec.attempts,
            rec.duration_s,
            shown,
            rec.fingerprint,
            output_of(shown) or printed,
            step.result_variable,
            True if rec.result_masked else None,
            key,
            title=self.title(step),
            ts=time.time(),
        )
        self.emit(event)

    def _finish_failure(
        self, sid: str, step: Step, failure: AttemptFailed, duration: float, *, budget: bool = False
    ) -> None:
        rec = self.records[sid]
        policy = OnFailure.abort if budget else (step.on_failure or self.plan.defaults.on_failure)
        rec.error, rec.duration_s = failure.error, round(duration, 3)
        if policy == OnFailure.ignore:
            rec.status, rec.result = Status.IGNORED, None
            if step.result_variable:
                self.variables[step.result_variable] = None
        else:
            rec.status, rec.result = Status.FAILED, failure.partial
            self.failed_any = True
        event = StepFailed(
            self.plan.name or "",
            sid,
            rec.status,
            rec.attempts,
            rec.duration_s,
            failure.error,
            failure.detail,
            rec.result,
            rec.fingerprint,
            step.result_variable,
            output_of(failure.partial),
            None if budget else stderr_tail(failure.partial),  # None: no attempt
        )
        self.emit(event)
        if budget:
            self._stop(Reason.STEP_BUDGET, f"step '{self.here.prefix}{sid}': {failure.error}")
        elif policy == OnFailure.replan and self.replanner is not None:
            failed = parent_of(sid) or sid  # the step as written (once for a foreach step)
            if all(step_id != failed for step_id, _ in self._replan_requests):
                self._replan_requests.append((failed, failure.error))
        elif policy in (OnFailure.abort, OnFailure.replan) and not self.here.keep_going:
            self._stop(Reason.STEP_FAILED)

    # ---- replanning ----------------------------------------------------------------------

    async def _replan(self, failed: list[tuple[str, str]]) -> None:
        """Ask the planner; apply its answer: a new plan for every step not completed, or a stop."""
        from planrun.run.planner import ReplanStop, replan_request

        assert self.replanner is not None
        calls_left, limit = self.budget.replans_left()  # enclosing plans' limits too
        run = (self.plan, self.order, self.records, failed, self.variables, self.revisions)
        answer = await self.replanner(replan_request(*run, calls_left, limit))
        self.budget.charge_replans(answer.calls)
        if isinstance(answer, ReplanStop):
            self._stop(answer.reason, answer.error)
            return
        record = answer.record
        self.revisions.append(record)
        diff = record["diff"]
        name, revision, steps = self.plan.name or "", record["revision"], record["steps"]
        ids = (diff["removed"], diff["added"], diff["revised"])
        self.emit(PlanDiff(name, *ids, revision, record["error"], steps))
        completed = {sid for sid in self.order if self.records[sid].status in COMPLETED}
        for sid in list(self.records):
            if sid not in completed and parent_of(sid) not in completed:  # instances stay too
                del self.records[sid]
                self.reasons.pop(sid, None)  # a new step now, not one run again
        self.plan = answer.plan
        self._set_steps(answer.plan.steps, [s.id for s in answer.plan.steps])
        self.failed_any = any(r.status == Status.FAILED for r in self.records.values())
