"""The scheduler in-process, with a scripted executor: resume decisions, stops, replanning.

The executor is fake on purpose (it is the seam the scheduler talks to); the scheduler,
the resume rules and the event bus are the real ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from planrun.plan import model
from planrun.plan.definition import Plan
from planrun.run.events import (
    EventBus,
    PlanDiff,
    RunEvent,
    StepResumed,
    StepStarted,
    StepSucceeded,
)
from planrun.run.parent import Budget, MaskChain, ParentContext, Slots
from planrun.run.planner import ReplanRequest, ReplanStop, Revision
from planrun.run.resume import (
    CHANGED,
    CONDITION_CHANGED,
    DEPENDENCY_RAN,
    HELD_SECRET,
    NOT_IN_PREVIOUS,
    Seen,
    plan_resume,
    why_run_again,
)
from planrun.run.scheduler import RunSettings, Scheduler
from planrun.run.scope import fingerprint
from planrun.state.model import StepState
from planrun.status import Reason, Status
from planrun.tools.base import ToolContext, ToolFailed

Script = Callable[[dict[str, Any]], Awaitable[Any]]


class FakeExecutor:
    """Runs each step's scripted coroutine (by step id); records the calls."""

    def __init__(self, scripts: dict[str, Script]) -> None:
        self.scripts = scripts
        self.calls: list[str] = []

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any:
        self.calls.append(ctx.step_id)
        script = self.scripts.get(ctx.step_id)
        return await script(args) if script is not None else args.get("value")


def fails(message: str) -> Script:
    async def run(args: dict[str, Any]) -> Any:
        raise ToolFailed(message)

    return run


def waits_for(event: asyncio.Event, cancelled: list[str], name: str) -> Script:
    async def run(args: dict[str, Any]) -> Any:
        try:
            await event.wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return "done"

    return run


def make_plan(steps: list[dict[str, Any]], **extra: Any) -> Plan:
    return model.to_runtime(model.Plan.model_validate({"name": "t", "steps": steps, **extra}))


def schedule(
    plan: Plan,
    executor: FakeExecutor,
    *,
    jobs: int = 4,
    variables: dict[str, Any] | None = None,
    **kw: Any,
) -> tuple[Scheduler, list[RunEvent]]:
    events: list[RunEvent] = []
    bus = EventBus()
    bus.subscribe(events.append)
    masks = MaskChain()
    mask = kw.pop("mask", None)
    if mask is not None:
        masks.add(mask)
    here = ParentContext(
        prefix="",
        plan=plan.name or "plan",
        plan_stack=(),
        cwd=".",
        yes=kw.pop("yes", True),
        ask=None,
        policy=plan.policy,
        jobs=jobs,
        slots=Slots(jobs),
        budget=Budget(plan.limits, plan.name or "plan"),
        masks=masks,
        emit=bus.emit,
        executor=executor,
        keep_going=kw.pop("keep_going", False),
    )
    settings = RunSettings(here, ask=kw.pop("ask", None), cache=kw.pop("cache", None))
    sched = Scheduler(
        plan,
        [s.id for s in plan.steps],
        {} if variables is None else variables,
        executor,
        bus,
        settings,
        **kw,
    )
    return sched, events


def statuses(sched: Scheduler) -> dict[str, str]:
    return {sid: str(sched.records[sid].status) for sid in sched.order}


# ---- why_run_again: one reason per step ----------------------------------------------------


def test_why_run_again_gives_one_reason_in_a_fixed_order() -> None:
    ok = StepState("succeeded", fingerprint="f", result_masked=True)
    assert why_run_again(None, Seen(True, "f"), dependency_runs=True) == NOT_IN_PREVIOUS
    assert why_run_again(ok, Seen(True, "g"), dependency_runs=True) == DEPENDENCY_RAN
    assert why_run_again(ok, Seen(True, "g"), dependency_runs=False) == CHANGED
    assert why_run_again(ok, Seen(False), dependency_runs=False) == CONDITION_CHANGED
    assert why_run_again(ok, Seen(True, "f"), dependency_runs=False) is None
    held = why_run_again(ok, Seen(True, "f"), dependency_runs=False, read_by_a_step_to_run=True)
    assert held == HELD_SECRET
    failed = StepState("failed", fingerprint="f")
    assert why_run_again(failed, Seen(True, "f"), dependency_runs=False) == "failed last time"
    skipped = StepState("skipped", reason="condition false")
    assert why_run_again(skipped, Seen(False), dependency_runs=False) is None
    assert why_run_again(skipped, Seen(True), dependency_runs=False) == CONDITION_CHANGED
    ignored = StepState("ignored", fingerprint="f", error="boom")
    assert why_run_again(ignored, Seen(True, "f"), dependency_runs=False) is None


