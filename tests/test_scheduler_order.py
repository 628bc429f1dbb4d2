"""When the scheduler starts a step, in-process with a scripted executor: the moment its own
dependencies are done (no waves), at most `-j` at once, ties broken by file order."""

from __future__ import annotations

import asyncio
from typing import Any

from planrun.status import Status
from tests.test_scheduler import FakeExecutor, Script, make_plan, schedule, statuses


def run(sched: Any) -> Any:
    return asyncio.run(asyncio.wait_for(sched.run(), 60))


class Counting:
    """Scripts that note when each step starts and ends, and how many run at once."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.running = 0
        self.most = 0

    def step(self, name: str, until: asyncio.Event | None = None) -> Script:
        async def body(args: dict[str, Any]) -> Any:
            self.log.append(f"start {name}")
            self.running += 1
            self.most = max(self.most, self.running)
            for _ in range(3):  # let every other ready step have its chance to start
                await asyncio.sleep(0)
            if until is not None:
                await until.wait()
            self.running -= 1
            self.log.append(f"end {name}")
            return name

        return body


def test_a_step_waits_for_every_one_of_its_dependencies() -> None:
    plan = make_plan(
        [
            {"id": "b", "tool": "echo"},
            {"id": "c", "tool": "echo"},
            {"id": "d", "tool": "echo", "depends_on": ["b", "c"]},
        ]
    )
    c = Counting()
    ex = FakeExecutor({sid: c.step(sid) for sid in "bcd"})
    sched, _ = schedule(plan, ex)
    assert run(sched).status == Status.SUCCEEDED
    assert c.log.index("start d") > max(c.log.index("end b"), c.log.index("end c"))


def test_a_step_starts_while_an_unrelated_slow_step_still_runs() -> None:
    plan = make_plan(
        [
            {"id": "slow", "tool": "echo"},
            {"id": "a", "tool": "echo"},
            {"id": "after_a", "tool": "echo", "depends_on": ["a"]},
        ]
    )
    release = asyncio.Event()

    async def after_a(args: dict[str, Any]) -> Any:
        release.set()  # only reached if after_a started before `slow` ended

    c = Counting()
    ex = FakeExecutor({"slow": c.step("slow", release), "a": c.step("a"), "after_a": after_a})
    sched, _ = schedule(plan, ex)
    assert run(sched).status == Status.SUCCEEDED
    assert c.log[-1] == "end slow"  # it could end only once after_a had run


def test_with_one_job_independent_steps_start_in_file_order() -> None:
    plan = make_plan([{"id": sid, "tool": "echo"} for sid in ("zeta", "alpha", "mid")])
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, jobs=1)
    run(sched)
    assert ex.calls == ["zeta", "alpha", "mid"]


def test_a_step_freed_by_a_finish_goes_before_a_later_step_in_the_file() -> None:
    # waves would run a, c (wave 1) then b; the ready queue takes b (file position 1) first
    plan = make_plan(
        [
            {"id": "a", "tool": "echo"},
            {"id": "b", "tool": "echo", "depends_on": ["a"]},
            {"id": "c", "tool": "echo"},
        ]
    )
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, jobs=1)
    run(sched)
    assert ex.calls == ["a", "b", "c"]


def test_at_most_jobs_steps_run_at_once() -> None:
    plan = make_plan([{"id": f"s{n}", "tool": "echo"} for n in range(6)])
    c = Counting()
    ex = FakeExecutor({f"s{n}": c.step(f"s{n}") for n in range(6)})
    sched, _ = schedule(plan, ex, jobs=2)
    assert run(sched).status == Status.SUCCEEDED
    assert c.most == 2 and len(ex.calls) == 6


def test_independent_steps_run_together_up_to_jobs() -> None:
    plan = make_plan([{"id": f"s{n}", "tool": "echo"} for n in range(3)])
    c = Counting()
    ex = FakeExecutor({f"s{n}": c.step(f"s{n}") for n in range(3)})
    sched, _ = schedule(plan, ex, jobs=8)
    run(sched)
    assert c.most == 3


def test_a_result_read_by_another_step_orders_them_without_depends_on() -> None:
    plan = make_plan(
        [
            {"id": "reader", "tool": "echo", "args": {"value": "got ${x}"}},
            {"id": "producer", "tool": "echo", "args": {"value": 7}, "result_variable": "x"},
        ]
    )
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, jobs=4)
    run(sched)
    assert ex.calls == ["producer", "reader"]
    assert sched.records["reader"].result == "got 7"


def test_a_step_skipped_by_when_counts_as_done_and_binds_no_variable() -> None:
    plan = make_plan(
        [
            {"id": "gate", "tool": "echo", "args": {"value": 1}, "when": "${go}"},
            {"id": "after", "tool": "echo", "args": {"value": 2}, "depends_on": ["gate"]},
        ],
        variables={"go": False},
    )
    plan_with_var = make_plan(
        [
            {"id": "gate", "tool": "echo", "args": {"value": 1}, "when": "false"},
            {"id": "bound", "tool": "echo", "result_variable": "g", "when": "false"},
        ]
    )
    ex = FakeExecutor({})
    sched, _ = schedule(plan, ex, variables={"go": False})
    assert run(sched).status == Status.SUCCEEDED
    assert statuses(sched) == {"gate": "skipped", "after": "succeeded"} and ex.calls == ["after"]
    variables: dict[str, Any] = {}
    sched, _ = schedule(plan_with_var, FakeExecutor({}), variables=variables)
    run(sched)
    assert "g" not in variables


def test_every_step_that_runs_is_announced_started_then_succeeded() -> None:
    plan = make_plan(
        [
            {"id": "a", "tool": "echo", "args": {"value": 1}},
            {"id": "b", "tool": "echo", "args": {"value": 2}, "depends_on": ["a"]},
        ]
    )
    sched, events = schedule(plan, FakeExecutor({}))
    run(sched)
    seen = [(e.event, e.step) for e in events if e.step is not None]
    assert seen == [
        ("step.started", "a"),
        ("step.succeeded", "a"),
        ("step.started", "b"),
        ("step.succeeded", "b"),
    ]
