"""Resume and replan rules at the scheduler, with a scripted executor and a scripted planner.

A first run is a real scheduler run; what it leaves (its step records, as the state file
keeps them) is what the resume rules read; the resume is another real scheduler run. The
planner's answers go through the real revision check and budget (`replan._replan`); only
the transport (a command, an MCP tool) is replaced by a scripted `ask`. The end-to-end
layer (tests/test_resume*.py, tests/test_replan.py) keeps a real resume after a real
failure, a real planner command and the kill -9 harnesses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from planrun.masking import Masker
from planrun.plan.definition import Plan
from planrun.plan.graph import PlanGraph
from planrun.run.events import PlanDiff, StepResumed, StepStarted
from planrun.run.planner import ReplanRequest, ReplanStop, Revision
from planrun.run.replan import PlannerError, _replan
from planrun.run.resume import (
    CHANGED,
    CONDITION_CHANGED,
    DEPENDENCY_RAN,
    HELD_SECRET,
    NOT_IN_PREVIOUS,
    plan_resume,
)
from planrun.run.revision_check import checked_revision
from planrun.run.scheduler import Scheduler
from planrun.state.model import StepState
from planrun.status import Reason, Status
from tests.test_scheduler import FakeExecutor, fails, make_plan, schedule, statuses

Ask = Callable[[dict[str, Any]], Awaitable[Any]]


def previous_of(sched: Scheduler, mask: Callable[[Any], Any] | None = None) -> dict[str, StepState]:
    """What the state file keeps of a scheduler run, as `runstate.previous_steps` reads it
    back: the result as shown (secrets masked), the step's result variable."""
    out = {}
    for sid in sched.report_order():  # foreach instances too, each under its own id
        rec = sched.records[sid]
        result = mask(rec.result) if mask is not None else rec.result
        out[sid] = StepState(
            str(rec.status),
            fingerprint=rec.fingerprint,
            result=result,
            result_variable=sched.steps[sid].result_variable,
            attempts=rec.attempts,
            duration_s=rec.duration_s,
            error=rec.error,
            reason=rec.reason,
            result_masked=rec.result_masked,
        )
    return out


def resume(
    plan: Plan,
    previous: dict[str, StepState],
    executor: FakeExecutor,
    *,
    variables: dict[str, Any] | None = None,
    mask: Callable[[Any], Any] | None = None,
    **kw: Any,
) -> tuple[Scheduler, list[Any]]:
    """A resumed run: the real resume decision, then the real scheduler."""
    steps = {s.id: s for s in plan.steps}
    graph = PlanGraph.build(plan.steps)
    decided = plan_resume(steps, list(steps), graph, previous, dict(variables or {}), {}, mask)
    return schedule(plan, executor, variables=variables, resume=decided, mask=mask, **kw)


def run(sched: Scheduler) -> Any:
    return asyncio.run(asyncio.wait_for(sched.run(), 60))


def started(events: list[Any]) -> dict[str, str]:
    """Step id -> the reason its `step.started` event gives (empty: a first run)."""
    return {e.step: e.reason or "" for e in events if isinstance(e, StepStarted)}


def resumed(events: list[Any]) -> list[str]:
    return [e.step for e in events if isinstance(e, StepResumed)]


# ---- what runs again -----------------------------------------------------------------------

CHAIN = [
    {"id": "a", "tool": "echo", "args": {"value": "A"}},
    {"id": "b", "tool": "echo", "args": {"value": "B"}, "depends_on": ["a"]},
    {"id": "c", "tool": "echo", "args": {"value": "C"}, "depends_on": ["b"]},
]


def test_after_a_failure_only_the_failed_step_and_what_is_below_it_run_again() -> None:
    plan = make_plan(CHAIN)
    first, _ = schedule(plan, FakeExecutor({"b": fails("command exited with code 1")}))
    assert run(first).reason == Reason.STEP_FAILED
    assert statuses(first) == {"a": "succeeded", "b": "failed", "c": "pending"}
    ex = FakeExecutor({})
    sched, events = resume(plan, previous_of(first), ex)
    outcome = run(sched)
    assert outcome.status == Status.SUCCEEDED and ex.calls == ["b", "c"]
    assert started(events) == {"b": "failed last time", "c": DEPENDENCY_RAN}
    assert resumed(events) == ["a"] and sched.records["a"].kept
    # a finished, successful run resumed runs nothing
    ex = FakeExecutor({})
    again, events = resume(plan, previous_of(sched), ex)
    assert run(again).status == Status.SUCCEEDED and ex.calls == []
    assert resumed(events) == ["a", "b", "c"]