def _previous(plan: Plan, **status: str) -> dict[str, StepState]:
    out = {}
    for step in plan.steps:
        st = status.get(step.id, "succeeded")
        fp = fingerprint(step.tool, step.args)
        reason = "condition false" if st == "skipped" else None
        out[step.id] = StepState(
            st,
            fingerprint=fp,
            result=step.args.get("value"),
            result_variable=step.result_variable,
            attempts=1,
            duration_s=0.1,
            reason=reason,
        )
    return out


def test_resume_keeps_steps_below_a_condition_skip_and_an_ignored_failure() -> None:
    plan = make_plan(
        [
            {"id": "gate", "tool": "echo", "args": {"value": 1}, "when": "${go}"},
            {"id": "below", "tool": "echo", "args": {"value": 2}, "depends_on": ["gate"]},
            {"id": "flaky", "tool": "echo", "args": {"value": 3}, "on_failure": "ignore"},
            {"id": "after", "tool": "echo", "args": {"value": 4}, "depends_on": ["flaky"]},
            {"id": "last", "tool": "echo", "args": {"value": 5}},
        ],
        variables={"go": False},
    )
    from planrun.plan.graph import PlanGraph

    prev = _previous(plan, gate="skipped", flaky="ignored", last="failed")
    steps = {s.id: s for s in plan.steps}
    decided = plan_resume(steps, list(steps), PlanGraph.build(plan.steps), prev, {"go": False}, {})
    assert set(decided.kept) == {"gate", "below", "flaky", "after"}
    assert decided.reasons == {"last": "failed last time"}
    ex = FakeExecutor({})
    sched, events = schedule(plan, ex, variables={"go": False}, resume=decided)
    outcome = asyncio.run(sched.run())
    assert outcome.status == Status.SUCCEEDED and ex.calls == ["last"]
    assert statuses(sched) == {
        "gate": "skipped",
        "below": "succeeded",
        "flaky": "ignored",
        "after": "succeeded",
        "last": "succeeded",
    }
    resumed = [e.step for e in events if isinstance(e, StepResumed)]
    assert resumed == ["gate", "below", "flaky", "after"]  # settled before anything ran
    started = [e for e in events if isinstance(e, StepStarted)]
    assert started[0].reason == "failed last time" and started[0].again


def test_a_masked_result_read_by_a_step_to_run_runs_its_producer_again() -> None:
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": "x"}, "result_variable": "got"},
            {"id": "b", "tool": "echo", "args": {"value": "${got}"}},
            {"id": "c", "tool": "echo", "args": {"value": "${got}"}, "result_variable": "c2"},
            {"id": "d", "tool": "echo", "args": {"value": 1}},
        ]
    )
    from planrun.plan.graph import PlanGraph

    steps = {s.id: s for s in plan.steps}
    prev = {
        "a": StepState(
            "succeeded",
            fingerprint=fingerprint("echo", {"value": "x"}),
            result="***",
            result_variable="got",
            result_masked=True,
        ),
        "b": StepState("failed", fingerprint=None),
        "c": StepState(
            "succeeded",
            fingerprint=fingerprint("echo", {"value": "***"}),
            result="***",
            result_variable="c2",
        ),
        "d": StepState("succeeded", fingerprint=fingerprint("echo", {"value": 1}), result=1),
    }
    decided = plan_resume(steps, list(steps), PlanGraph.build(plan.steps), prev, {}, {})
    assert decided.reasons == {
        "a": HELD_SECRET,
        "b": "failed last time",
        "c": DEPENDENCY_RAN,  # kept by its fingerprint, but what it depends on runs again
    }
    assert set(decided.kept) == {"d"}


# ---- stopping ------------------------------------------------------------------------------


