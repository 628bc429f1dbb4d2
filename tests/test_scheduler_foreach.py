"""`foreach` at the scheduler, in-process with a scripted executor: one instance `ID[N]` per
element, results in input order, `max_parallel`, failures and budgets per instance."""

from __future__ import annotations

import asyncio
from typing import Any

from planrun.status import Reason, Status
from planrun.tools.base import ToolFailed
from tests.test_scheduler import FakeExecutor, make_plan, schedule, statuses


def run(sched: Any) -> Any:
    return asyncio.run(asyncio.wait_for(sched.run(), 60))


def fan(items: Any, **step: Any) -> dict[str, Any]:
    return {"id": "s", "tool": "echo", "foreach": items, "args": {"value": "${item}"}, **step}


def test_each_element_is_one_instance_named_id_and_index() -> None:
    plan = make_plan([fan(["x", "y", "z"], result_variable="out")])
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex)
    assert run(sched).status == Status.SUCCEEDED
    assert sorted(ex.calls) == ["s[0]", "s[1]", "s[2]"]
    assert sched.variables["out"] == ["x", "y", "z"]


def test_the_result_is_in_input_order_whatever_order_instances_finish_in() -> None:
    plan = make_plan([fan(["first", "second"], result_variable="out")])
    second_done = asyncio.Event()

    async def first(args: dict[str, Any]) -> Any:
        await second_done.wait()
        return args["value"]

    async def second(args: dict[str, Any]) -> Any:
        second_done.set()
        return args["value"]

    sched, events = schedule(plan, FakeExecutor({"s[0]": first, "s[1]": second}))
    run(sched)
    finished = [e.step for e in events if e.event == "step.succeeded" and e.step != "s"]
    assert finished == ["s[1]", "s[0]"] and sched.variables["out"] == ["first", "second"]


def test_an_empty_list_runs_nothing_and_gives_an_empty_result() -> None:
    plan = make_plan(
        [fan([], result_variable="out"), {"id": "after", "tool": "echo", "depends_on": ["s"]}]
    )
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex)
    assert run(sched).status == Status.SUCCEEDED
    assert ex.calls == ["after"] and sched.variables["out"] == []


def test_a_foreach_over_a_result_expands_once_its_producer_is_done() -> None:
    plan = make_plan(
        [
            {"id": "list", "tool": "echo", "args": {"value": [1, 2]}, "result_variable": "xs"},
            fan("${xs}", result_variable="out"),
        ]
    )
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex)
    run(sched)
    assert ex.calls[0] == "list" and sorted(ex.calls[1:]) == ["s[0]", "s[1]"]
    assert sched.variables["out"] == [1, 2]


def test_index_and_a_custom_name_are_bound_in_each_instance() -> None:
    plan = make_plan(
        [
            {
                "id": "s",
                "tool": "echo",
                "foreach": ["a", "b"],
                "as": "letter",
                "args": {"value": "${index}:${letter}"},
                "result_variable": "out",
            }
        ]
    )
    sched, _ = schedule(plan, FakeExecutor({}))
    run(sched)
    assert sched.variables["out"] == ["0:a", "1:b"]


def test_max_parallel_one_runs_the_instances_one_after_another_in_order() -> None:
    plan = make_plan([fan(["a", "b", "c"], max_parallel=1)])
    log: list[str] = []

    async def body(args: dict[str, Any]) -> Any:
        log.append(f"start {args['value']}")
        await asyncio.sleep(0)
        log.append(f"end {args['value']}")

    sched, _ = schedule(plan, FakeExecutor({f"s[{n}]": body for n in range(3)}), jobs=8)
    run(sched)
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]


def test_a_failed_instance_with_abort_interrupts_its_running_siblings() -> None:
    plan = make_plan([fan(["bad", "slow"])])
    cancelled: list[str] = []
    slow_started = asyncio.Event()

    async def bad(args: dict[str, Any]) -> Any:
        await slow_started.wait()
        raise ToolFailed("no")

    async def slow(args: dict[str, Any]) -> Any:
        slow_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise

    sched, _ = schedule(plan, FakeExecutor({"s[0]": bad, "s[1]": slow}))
    outcome = run(sched)
    assert outcome.reason == Reason.STEP_FAILED and cancelled == ["slow"]
    assert sched.records["s[1]"].status == Status.INTERRUPTED
    assert sched.records["s"].status == Status.FAILED


def test_a_failed_instance_with_continue_lets_the_others_finish() -> None:
    plan = make_plan(
        [
            fan(["bad", "good", "fine"], on_failure="continue"),
            {"id": "after", "tool": "echo", "depends_on": ["s"]},
        ]
    )

    async def bad(args: dict[str, Any]) -> Any:
        raise ToolFailed("no")

    sched, _ = schedule(plan, FakeExecutor({"s[0]": bad}), jobs=1)
    outcome = run(sched)
    assert outcome.status == Status.FAILED
    assert [str(sched.records[f"s[{n}]"].status) for n in range(3)] == [
        "failed",
        "succeeded",
        "succeeded",
    ]
    assert statuses(sched)["s"] == "failed" and statuses(sched)["after"] == "skipped"


def test_each_instance_counts_as_one_step_execution() -> None:
    plan = make_plan([fan(["a", "b", "c"])], limits={"max_steps": 2})
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, jobs=1)
    outcome = run(sched)
    assert outcome.reason == Reason.STEP_BUDGET
    assert ex.calls == ["s[0]", "s[1]"]


def test_each_instance_is_retried_on_its_own() -> None:
    plan = make_plan([fan(["flaky", "steady"], retries=1, retry_delay=0.001)])
    tried: list[str] = []

    async def flaky(args: dict[str, Any]) -> Any:
        tried.append("flaky")
        if len(tried) == 1:
            raise ToolFailed("once")
        return "ok"

    sched, _ = schedule(plan, FakeExecutor({"s[0]": flaky}))
    assert run(sched).status == Status.SUCCEEDED
    assert sched.records["s[0]"].attempts == 2 and sched.records["s[1]"].attempts == 1


def test_an_instance_skipped_by_when_is_skipped_alone() -> None:
    plan = make_plan([fan([1, 2, 3], when="${item != 2}", result_variable="out")])
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex)
    assert run(sched).status == Status.SUCCEEDED
    assert sorted(ex.calls) == ["s[0]", "s[2]"]
    assert sched.records["s[1]"].status == Status.SKIPPED