def test_after_an_interruption_the_interrupted_step_and_what_is_below_it_run_again() -> None:
    plan = make_plan(CHAIN)

    async def interrupted() -> Scheduler:
        going = asyncio.Event()

        async def b(args: dict[str, Any]) -> Any:
            going.set()
            await asyncio.Event().wait()  # until cancelled: the run is interrupted inside b

        sched, _ = schedule(plan, FakeExecutor({"b": b}))
        task = asyncio.create_task(sched.run())
        await going.wait()
        task.cancel()
        assert (await task).status == Status.INTERRUPTED
        return sched

    first = asyncio.run(asyncio.wait_for(interrupted(), 60))
    assert statuses(first) == {"a": "succeeded", "b": "interrupted", "c": "pending"}
    ex = FakeExecutor({})
    sched, events = resume(plan, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["b", "c"]
    assert started(events) == {"b": "interrupted last time", "c": DEPENDENCY_RAN}


def test_a_changed_argument_runs_that_step_and_its_dependents_only() -> None:
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": "a"}},
            {"id": "b", "tool": "echo", "args": {"value": "b-${greeting}"}},
            {"id": "c", "tool": "echo", "args": {"value": "c"}, "depends_on": ["b"]},
            {"id": "d", "tool": "echo", "args": {"value": "d"}, "depends_on": ["a"]},
        ]
    )
    first, _ = schedule(plan, FakeExecutor({}), variables={"greeting": "hi"})
    assert run(first).status == Status.SUCCEEDED
    ex = FakeExecutor({})
    sched, events = resume(plan, previous_of(first), ex, variables={"greeting": "hello"})
    assert run(sched).status == Status.SUCCEEDED
    assert ex.calls == ["b", "c"]
    assert started(events) == {"b": CHANGED, "c": DEPENDENCY_RAN}
    assert sched.records["b"].result == "b-hello" and sorted(resumed(events)) == ["a", "d"]