def test_kept_steps_are_settled_even_when_the_run_aborts_at_once() -> None:
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": "A"}, "result_variable": "ra"},
            {"id": "c", "tool": "echo", "args": {"value": "${ra}-c"}, "depends_on": ["a"]},
            {"id": "d", "tool": "echo", "args": {"value": "D2"}},
        ]
    )
    from planrun.plan.graph import PlanGraph

    steps = {s.id: s for s in plan.steps}
    prev = {
        "a": StepState(
            "succeeded",
            fingerprint=fingerprint("echo", {"value": "A"}),
            result="A",
            result_variable="ra",
        ),
        "c": StepState(
            "succeeded", fingerprint=fingerprint("echo", {"value": "A-c"}), result="A-c"
        ),
        "d": StepState("succeeded", fingerprint=fingerprint("echo", {"value": "D"}), result="D"),
    }
    decided = plan_resume(steps, list(steps), PlanGraph.build(plan.steps), prev, {}, {})
    sched, _ = schedule(plan, FakeExecutor({"d": fails("boom")}), jobs=1, resume=decided)
    outcome = asyncio.run(sched.run())
    assert outcome.reason == Reason.STEP_FAILED
    assert statuses(sched) == {"a": "succeeded", "c": "succeeded", "d": "failed"}
    assert sched.records["c"].result == "A-c"


def test_a_no_at_the_prompt_interrupts_the_running_steps() -> None:
    plan = make_plan(
        [
            {"id": "slow", "tool": "echo"},
            {"id": "ready", "tool": "echo"},
            {"id": "deploy", "tool": "echo", "approval": True, "depends_on": ["ready"]},
        ]
    )
    release = asyncio.Event()
    cancelled: list[str] = []

    async def ask(step_id: str, question: str = "") -> bool:
        return False

    async def main() -> tuple[Any, Scheduler]:
        ex = FakeExecutor({"slow": waits_for(release, cancelled, "slow")})
        sched, _ = schedule(plan, ex, yes=False, ask=ask)
        return await sched.run(), sched

    outcome, sched = asyncio.run(asyncio.wait_for(main(), 60))
    assert (outcome.status, outcome.reason) == (Status.BLOCKED, Reason.DENIED)
    assert cancelled == ["slow"]
    assert statuses(sched) == {"slow": "interrupted", "ready": "succeeded", "deploy": "interrupted"}


def test_an_expression_failing_at_start_with_abort_stops_running_steps() -> None:
    plan = make_plan(
        [
            {"id": "slow", "tool": "echo"},
            {"id": "ready", "tool": "echo"},
            {"id": "bad", "tool": "echo", "args": {"value": "${missing}"}, "depends_on": ["ready"]},
        ]
    )
    cancelled: list[str] = []

    async def main() -> tuple[Any, Scheduler]:
        started = asyncio.Event()

        async def slow(args: dict[str, Any]) -> Any:
            started.set()
            return await waits_for(asyncio.Event(), cancelled, "slow")(args)

        async def ready(args: dict[str, Any]) -> Any:
            await started.wait()

        sched, _ = schedule(plan, FakeExecutor({"slow": slow, "ready": ready}))
        return await sched.run(), sched

    outcome, sched = asyncio.run(asyncio.wait_for(main(), 60))
    assert outcome.reason == Reason.STEP_FAILED and cancelled == ["slow"]
    assert statuses(sched) == {"slow": "interrupted", "ready": "succeeded", "bad": "failed"}


# ---- scheduling and failure policies --------------------------------------------------------


def test_a_step_starts_when_its_own_dependencies_finish_not_in_waves() -> None:
    # b1 finishes only once a2 has started: a wave barrier (a2 waiting for b1) would deadlock.
    plan = make_plan(
        [
            {"id": "a1", "tool": "echo"},
            {"id": "b1", "tool": "echo"},
            {"id": "a2", "tool": "echo", "depends_on": ["a1"]},
            {"id": "b2", "tool": "echo", "depends_on": ["b1"]},
        ]
    )

    async def main() -> tuple[Any, Scheduler]:
        a2_started = asyncio.Event()

        async def b1(args: dict[str, Any]) -> Any:
            await a2_started.wait()

        async def a2(args: dict[str, Any]) -> Any:
            a2_started.set()

        sched, _ = schedule(plan, FakeExecutor({"b1": b1, "a2": a2}))
        return await sched.run(), sched

    outcome, sched = asyncio.run(asyncio.wait_for(main(), 60))
    assert outcome.status == Status.SUCCEEDED
    assert set(statuses(sched).values()) == {"succeeded"}


