"""Failure policies, retries, timeouts and budgets at the scheduler, in-process with a scripted
executor: what each rule of the run contract does to the other steps and to the run."""

from __future__ import annotations

import asyncio
from typing import Any

from planrun.status import Reason, Status
from planrun.tools.base import ToolFailed
from tests.test_scheduler import FakeExecutor, Script, fails, make_plan, schedule, statuses


def run(sched: Any) -> Any:
    return asyncio.run(asyncio.wait_for(sched.run(), 60))


def fails_then_returns(times: int, result: Any = "ok") -> Script:
    """Fails the first `times` attempts, then returns `result`."""
    tried: list[int] = []

    async def body(args: dict[str, Any]) -> Any:
        tried.append(1)
        if len(tried) <= times:
            raise ToolFailed(f"attempt {len(tried)} failed")
        return result

    return body


def hangs_then_returns(times: int) -> Script:
    """Never answers the first `times` attempts (a timeout must cut them), then returns."""
    tried: list[int] = []

    async def body(args: dict[str, Any]) -> Any:
        tried.append(1)
        if len(tried) <= times:
            await asyncio.Event().wait()
        return "answered"

    return body


# ---- failure policies -----------------------------------------------------------------------


def test_abort_starts_no_new_step_and_the_rest_stay_pending() -> None:
    plan = make_plan([{"id": s, "tool": "echo"} for s in ("bad", "x", "y")])
    ex = FakeExecutor({"bad": fails("no")})
    sched, _ = schedule(plan, ex, jobs=1)
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.STEP_FAILED)
    assert ex.calls == ["bad"]
    assert statuses(sched) == {"bad": "failed", "x": "pending", "y": "pending"}


def test_continue_skips_dependents_as_upstream_failed_and_fails_the_run() -> None:
    plan = make_plan(
        [
            {"id": "bad", "tool": "echo", "on_failure": "continue"},
            {"id": "child", "tool": "echo", "depends_on": ["bad"]},
        ]
    )
    sched, events = schedule(plan, FakeExecutor({"bad": fails("no")}))
    outcome = run(sched)
    assert outcome.status == Status.FAILED
    (skipped,) = [e for e in events if e.event == "step.skipped"]
    assert skipped.step == "child" and "upstream failed" in str(skipped.reason)


def test_the_plan_default_on_failure_applies_to_steps_that_set_none() -> None:
    plan = make_plan(
        [{"id": "bad", "tool": "echo"}, {"id": "other", "tool": "echo"}],
        defaults={"on_failure": "continue"},
    )
    ex = FakeExecutor({"bad": fails("no")})
    sched, _ = schedule(plan, ex, jobs=1)
    assert run(sched).status == Status.FAILED
    assert statuses(sched) == {"bad": "failed", "other": "succeeded"}


def test_ignore_makes_the_run_succeed_and_keeps_the_error() -> None:
    plan = make_plan(
        [{"id": "bad", "tool": "echo", "on_failure": "ignore"}],
        defaults={"on_failure": "abort"},
    )
    sched, events = schedule(plan, FakeExecutor({"bad": fails("broken")}))
    outcome = run(sched)
    assert outcome.status == Status.SUCCEEDED
    assert sched.records["bad"].error == "broken" and sched.records["bad"].result is None


def test_an_unexpected_error_in_a_tool_fails_only_its_step() -> None:
    plan = make_plan(
        [
            {"id": "buggy", "tool": "echo", "on_failure": "continue"},
            {"id": "fine", "tool": "echo", "args": {"value": 1}},
        ]
    )

    async def buggy(args: dict[str, Any]) -> Any:
        raise RuntimeError("a bug")

    sched, _ = schedule(plan, FakeExecutor({"buggy": buggy}))
    run(sched)
    assert statuses(sched) == {"buggy": "failed", "fine": "succeeded"}
    assert sched.records["buggy"].error == "RuntimeError: a bug"


def test_keep_going_does_not_change_a_step_that_ignores_its_failure() -> None:
    plan = make_plan(
        [
            {"id": "bad", "tool": "echo", "on_failure": "ignore"},
            {"id": "after", "tool": "echo", "depends_on": ["bad"]},
        ]
    )
    sched, _ = schedule(plan, FakeExecutor({"bad": fails("no")}), keep_going=True)
    assert run(sched).status == Status.SUCCEEDED
    assert statuses(sched) == {"bad": "ignored", "after": "succeeded"}


# ---- retries ---------------------------------------------------------------------------------


def test_a_step_is_attempted_once_plus_its_retries() -> None:
    plan = make_plan([{"id": "s", "tool": "echo", "retries": 2, "retry_delay": 0.001}])
    ex = FakeExecutor({"s": fails("always")})
    sched, events = schedule(plan, ex)
    assert run(sched).status == Status.FAILED
    assert ex.calls == ["s", "s", "s"] and sched.records["s"].attempts == 3
    assert [e.attempt for e in events if e.event == "step.retrying"] == [1, 2]


def test_a_retry_that_succeeds_makes_the_step_succeed() -> None:
    plan = make_plan([{"id": "s", "tool": "echo", "retries": 3, "retry_delay": 0.001}])
    sched, _ = schedule(plan, FakeExecutor({"s": fails_then_returns(1, "fine")}))
    assert run(sched).status == Status.SUCCEEDED
    assert sched.records["s"].attempts == 2 and sched.records["s"].result == "fine"