def test_a_step_reading_an_upstream_result_that_changed_runs_again_with_the_new_value() -> None:
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": "A"}, "result_variable": "ra"},
            {"id": "b", "tool": "echo", "args": {"value": "${ra}-b"}},  # a data dependency only
            {"id": "other", "tool": "echo", "args": {"value": "o"}},
        ]
    )
    first, _ = schedule(plan, FakeExecutor({"a": fails("flaky")}), jobs=1, keep_going=True)
    run(first)
    assert statuses(first) == {"a": "failed", "b": "skipped", "other": "succeeded"}

    async def a(args: dict[str, Any]) -> Any:
        return "A2"  # a different result this time

    ex = FakeExecutor({"a": a})
    sched, events = resume(plan, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["a", "b"]
    assert started(events) == {"a": "failed last time", "b": DEPENDENCY_RAN}
    assert sched.records["b"].result == "A2-b" and resumed(events) == ["other"]


GATED = [
    {"id": "gate", "tool": "echo", "args": {"value": "g"}, "when": "${go}"},
    {"id": "below", "tool": "echo", "args": {"value": "b"}, "depends_on": ["gate"]},
    {"id": "free", "tool": "echo", "args": {"value": "f"}},
]


def test_a_condition_turning_true_runs_the_step_and_what_depends_on_it() -> None:
    plan = make_plan(GATED)
    first, _ = schedule(plan, FakeExecutor({}), variables={"go": False})
    assert run(first).status == Status.SUCCEEDED
    assert statuses(first) == {"gate": "skipped", "below": "succeeded", "free": "succeeded"}
    ex = FakeExecutor({})
    sched, events = resume(plan, previous_of(first), ex, variables={"go": True})
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["gate", "below"]
    assert started(events) == {"gate": CONDITION_CHANGED, "below": DEPENDENCY_RAN}


def test_a_condition_turning_false_skips_the_step_now_and_runs_its_dependents() -> None:
    plan = make_plan(GATED)
    first, _ = schedule(plan, FakeExecutor({}), variables={"go": True})
    assert run(first).status == Status.SUCCEEDED
    ex = FakeExecutor({})
    sched, events = resume(plan, previous_of(first), ex, variables={"go": False})
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["below"]
    assert sched.records["gate"].status == Status.SKIPPED and resumed(events) == ["free"]
    # unchanged (still false): nothing runs, the skip is kept as a skip
    ex = FakeExecutor({})
    again, _ = resume(plan, previous_of(sched), ex, variables={"go": False})
    assert run(again).status == Status.SUCCEEDED and ex.calls == []
    assert statuses(again)["gate"] == "skipped"


def test_a_masked_result_read_by_a_step_still_to_run_is_produced_again_with_the_real_value() -> (
    None
):
    variables = {"token": "s3cret-value"}
    plan = make_plan(
        [
            {
                "id": "a",
                "tool": "echo",
                "args": {"value": "hdr-${token}"},
                "result_variable": "got",
            },
            {"id": "b", "tool": "echo", "args": {"value": "${got}"}, "on_failure": "continue"},
            {"id": "c", "tool": "echo", "args": {"value": "use ${token}"}},
        ],
        secrets=["token"],
        variables=variables,
    )
    mask = Masker(["token"], variables)
    first, _ = schedule(
        plan, FakeExecutor({"b": fails("not yet")}), jobs=1, variables=variables, mask=mask
    )
    run(first)
    previous = previous_of(first, mask)
    assert previous["a"].result == "hdr-***" and previous["a"].result_masked
    seen: list[Any] = []

    async def b(args: dict[str, Any]) -> Any:
        seen.append(args["value"])

    ex = FakeExecutor({"b": b})
    sched, events = resume(plan, previous, ex, variables=variables, mask=mask, jobs=1)
    assert run(sched).status == Status.SUCCEEDED
    assert seen == ["hdr-s3cret-value"]  # never hdr-***
    # a runs again (b reads its masked result); c, whose input held the secret but which
    # nothing needs again, is kept
    assert ex.calls == ["a", "b"] and resumed(events) == ["c"]
    assert started(events) == {"a": HELD_SECRET, "b": "failed last time"}


# ---- approval on resume --------------------------------------------------------------------

APPROVAL = [
    {"id": "deploy", "tool": "echo", "args": {"value": "v1"}, "approval": True},
    {"id": "check", "tool": "echo", "args": {"value": "ok"}, "depends_on": ["deploy"]},
]


def test_a_kept_approval_step_is_not_asked_about_again_a_changed_one_is() -> None:
    plan = make_plan(APPROVAL)
    first, _ = schedule(plan, FakeExecutor({"check": fails("not yet")}), yes=True)
    run(first)
    asked: list[str] = []

    async def ask(sid: str, question: str = "") -> bool:
        asked.append(sid)
        return True

    ex = FakeExecutor({})
    sched, _ = resume(plan, previous_of(first), ex, yes=False, ask=ask)
    assert run(sched).status == Status.SUCCEEDED
    assert ex.calls == ["check"] and asked == []
    # changed, it runs again: then it needs approval again (no prompt: required, not denied)
    changed = make_plan([{**APPROVAL[0], "args": {"value": "v2"}}, APPROVAL[1]])
    ex = FakeExecutor({})
    blocked, _ = resume(changed, previous_of(sched), ex, yes=False, ask=None)
    outcome = run(blocked)
    assert (outcome.status, outcome.reason) == (Status.BLOCKED, Reason.APPROVAL_REQUIRED)
    assert outcome.error == "approval required for step 'deploy'" and ex.calls == []
    ex = FakeExecutor({})
    prompted, _ = resume(changed, previous_of(sched), ex, yes=False, ask=ask)
    assert run(prompted).status == Status.SUCCEEDED
    assert asked == ["deploy"] and ex.calls == ["deploy", "check"]


# ---- replanning, through the real revision check -------------------------------------------

REPLAN_PLAN = [
    {"id": "first", "tool": "echo", "args": {"value": 1}, "result_variable": "one"},
    {
        "id": "fetch",
        "tool": "echo",
        "args": {"value": "f"},
        "on_failure": "replan",
        "expected_outcome": "the data",
        "depends_on": ["first"],
    },
    {"id": "finish", "tool": "echo", "args": {"value": "${one}"}, "depends_on": ["fetch"]},
]
ROUTE = [
    {"id": "alt", "tool": "echo", "args": {"value": "alt"}, "result_variable": "data"},
    {"id": "finish", "tool": "echo", "args": {"value": "${data}"}},
]


def planner(*answers: Any) -> tuple[Ask, list[dict[str, Any]]]:
    """A scripted planner: each call answers the next value (the last one repeats); an
    exception instance is raised instead. Returns it and the contexts it was given."""
    contexts: list[dict[str, Any]] = []

    async def ask(context: dict[str, Any]) -> Any:
        contexts.append(context)
        answer = answers[min(len(contexts), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return ask, contexts


def replanning(plan: Plan, planner_ask: Ask, executor: FakeExecutor, **kw: Any) -> Any:
    """A scheduler whose replanner is the real one, asking the scripted planner."""
    notices: list[str] = []

    async def replanner(request: ReplanRequest) -> Revision | ReplanStop:
        return await _replan(request, planner_ask, notices.append)

    sched, events = schedule(plan, executor, replanner=replanner, **kw)
    return sched, events, notices


def test_a_revision_removes_adds_and_changes_steps_and_the_run_goes_on() -> None:
    plan = make_plan(REPLAN_PLAN, description="get the data")
    ask, contexts = planner({"steps": ROUTE})
    ex = FakeExecutor({"fetch": fails("command exited with code 9")})
    sched, events, _ = replanning(plan, ask, ex)
    outcome = run(sched)
    assert outcome.status == Status.SUCCEEDED
    assert statuses(sched) == {"first": "succeeded", "alt": "succeeded", "finish": "succeeded"}
    assert sched.records["finish"].result == "alt" and ex.calls == [
        "first",
        "fetch",
        "alt",
        "finish",
    ]
    (ctx,) = contexts
    assert ctx["goal"] == "get the data" and ctx["error"] == "command exited with code 9"
    assert (
        ctx["failed_step"]["id"] == "fetch" and ctx["failed_step"]["expected_outcome"] == "the data"
    )
    assert ctx["completed"] == {"first": 1} and ctx["variables"]["one"] == 1
    assert ctx["history"] == []
    diff = {"removed": ["fetch"], "added": ["alt"], "revised": ["finish"]}
    (event,) = [e for e in events if isinstance(e, PlanDiff)]
    assert {k: getattr(event, k) for k in diff} == diff
    (record,) = sched.revisions
    assert record["diff"] == diff and record["revision"] == 1 and record["failed_step"] == "fetch"


def test_a_second_failure_replans_again_with_the_history() -> None:
    failing = [
        {"id": "try1", "tool": "echo", "on_failure": "replan"},
        {"id": "finish", "tool": "echo", "args": {"value": "done"}, "depends_on": ["try1"]},
    ]
    ask, contexts = planner(failing, ROUTE)
    ex = FakeExecutor({"fetch": fails("no"), "try1": fails("still no")})
    sched, _, _ = replanning(make_plan(REPLAN_PLAN), ask, ex)
    assert run(sched).status == Status.SUCCEEDED
    assert len(contexts) == 2 and len(sched.revisions) == 2 and sched.budget.replans == 2
    assert contexts[1]["failed_step"]["id"] == "try1" and contexts[1]["error"] == "still no"
    assert contexts[1]["history"][0]["diff"]["added"] == ["try1"]


def test_two_replan_failures_reach_the_planner_together_and_the_revision_names_both() -> None:
    plan = make_plan(
        [
            {"id": "x", "tool": "echo", "on_failure": "replan"},
            {"id": "y", "tool": "echo", "on_failure": "replan"},
        ]
    )
    both = asyncio.Event()
    seen: list[str] = []

    def meet(name: str, code: int) -> Any:
        async def run_it(args: dict[str, Any]) -> Any:
            seen.append(name)
            if len(seen) == 2:
                both.set()
            await both.wait()
            await fails(f"command exited with code {code}")(args)

        return run_it

    ask, contexts = planner([{"id": "fix", "tool": "echo", "args": {"value": "fixed"}}])
    sched, _, _ = replanning(plan, ask, FakeExecutor({"x": meet("x", 1), "y": meet("y", 2)}))
    assert run(sched).status == Status.SUCCEEDED
    (ctx,) = contexts  # one revision replaces both
    failures = {f["failed_step"]["id"]: f["error"] for f in ctx["failures"]}
    assert failures == {"x": "command exited with code 1", "y": "command exited with code 2"}
    assert ctx["failed_step"]["id"] in failures
    assert sorted(sched.revisions[0]["failed_steps"]) == ["x", "y"]


ALWAYS_FAILING = [{"id": "again", "tool": "echo", "on_failure": "replan"}]


def test_max_replans_ends_the_run_with_the_replan_budget() -> None:
    plan = make_plan(REPLAN_PLAN, limits={"max_replans": 2})
    ask, contexts = planner(ALWAYS_FAILING)
    sched, _, _ = replanning(plan, ask, FakeExecutor({"fetch": fails("no"), "again": fails("no")}))
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.REPLAN_BUDGET)
    assert outcome.error is not None and "limits.max_replans is 2" in outcome.error
    assert len(contexts) == 2


def test_max_replans_is_per_invocation_a_resume_may_ask_again() -> None:
    plan = make_plan(
        [{"id": "fetch", "tool": "echo", "on_failure": "replan"}], limits={"max_replans": 1}
    )
    ask, contexts = planner(ALWAYS_FAILING)
    first, _, _ = replanning(plan, ask, FakeExecutor({"fetch": fails("no"), "again": fails("no")}))
    assert run(first).reason == Reason.REPLAN_BUDGET
    # the resume continues the stored revision, with a fresh budget
    revised = checked_revision(
        plan, first.revisions, state_path="state.json", planner=True, variables={}
    )
    assert [s.id for s in revised.steps] == ["again"]
    ask, contexts = planner([{"id": "fix", "tool": "echo", "args": {"value": "fixed"}}])
    notices: list[str] = []

    async def replanner(request: ReplanRequest) -> Revision | ReplanStop:
        return await _replan(request, ask, notices.append)

    ex = FakeExecutor({"again": fails("no")})
    sched, _ = resume(revised, previous_of(first), ex, replanner=replanner)
    assert run(sched).status == Status.SUCCEEDED
    assert len(contexts) == 1 and statuses(sched) == {"fix": "succeeded"}


def test_max_steps_counts_every_execution_across_revisions() -> None:
    plan = make_plan(REPLAN_PLAN, limits={"max_replans": 10, "max_steps": 4})
    ask, contexts = planner(ALWAYS_FAILING)
    ex = FakeExecutor({"fetch": fails("no"), "again": fails("no")})
    sched, _, _ = replanning(plan, ask, ex)
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.STEP_BUDGET)
    assert len(ex.calls) == 4 and outcome.error is not None
    assert "limits.max_steps is 4" in outcome.error


def test_max_steps_and_tool_caps_are_per_invocation() -> None:
    plan = make_plan(
        [
            {"id": "s1", "tool": "echo"},
            {"id": "s2", "tool": "echo", "depends_on": ["s1"]},
            {"id": "s3", "tool": "echo", "depends_on": ["s2"]},
        ],
        limits={"max_steps": 3, "tool_caps": {"echo": 2}},
    )
    first, _ = schedule(plan, FakeExecutor({}))
    outcome = run(first)
    assert outcome.reason == Reason.STEP_BUDGET
    assert outcome.error is not None and "tool_caps.echo is 2" in outcome.error
    ex = FakeExecutor({})
    sched, _ = resume(plan, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["s3"]


def test_a_failing_planner_is_asked_again_then_the_budget_ends_the_run() -> None:
    plan = make_plan(REPLAN_PLAN, limits={"max_replans": 2})
    ask, contexts = planner(PlannerError("planner exited with code 3: x"), {"steps": ROUTE})
    sched, _, notices = replanning(plan, ask, FakeExecutor({"fetch": fails("no")}))
    assert run(sched).status == Status.SUCCEEDED
    assert contexts[1]["error"] == "planner exited with code 3: x"
    assert contexts[1]["history"] == [
        {"revision": None, "error": "planner exited with code 3: x", "diff": None}
    ]
    assert notices == ["replan 1 failed: planner exited with code 3: x"]
    # not a list of steps: a planner failure too; with one call allowed, the budget ends it
    plan = make_plan(REPLAN_PLAN, limits={"max_replans": 1})
    ask, _ = planner({"not": "steps"})
    sched, _, _ = replanning(plan, ask, FakeExecutor({"fetch": fails("no")}))
    outcome = run(sched)
    assert outcome.reason == Reason.REPLAN_BUDGET and outcome.error is not None
    assert "planner output must be a list of steps" in outcome.error


CYCLE = [
    {"id": "x", "tool": "echo", "depends_on": ["y"]},
    {"id": "y", "tool": "echo", "depends_on": ["x"]},
]


def test_an_invalid_revision_is_rejected_and_the_planner_asked_again() -> None:
    ask, contexts = planner(CYCLE, ROUTE)
    sched, _, notices = replanning(
        make_plan(REPLAN_PLAN), ask, FakeExecutor({"fetch": fails("no")})
    )
    assert run(sched).status == Status.SUCCEEDED and len(sched.revisions) == 1
    assert "cycle" in contexts[1]["error"] and "x -> y -> x" in contexts[1]["error"]
    (tried,) = contexts[1]["history"]
    assert tried["revision"] is None and tried["error"] == contexts[1]["error"]
    assert notices and notices[0].startswith("replan 1 rejected:")
    assert "x" not in sched.records  # nothing of the rejected revision ran
    ask, contexts = planner(CYCLE)
    plan = make_plan(REPLAN_PLAN, limits={"max_replans": 1})
    sched, _, _ = replanning(plan, ask, FakeExecutor({"fetch": fails("no")}))
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.REPLAN_BUDGET)
    assert outcome.error is not None and "the planner's revision is invalid" in outcome.error


def test_an_empty_revision_ends_the_run_with_no_plan() -> None:
    ask, _ = planner([])
    sched, _, _ = replanning(make_plan(REPLAN_PLAN), ask, FakeExecutor({"fetch": fails("no")}))
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.NO_PLAN)