def test_on_failure_continue_skips_the_dependents_only() -> None:
    plan = make_plan(
        [
            {"id": "bad", "tool": "echo", "on_failure": "continue"},
            {"id": "child", "tool": "echo", "depends_on": ["bad"]},
            {"id": "grandchild", "tool": "echo", "depends_on": ["child"]},
            {"id": "other", "tool": "echo"},
        ]
    )
    ex = FakeExecutor({"bad": fails("command exited with code 3")})
    sched, _ = schedule(plan, ex)
    outcome = asyncio.run(sched.run())
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.STEP_FAILED)
    assert statuses(sched) == {
        "bad": "failed",
        "child": "skipped",
        "grandchild": "skipped",
        "other": "succeeded",
    }
    assert sched.records["bad"].error == "command exited with code 3"
    assert sorted(ex.calls) == ["bad", "other"]


def test_on_failure_ignore_succeeds_with_a_null_result() -> None:
    plan = make_plan(
        [
            {"id": "bad", "tool": "echo", "on_failure": "ignore", "result_variable": "r"},
            {"id": "next", "tool": "echo", "args": {"value": "${r}"}, "depends_on": ["bad"]},
        ]
    )
    sched, _ = schedule(plan, FakeExecutor({"bad": fails("no")}))
    outcome = asyncio.run(sched.run())
    assert outcome.status == Status.SUCCEEDED
    assert statuses(sched) == {"bad": "ignored", "next": "succeeded"}
    assert sched.records["bad"].error == "no" and sched.records["next"].result is None


def test_abort_interrupts_the_running_steps_and_starts_no_more() -> None:
    plan = make_plan(
        [
            {"id": "long", "tool": "echo"},
            {"id": "bad", "tool": "echo"},
            {"id": "later", "tool": "echo", "depends_on": ["bad"]},
        ]
    )
    cancelled: list[str] = []

    async def main() -> tuple[Any, Scheduler]:
        started = asyncio.Event()

        async def long(args: dict[str, Any]) -> Any:
            started.set()
            return await waits_for(asyncio.Event(), cancelled, "long")(args)

        async def bad(args: dict[str, Any]) -> Any:
            await started.wait()  # fails while `long` runs
            raise ToolFailed("command exited with code 1")

        sched, _ = schedule(plan, FakeExecutor({"long": long, "bad": bad}))
        return await sched.run(), sched

    outcome, sched = asyncio.run(asyncio.wait_for(main(), 60))
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.STEP_FAILED)
    assert cancelled == ["long"]
    assert statuses(sched) == {"long": "interrupted", "bad": "failed", "later": "pending"}


def test_keep_going_turns_abort_into_continue() -> None:
    plan = make_plan(
        [
            {"id": "bad", "tool": "echo"},
            {"id": "after", "tool": "echo", "depends_on": ["bad"]},
            {"id": "other", "tool": "echo"},
        ]
    )
    sched, _ = schedule(plan, FakeExecutor({"bad": fails("no")}), jobs=1, keep_going=True)
    outcome = asyncio.run(sched.run())
    assert outcome.reason == Reason.STEP_FAILED
    assert statuses(sched) == {"bad": "failed", "after": "skipped", "other": "succeeded"}


# ---- replanning ----------------------------------------------------------------------------


def test_two_replan_failures_in_one_pass_reach_the_planner_together() -> None:
    plan = make_plan(
        [
            {"id": "x", "tool": "echo", "on_failure": "replan"},
            {"id": "y", "tool": "echo", "on_failure": "replan"},
            {"id": "z", "tool": "echo", "depends_on": ["x", "y"]},
        ]
    )
    asked: list[ReplanRequest] = []

    async def replanner(request: ReplanRequest) -> Revision | ReplanStop:
        asked.append(request)
        new = make_plan([{"id": "fix", "tool": "echo", "args": {"value": 1}}])
        record = {
            "revision": 1,
            "diff": {"removed": ["x", "y", "z"], "added": ["fix"], "revised": []},
            "error": request.failures[0].error,
            "failed_step": request.failures[0].step_id,
            "steps": [{"id": "fix", "tool": "echo", "args": {"value": 1}}],
        }
        return Revision(new, record, 1)

    both = asyncio.Event()
    seen: list[str] = []

    def meet(name: str) -> Script:
        async def run(args: dict[str, Any]) -> Any:
            seen.append(name)
            if len(seen) == 2:
                both.set()
            await both.wait()
            raise ToolFailed(f"{name} broke")

        return run

    ex = FakeExecutor({"x": meet("x"), "y": meet("y")})
    sched, events = schedule(plan, ex, replanner=replanner)
    outcome = asyncio.run(asyncio.wait_for(sched.run(), 60))
    assert outcome.status == Status.SUCCEEDED
    (request,) = asked
    assert sorted(f.step_id for f in request.failures) == ["x", "y"]
    assert [e.added for e in events if isinstance(e, PlanDiff)] == [["fix"]]
    assert sched.budget.replans == 1 and statuses(sched) == {"fix": "succeeded"}


