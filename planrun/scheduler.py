"""The DAG scheduler: starts each step the moment its dependencies are done, bounded by `jobs`.

It is the graphlib ready loop plus a concurrency bound, cancellation and events. How a tool
call is carried out is the executor's business; what happens to events is the subscribers'.
"""

from __future__ import annotations

import asyncio
import graphlib
import hashlib
import heapq
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from planrun.conditions import reacts_to
from planrun.events import Event, EventBus
from planrun.executors.base import Executor
from planrun.expressions import ExpressionError, resolve, resolve_args, to_text
from planrun.graph import PlanGraph, when_source
from planrun.model import OnFailure, Plan, Step
from planrun.parent import Budget, ParentContext, RunStopped, Slots
from planrun.tools.base import ToolContext, ToolFailed


def fingerprint(tool: str, args: Any) -> str:
    """What a step does: its tool and resolved arguments."""
    blob = json.dumps([tool, args], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class StepRecord:
    """The scheduler's own view of one step in this run."""

    status: str = "pending"
    attempts: int = 0
    result: Any = None
    error: str | None = None
    duration_s: float | None = None
    fingerprint: str | None = None
    reran: bool = False  # executed in this run (as opposed to kept from the previous one)
    upstream_failed: bool = False  # skipped because a step it depends on failed

    @property
    def blocks_dependents(self) -> bool:
        """Its dependents are skipped: it failed, was stopped, or was itself skipped so."""
        return self.status in ("failed", "interrupted") or self.upstream_failed


class StepsView(Mapping[str, Any]):
    """`steps.<id>` in expressions: each step's status, result and error, read live."""

    def __init__(self, records: dict[str, StepRecord]) -> None:
        self._records = records

    def __getitem__(self, sid: str) -> dict[str, Any]:
        r = self._records[sid]
        return {"status": r.status, "result": r.result, "error": r.error}

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


class Scope(Mapping[str, Any]):
    """The names an expression can read, without copying them for every step (`env` and
    `steps` first, then variables: plan < vars file < --var < result variables)."""

    def __init__(
        self, variables: dict[str, Any], env: dict[str, str], records: dict[str, StepRecord]
    ) -> None:
        self._variables = variables
        self._env = env
        self._records = records

    def __getitem__(self, name: str) -> Any:
        if name == "env":
            return self._env
        if name == "steps":
            return StepsView(self._records)
        return self._variables[name]

    def __contains__(self, name: object) -> bool:
        return name in ("env", "steps") or name in self._variables

    def __iter__(self) -> Iterator[str]:
        yield "env"
        yield "steps"
        yield from (k for k in self._variables if k not in ("env", "steps"))

    def __len__(self) -> int:
        return 2 + len(self._variables)


@dataclass
class PreviousStep:
    """What the previous run recorded for a step (for resume)."""

    status: str
    fingerprint: str | None
    result: Any
    result_variable: str | None
    attempts: int = 0
    duration_s: float | None = None


@dataclass
class RunSettings:
    jobs: int
    keep_going: bool = False
    yes: bool = False
    stream: bool = False
    cwd: str = "."
    env: dict[str, str] = field(default_factory=dict)
    ask: Callable[[str], Awaitable[bool]] | None = None  # approval prompt at a TTY
    services: dict[str, Any] = field(default_factory=dict)
    slots: Slots | None = None  # shared with sub-plans: at most `-j` steps of the tree at once
    budget: Budget | None = None  # this plan's limits, charged with every enclosing plan's
    prefix: str = ""  # "PARENT_STEP/" for a sub-plan: how its step ids show in messages
    parent: ParentContext | None = None  # this run, for the sub-plans its `plan` steps start


@dataclass
class Outcome:
    status: str
    reason: str
    error: str | None
    duration_s: float


class ReplanRequested(Exception):
    def __init__(self, step_id: str, error: str) -> None:
        super().__init__(error)
        self.step_id = step_id
        self.error = error


class Scheduler:
    """Runs one plan (or its selected steps) once."""

    def __init__(
        self,
        plan: Plan,
        selected: list[str],
        variables: dict[str, Any],
        executor: Executor,
        bus: EventBus,
        settings: RunSettings,
        previous: dict[str, PreviousStep] | None = None,
        replanner: Any = None,
    ) -> None:
        self.plan = plan
        self.executor = executor
        self.bus = bus
        self.settings = settings
        self.previous = previous or {}
        self.replanner = replanner
        self.variables = dict(variables)  # input variables + result variables bound so far
        self.records: dict[str, StepRecord] = {}
        self._set_steps(plan.steps, selected)
        self.budget = settings.budget or Budget(plan.limits, plan.name or "plan")
        self.slots = settings.slots or Slots(settings.jobs)
        self.stop_reason: str | None = None
        self.stop_error: str | None = None
        self.failed_any = False
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._done: asyncio.Queue[str] = asyncio.Queue()
        self._replan: ReplanRequested | None = None
        self.revisions: list[dict[str, Any]] = []
        self.replans = 0  # planner calls that returned (valid or not), against limits.max_replans

    def _set_steps(self, steps: list[Step], selected: list[str]) -> None:
        self.steps = {s.id: s for s in steps}
        self.graph = PlanGraph.build(steps)
        keep = set(selected)
        self.order = [sid for sid in self.graph.order if sid in keep]
        self.position = {sid: i for i, sid in enumerate(self.order)}
        for sid in self.order:
            self.records.setdefault(sid, StepRecord())

    # ---- the loop ------------------------------------------------------------------------

    async def run(self) -> Outcome:
        start = time.monotonic()
        try:
            while True:
                await self._run_pass()
                if self._replan is None:
                    break
                request, self._replan = self._replan, None
                if not await self._do_replan(request):
                    break
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.stop_reason = "interrupted"
        duration = round(time.monotonic() - start, 3)
        status, reason = self._verdict()
        error = self.stop_error
        if error is None and status == "failed":
            failed = [sid for sid in self.order if self.records[sid].status == "failed"]
            if failed:
                error = f"step '{failed[0]}' failed: {self.records[failed[0]].error}"
        return Outcome(status, reason, error, duration)

    def _verdict(self) -> tuple[str, str]:
        reason = self.stop_reason
        if reason == "interrupted":
            return "interrupted", "interrupted"
        if reason in ("denied", "approval_required"):
            return "blocked", reason
        if reason in ("step_budget", "replan_budget", "no_plan"):
            return "failed", reason
        if self.failed_any or reason == "step_failed":
            return "failed", "step_failed"
        return "succeeded", "completed"

    async def _run_pass(self) -> None:
        """One pass of the ready loop over the current steps (replanning starts another)."""
        deps = {sid: [d for d in self.graph.deps[sid] if d in self.position] for sid in self.order}
        sorter = graphlib.TopologicalSorter(deps)
        sorter.prepare()
        heap: list[tuple[int, str]] = []
        running = 0
        jobs = max(1, self.settings.jobs)
        stopping = False
        try:
            async with asyncio.TaskGroup() as tg:
                while sorter.is_active():
                    for sid in sorter.get_ready():
                        heapq.heappush(heap, (self.position[sid], sid))
                    settled = False
                    while heap and running < jobs and not stopping:
                        _, sid = heapq.heappop(heap)
                        # settled in an earlier pass (before a replan), or settled now
                        if self.records[sid].status != "pending" or not await self._start(sid, tg):
                            sorter.done(sid)
                            settled = True
                        else:
                            running += 1
                        if self.stop_reason or self._replan:
                            stopping = True
                    if running == 0:
                        if settled and not stopping:
                            continue
                        break
                    sid = await self._done.get()
                    running -= 1
                    sorter.done(sid)
                    if (self.stop_reason or self._replan) and not stopping:
                        stopping = True
                        if self.stop_reason:  # abort: stop the running ones too
                            for task in self._tasks.values():
                                task.cancel()
        finally:
            self._tasks.clear()

    async def _start(self, sid: str, tg: asyncio.TaskGroup) -> bool:
        """Start `sid`, or settle it at once (skipped, kept, refused). True if a task started."""
        step = self.steps[sid]
        watched = reacts_to(step)  # its `when` decides about these: a notify-on-failure step
        upstream_failed = next(
            (
                d
                for d in self.graph.deps[sid]
                if d in self.records and self.records[d].blocks_dependents and d not in watched
            ),
            None,
        )
        if upstream_failed:
            self._skip(sid, f"upstream failed: {upstream_failed}", upstream_failed=True)
            return False
        scope = self.scope()
        if step.when is not None and step.when is not True:
            try:
                cond = (
                    step.when
                    if isinstance(step.when, bool)
                    else resolve(when_source(step.when), scope, path=("when",))
                )
            except ExpressionError as exc:
                self._fail_now(sid, f"step '{sid}': {exc.message}")
                return False
            if not cond:
                self._skip(sid, "condition false")
                return False
        try:
            args = resolve_args(step.tool, step.args, scope)
        except ExpressionError as exc:
            self._fail_now(sid, f"step '{sid}': {exc.message}")
            return False
        fp = fingerprint(step.tool, args)
        prev = self.previous.get(sid)
        if (
            prev
            and prev.status == "succeeded"
            and prev.fingerprint == fp
            and not any(self.records[d].reran for d in self.graph.deps[sid] if d in self.records)
        ):
            rec = self.records[sid]
            rec.status, rec.result, rec.fingerprint = "succeeded", prev.result, fp
            rec.attempts, rec.duration_s = prev.attempts, prev.duration_s
            if step.result_variable:
                self.variables[step.result_variable] = prev.result
            self.bus.emit(
                Event(
                    "step.resumed",
                    self.plan.name or "",
                    sid,
                    {
                        "status": "succeeded",
                        "result": prev.result,
                        "fingerprint": fp,
                        "result_variable": step.result_variable,
                    },
                )
            )
            return False
        why = None
        if self.previous:
            if prev is None:
                why = "not in the previous run"
            elif prev.status != "succeeded":
                why = f"{prev.status} last time"
            elif prev.fingerprint != fp:
                why = "its tool or arguments changed"
            else:
                why = "a step it depends on ran again"
        if self.plan.needs_approval(step) and not self.settings.yes:
            ask = self.settings.ask
            if ask is None or not await ask(sid):
                self.stop_reason = "denied" if ask is not None else "approval_required"
                self.stop_error = f"approval denied for step '{self.settings.prefix}{sid}'"
                self.records[sid].status = "interrupted" if ask is not None else "pending"
                if ask is not None:
                    self.bus.emit(
                        Event(
                            "step.interrupted",
                            self.plan.name or "",
                            sid,
                            {"status": "interrupted", "attempts": 0, "duration_s": 0.0},
                        )
                    )
                return False
        self.records[sid].reran = True
        task = tg.create_task(self._run_step(sid, step, args, fp, why))
        self._tasks[sid] = task
        return True

    def scope(self) -> Scope:
        return Scope(self.variables, self.settings.env, self.records)

    def title(self, step: Step) -> str:
        """The step's title with `${...}` rendered (as written when it cannot be rendered)."""
        if not step.title or "${" not in step.title:
            return step.title or step.id
        try:
            return to_text(resolve(step.title, self.scope(), path=("title",)))
        except ExpressionError:
            return step.title

    def _skip(self, sid: str, reason: str, *, upstream_failed: bool = False) -> None:
        rec = self.records[sid]
        rec.status, rec.reran, rec.upstream_failed = "skipped", True, upstream_failed
        rec.error = reason if upstream_failed else None  # a `when` skip is no error
        self.bus.emit(
            Event(
                "step.skipped", self.plan.name or "", sid, {"status": "skipped", "reason": reason}
            )
        )

    def _fail_now(self, sid: str, error: str) -> None:
        """A step that fails before any attempt (bad expression at run time, budget)."""
        rec = self.records[sid]
        rec.reran = True
        self._finish_failure(sid, self.steps[sid], error, None, None, 0.0)

    # ---- one step ------------------------------------------------------------------------

    async def _run_step(
        self, sid: str, step: Step, args: dict[str, Any], fp: str, why: str | None = None
    ) -> None:
        rec = self.records[sid]
        name = self.plan.name or ""
        defaults = self.plan.defaults
        retries = step.retries if step.retries is not None else defaults.retries
        delay = step.retry_delay if step.retry_delay is not None else defaults.retry_delay
        timeout = step.timeout if step.timeout is not None else defaults.timeout
        started = time.monotonic()
        rec.fingerprint = fp
        ctx = ToolContext(
            step_id=sid,
            cwd=self.settings.cwd,
            env=self.settings.env,
            timeout=timeout,
            on_output=self._output_cb(sid) if self.settings.stream else None,
            services=self.settings.services,
            parent=self.settings.parent,
        )
        try:
            await self.slots.acquire(step.tool)  # before the step starts: not part of its timeout
        except asyncio.CancelledError:
            self._done.put_nowait(sid)  # stopped before it started: it stays pending
            raise
        try:
            while True:
                refusal = self._charge_budget(step)
                if refusal:
                    self.stop_reason = "step_budget"
                    self.stop_error = f"step '{self.settings.prefix}{sid}': {refusal}"
                    self._finish_failure(
                        sid, step, refusal, None, None, time.monotonic() - started, budget=True
                    )
                    return
                rec.attempts += 1
                rec.status = "running"
                self.bus.emit(
                    Event(
                        "step.started",
                        name,
                        sid,
                        {
                            "status": "running",
                            "attempt": rec.attempts,
                            "fingerprint": fp,
                            "tool": step.tool,
                            "title": self.title(step),
                            **({"why": why} if why and rec.attempts == 1 else {}),
                        },
                    )
                )
                detail: str | None = None
                partial: Any = None
                try:
                    if timeout:
                        async with asyncio.timeout(timeout):
                            result = await self._call(step, args, ctx)
                    else:
                        result = await self._call(step, args, ctx)
                except TimeoutError:
                    error = f"timed out after {_fmt_seconds(timeout or 0)}"
                    if "." in step.tool:  # name the MCP server and tool that did not answer
                        server, _, tool = step.tool.partition(".")
                        error = f"MCP server '{server}' tool '{tool}': {error}"
                except RunStopped as exc:  # a sub-plan's gate or a shared budget stops the run
                    self._stopped_by_sub_plan(sid, step, exc, time.monotonic() - started)
                    return
                except ToolFailed as exc:
                    error, detail, partial = exc.message, exc.detail, exc.result
                except (asyncio.CancelledError, KeyboardInterrupt):
                    raise
                except Exception as exc:  # a tool's unexpected error still fails only its step
                    error = f"{type(exc).__name__}: {exc}"
                else:
                    self._succeed(sid, step, result, time.monotonic() - started, ctx.output)
                    return
                if rec.attempts <= retries:
                    self.bus.emit(
                        Event(
                            "step.retrying",
                            name,
                            sid,
                            {"attempt": rec.attempts, "error": error, "delay_s": delay},
                        )
                    )
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                self._finish_failure(sid, step, error, detail, partial, time.monotonic() - started)
                return
        except asyncio.CancelledError:
            rec.status = "interrupted"
            rec.duration_s = round(time.monotonic() - started, 3)
            self.bus.emit(
                Event(
                    "step.interrupted",
                    name,
                    sid,
                    {
                        "status": "interrupted",
                        "attempts": rec.attempts,
                        "duration_s": rec.duration_s,
                    },
                )
            )
            raise
        finally:
            self.slots.release(step.tool)
            self._done.put_nowait(sid)

    def _stopped_by_sub_plan(self, sid: str, step: Step, exc: RunStopped, duration: float) -> None:
        self.stop_reason, self.stop_error = exc.reason, exc.message
        if exc.reason == "step_budget":
            self._finish_failure(sid, step, exc.message, None, None, duration, budget=True)
            return
        rec = self.records[sid]
        rec.status, rec.duration_s = "interrupted", round(duration, 3)
        self.bus.emit(
            Event(
                "step.interrupted",
                self.plan.name or "",
                sid,
                {"status": "interrupted", "attempts": rec.attempts, "duration_s": rec.duration_s},
            )
        )

    async def _call(self, step: Step, args: dict[str, Any], ctx: ToolContext) -> Any:
        if step.resources:
            ctx.services = {**ctx.services, "resources": step.resources}
        return await self.executor.call(step.tool, args, ctx)

    def _output_cb(self, sid: str) -> Callable[[str, str], None]:
        name = self.plan.name or ""

        def emit(stream: str, line: str) -> None:
            self.bus.emit(Event("step.output", name, sid, {"stream": stream, "line": line}))

        return emit

    def _charge_budget(self, step: Step) -> str | None:
        return self.budget.charge(step.tool)

    def _succeed(
        self, sid: str, step: Step, result: Any, duration: float, printed: str | None = None
    ) -> None:
        rec = self.records[sid]
        rec.status, rec.result, rec.error = "succeeded", result, None
        rec.duration_s = round(duration, 3)
        if step.result_variable:
            self.variables[step.result_variable] = result
        self.bus.emit(
            Event(
                "step.succeeded",
                self.plan.name or "",
                sid,
                {
                    "status": "succeeded",
                    "attempts": rec.attempts,
                    "duration_s": rec.duration_s,
                    "result": result,
                    "fingerprint": rec.fingerprint,
                    "output": _output_of(result) or printed,
                    "result_variable": step.result_variable,
                },
            )
        )

    def _finish_failure(
        self,
        sid: str,
        step: Step,
        error: str,
        detail: str | None,
        partial: Any,
        duration: float,
        *,
        budget: bool = False,
    ) -> None:
        rec = self.records[sid]
        policy = step.on_failure or self.plan.defaults.on_failure
        if budget:
            policy = OnFailure.abort
        rec.error, rec.duration_s = error, round(duration, 3)
        if policy == OnFailure.ignore:
            rec.status, rec.result = "ignored", None
            if step.result_variable:
                self.variables[step.result_variable] = None
        else:
            rec.status, rec.result = "failed", partial
            self.failed_any = True
        self.bus.emit(
            Event(
                "step.failed",
                self.plan.name or "",
                sid,
                {
                    "status": rec.status,
                    "attempts": rec.attempts,
                    "duration_s": rec.duration_s,
                    "error": error,
                    "detail": detail,
                    "result": rec.result,
                    "fingerprint": rec.fingerprint,
                    "result_variable": step.result_variable,
                    "output": _output_of(partial),
                },
            )
        )
        if policy == OnFailure.replan and self.replanner is not None and not budget:
            self._replan = ReplanRequested(sid, error)
        elif policy == OnFailure.replan:
            if not self.settings.keep_going:
                self.stop_reason = self.stop_reason or "step_failed"
        elif policy == OnFailure.abort and not self.settings.keep_going and not budget:
            self.stop_reason = self.stop_reason or "step_failed"

    async def _do_replan(self, request: ReplanRequested) -> bool:
        """Ask the planner for new steps; True to run another pass. Filled by planrun.replan."""
        result: bool = await self.replanner(self, request)
        return result


def _output_of(result: Any) -> str | None:
    if isinstance(result, dict) and ("stdout" in result or "stderr" in result):
        text = str(result.get("stdout") or "") + str(result.get("stderr") or "")
        return text or None
    return None


def _fmt_seconds(s: float) -> str:
    return f"{s:g}s"


def result_document(
    plan_name: str,
    order: list[str],
    records: dict[str, StepRecord],
    outcome: Outcome,
    variables: dict[str, Any],
) -> dict[str, Any]:
    """The SPEC §8 run document."""
    return {
        "plan": plan_name,
        "status": outcome.status,
        "reason": outcome.reason,
        "duration_s": outcome.duration_s,
        "error": outcome.error,
        "steps": [
            {
                "id": sid,
                "status": records[sid].status,
                "attempts": records[sid].attempts,
                "duration_s": records[sid].duration_s,
                "result": records[sid].result,
                "error": records[sid].error,
            }
            for sid in order
        ],
        "variables": variables,
    }