def test_an_approval_step_added_by_the_planner_is_required_not_denied() -> None:
    plan = make_plan([{"id": "build", "tool": "echo", "on_failure": "replan"}])
    ask, _ = planner([{"id": "ship", "tool": "echo", "approval": True}])
    ex = FakeExecutor({"build": fails("no")})
    sched, _, _ = replanning(plan, ask, ex, yes=False, ask=None)
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.BLOCKED, Reason.APPROVAL_REQUIRED)
    assert outcome.error == "approval required for step 'ship'" and ex.calls == ["build"]


def test_a_resume_of_a_revised_run_continues_the_revision_without_asking_again() -> None:
    plan = make_plan(REPLAN_PLAN)
    route = [
        ROUTE[0],
        {"id": "wait", "tool": "echo", "depends_on": ["alt"]},
        {**ROUTE[1], "depends_on": ["wait"]},
    ]
    ask, contexts = planner(route)
    first, _, _ = replanning(plan, ask, FakeExecutor({"fetch": fails("no"), "wait": fails("no")}))
    assert run(first).reason == Reason.STEP_FAILED
    revised = checked_revision(
        plan, first.revisions, state_path="state.json", planner=True, variables={}
    )
    assert [s.id for s in revised.steps] == ["first", "alt", "wait", "finish"]
    ex = FakeExecutor({})
    sched, events = resume(revised, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED
    assert ex.calls == ["wait", "finish"] and len(contexts) == 1
    assert resumed(events) == ["first", "alt"]


# ---- the plan changed between the runs -----------------------------------------------------


def test_a_step_added_to_the_plan_runs_a_removed_one_is_forgotten() -> None:
    plan = make_plan(CHAIN)
    first, _ = schedule(plan, FakeExecutor({}))
    assert run(first).status == Status.SUCCEEDED
    edited = make_plan(
        [CHAIN[0], {**CHAIN[2], "depends_on": ["a"]}, {"id": "new", "tool": "echo"}]
    )  # b removed, c now below a, `new` added
    ex = FakeExecutor({})
    sched, events = resume(edited, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["new"]
    assert started(events) == {"new": NOT_IN_PREVIOUS}
    assert statuses(sched) == {"a": "succeeded", "c": "succeeded", "new": "succeeded"}


def test_an_ignored_failure_is_kept_with_its_error_on_every_later_resume() -> None:
    plan = make_plan(
        [
            {"id": "flaky", "tool": "echo", "on_failure": "ignore", "result_variable": "r"},
            {"id": "after", "tool": "echo", "args": {"value": "${r}"}},
            {"id": "last", "tool": "echo"},
        ]
    )
    first, _ = schedule(plan, FakeExecutor({"flaky": fails("code 3"), "last": fails("no")}))
    run(first)
    previous = previous_of(first)
    for _ in range(2):  # the resume that finishes the run, then one of the finished run
        ex = FakeExecutor({})
        sched, _ = resume(plan, previous, ex)
        assert run(sched).status == Status.SUCCEEDED
        assert sched.records["flaky"].status == Status.IGNORED
        assert sched.records["flaky"].error == "code 3" and "flaky" not in ex.calls
        assert sched.records["after"].result is None  # the ignored step's variable: null
        previous = previous_of(sched)
    assert ex.calls == []


def test_a_revision_may_not_redefine_a_completed_step() -> None:
    ask, contexts = planner([{"id": "first", "tool": "echo", "args": {"value": 2}}], ROUTE)
    sched, _, notices = replanning(
        make_plan(REPLAN_PLAN), ask, FakeExecutor({"fetch": fails("no")})
    )
    assert run(sched).status == Status.SUCCEEDED
    assert notices[0].startswith("replan 1 rejected:") and "'first'" in contexts[1]["error"]
    assert sched.records["first"].result == 1  # the completed step, as it ran


# ---- what a resume keeps -------------------------------------------------------------------


def test_a_kept_steps_result_is_bound_for_the_steps_that_run_again() -> None:
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": "A"}, "result_variable": "ra"},
            {"id": "b", "tool": "echo", "args": {"value": "${ra}+b"}, "depends_on": ["a"]},
        ]
    )
    first, _ = schedule(plan, FakeExecutor({"b": fails("no")}))
    run(first)
    ex = FakeExecutor({})
    sched, _ = resume(plan, previous_of(first), ex)
    run(sched)
    assert ex.calls == ["b"] and sched.records["b"].result == "A+b"