def test_a_replan_stop_ends_the_run_with_its_reason() -> None:
    plan = make_plan([{"id": "x", "tool": "echo", "on_failure": "replan"}])

    async def replanner(request: ReplanRequest) -> Revision | ReplanStop:
        return ReplanStop(Reason.NO_PLAN, "the planner returned no steps", 1)

    sched, _ = schedule(plan, FakeExecutor({"x": fails("no")}), replanner=replanner)
    outcome = asyncio.run(sched.run())
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.NO_PLAN)
    assert outcome.error == "the planner returned no steps"


def test_statuses_are_one_str_enum_written_as_plain_words() -> None:
    import json

    assert json.dumps({"s": Status.CACHED, "r": Reason.STEP_BUDGET}) == (
        '{"s": "cached", "r": "step_budget"}'
    )
    assert Status("interrupted") is Status.INTERRUPTED and f"{Status.SKIPPED}" == "skipped"


def test_result_variables_are_bound_into_the_callers_variables() -> None:
    """The run's variables dict is the caller's: a masker made before the run watches it."""
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": 1}, "result_variable": "x"},
            {"id": "b", "tool": "echo", "args": {"value": "${x}"}},
        ]
    )
    variables: dict[str, Any] = {"y": 0}
    sched, _ = schedule(plan, FakeExecutor({}), variables=variables)
    outcome = asyncio.run(sched.run())
    assert outcome.status == Status.SUCCEEDED and sched.records["b"].result == 1
    assert variables == {"y": 0, "x": 1}


def test_a_step_s_events_are_made_with_their_title_and_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each event of a plain step leaves with its title and time, made with them: not copied
    # once by the scheduler to add the title and once more by the bus to stamp the time.
    remade: list[dict[str, Any]] = []
    for kind in (StepStarted, StepSucceeded):

        def counting(event: Any, _replace: Any = kind._replace, **changes: Any) -> Any:
            remade.append(changes)
            return _replace(event, **changes)

        monkeypatch.setattr(kind, "_replace", counting)
    plan = make_plan([{"id": "a", "tool": "echo", "args": {"value": 1}}])
    sched, events = schedule(plan, FakeExecutor({}))
    asyncio.run(sched.run())
    shown = [(e.event, e.title, e.ts > 0) for e in events if e.step == "a"]
    assert shown == [("step.started", "a", True), ("step.succeeded", "a", True)]
    assert remade == []


def test_a_fingerprint_is_the_documented_hash_and_makes_no_json_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # sha256 of json.dumps([tool, args], sort_keys, not ASCII-only, str for the rest), cut to
    # 16 hex digits (state files hold it: it must not change), by one encoder for the run:
    # not a json.JSONEncoder made for every step, as json.dumps with options does.
    import hashlib
    import json

    args = {"cmd": "écho ${x}", "env": {"B": 2, "A": [1.5, None]}, "when": object()}
    doc = json.dumps(["shell", args], sort_keys=True, ensure_ascii=False, default=str)
    expected = hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    made: list[Any] = []
    monkeypatch.setattr(json.JSONEncoder, "__init__", _counted(json.JSONEncoder.__init__, made))
    assert fingerprint("shell", args) == expected
    assert fingerprint("shell", {"cmd": "\ud800"}) == fingerprint("shell", {"cmd": "\ud800"})
    assert made == []


def _counted(init: Any, made: list[Any]) -> Any:
    def counting(self: Any, *a: Any, **kw: Any) -> None:
        made.append(kw)
        init(self, *a, **kw)

    return counting