def test_each_retry_waits_twice_the_wait_before() -> None:
    plan = make_plan([{"id": "s", "tool": "echo", "retries": 3, "retry_delay": 0.001}])
    sched, events = schedule(plan, FakeExecutor({"s": fails("no")}))
    run(sched)
    delays = [e.delay_s for e in events if e.event == "step.retrying"]
    assert delays == [0.001, 0.002, 0.004]


def test_the_plan_default_retries_apply_to_steps_that_set_none() -> None:
    plan = make_plan(
        [{"id": "s", "tool": "echo"}, {"id": "once", "tool": "echo", "retries": 0}],
        defaults={"retries": 1, "retry_delay": 0.001},
    )
    ex = FakeExecutor({"s": fails("no"), "once": fails("no")})
    sched, _ = schedule(plan, ex, keep_going=True)
    run(sched)
    assert sched.records["s"].attempts == 2 and sched.records["once"].attempts == 1


def test_a_retried_failure_says_its_error_each_time() -> None:
    plan = make_plan([{"id": "s", "tool": "echo", "retries": 2, "retry_delay": 0.001}])
    sched, events = schedule(plan, FakeExecutor({"s": fails_then_returns(2)}))
    run(sched)
    errors = [e.error for e in events if e.event == "step.retrying"]
    assert errors == ["attempt 1 failed", "attempt 2 failed"]


# ---- timeouts --------------------------------------------------------------------------------


def test_a_timeout_is_a_failure_retried_like_any_other() -> None:
    plan = make_plan(
        [{"id": "s", "tool": "echo", "timeout": 0.05, "retries": 1, "retry_delay": 0.001}]
    )
    sched, events = schedule(plan, FakeExecutor({"s": hangs_then_returns(1)}))
    assert run(sched).status == Status.SUCCEEDED
    (retry,) = [e for e in events if e.event == "step.retrying"]
    assert retry.error == "timed out after 0.05s"
    assert sched.records["s"].result == "answered"


def test_a_step_that_always_times_out_fails_with_the_timeout() -> None:
    plan = make_plan([{"id": "s", "tool": "echo", "timeout": 0.02}])
    sched, _ = schedule(plan, FakeExecutor({"s": hangs_then_returns(99)}))
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.STEP_FAILED)
    assert sched.records["s"].error == "timed out after 0.02s"


def test_the_plan_default_timeout_bounds_steps_that_set_none() -> None:
    plan = make_plan(
        [{"id": "s", "tool": "echo"}, {"id": "own", "tool": "echo", "timeout": 5}],
        defaults={"timeout": 0.02, "on_failure": "continue"},
    )
    ex = FakeExecutor({"s": hangs_then_returns(99), "own": hangs_then_returns(0)})
    sched, _ = schedule(plan, ex)
    run(sched)
    assert statuses(sched) == {"s": "failed", "own": "succeeded"}


# ---- budgets ---------------------------------------------------------------------------------


def test_max_steps_fails_the_step_past_it_and_the_run_with_step_budget() -> None:
    plan = make_plan([{"id": s, "tool": "echo"} for s in "abc"], limits={"max_steps": 2})
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, jobs=1)
    outcome = run(sched)
    assert (outcome.status, outcome.reason) == (Status.FAILED, Reason.STEP_BUDGET)
    assert ex.calls == ["a", "b"] and sched.records["c"].status == Status.FAILED
    assert "max_steps" in str(sched.records["c"].error)


def test_every_attempt_counts_toward_max_steps() -> None:
    plan = make_plan(
        [{"id": "s", "tool": "echo", "retries": 5, "retry_delay": 0.001}],
        limits={"max_steps": 2},
    )
    ex = FakeExecutor({"s": fails("no")})
    sched, _ = schedule(plan, ex)
    outcome = run(sched)
    assert outcome.reason == Reason.STEP_BUDGET and ex.calls == ["s", "s"]


def test_steps_skipped_by_when_are_not_charged_to_max_steps() -> None:
    plan = make_plan(
        [
            {"id": "off1", "tool": "echo", "when": "false"},
            {"id": "off2", "tool": "echo", "when": "false"},
            {"id": "a", "tool": "echo"},
            {"id": "b", "tool": "echo"},
        ],
        limits={"max_steps": 2},
    )
    sched, _ = schedule(plan, FakeExecutor({}), jobs=1)
    assert run(sched).status == Status.SUCCEEDED
    assert sched.budget.executions == 2


def test_a_tool_cap_bounds_that_tool_alone() -> None:
    plan = make_plan(
        [
            {"id": "e1", "tool": "echo"},
            {"id": "s1", "tool": "sleep", "args": {"seconds": 0}},
            {"id": "e2", "tool": "echo"},
        ],
        limits={"tool_caps": {"echo": 1}},
    )
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, jobs=1, keep_going=True)
    outcome = run(sched)
    assert outcome.reason == Reason.STEP_BUDGET
    assert ex.calls == ["e1", "s1"]
    assert statuses(sched) == {"e1": "succeeded", "s1": "succeeded", "e2": "failed"}
    assert "echo" in str(sched.records["e2"].error)