def test_kept_steps_are_not_charged_to_the_resumes_max_steps() -> None:
    steps = [{"id": s, "tool": "echo", "args": {"value": s}} for s in "abc"]
    steps.append({"id": "last", "tool": "echo", "args": {"value": 1}})
    plan = make_plan(steps, limits={"max_steps": 1})
    first, _ = schedule(make_plan(steps), FakeExecutor({"last": fails("no")}), jobs=1)
    run(first)
    ex = FakeExecutor({})
    sched, _ = resume(plan, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED and ex.calls == ["last"]


def test_a_resume_runs_again_only_the_failed_instances_of_a_foreach() -> None:
    fan = {"id": "s", "tool": "echo", "foreach": ["x", "y", "z"], "args": {"value": "${item}"}}
    plan = make_plan([{**fan, "on_failure": "continue"}])
    first, _ = schedule(plan, FakeExecutor({"s[1]": fails("no")}))
    run(first)
    assert statuses(first)["s"] == "failed"
    ex = FakeExecutor({})
    sched, _ = resume(plan, previous_of(first), ex)
    assert run(sched).status == Status.SUCCEEDED
    assert ex.calls == ["s[1]"] and sched.records["s"].result == ["x", "y", "z"]


def test_a_step_kept_by_a_resume_is_never_called_even_when_the_resume_aborts() -> None:
    plan = make_plan(CHAIN)
    first, _ = schedule(plan, FakeExecutor({"c": fails("no")}))
    run(first)
    ex = FakeExecutor({"c": fails("still no")})
    sched, _ = resume(plan, previous_of(first), ex)
    assert run(sched).reason == Reason.STEP_FAILED
    assert ex.calls == ["c"] and statuses(sched) == {
        "a": "succeeded",
        "b": "succeeded",
        "c": "failed",
    }
