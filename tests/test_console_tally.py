"""The console's status model alone: events in, counts out, no terminal."""

from __future__ import annotations

from typing import Any

from planrun.reporters.tally import RunTally
from planrun.run.stepcounts import step_parts
from tests.testkit import Event

PLAN = "demo"


def ev(name: str, step: str | None = None, plan: str = PLAN, ts: float = 1.0, **data: Any) -> Event:
    return Event(name, plan, step, data, ts)


def started(*steps: str, plan: str = PLAN) -> Event:
    listed = [{"id": s, "tool": "shell", "title": s.upper()} for s in steps]
    return ev("run.started", plan=plan, steps=listed)


def tally_of(*events: Event) -> RunTally:
    tally = RunTally()
    for event in events:
        tally.apply(event)
    return tally


def test_counts_follow_the_steps_through_their_lives() -> None:
    tally = tally_of(
        started("a", "b", "c", "d", "e"),
        ev("step.started", "a", ts=2.0, attempt=1),
        ev("step.started", "b", ts=2.5, attempt=1),
    )
    assert tally.root == PLAN and tally.run_ts == 1.0
    assert tally.running == {"a": (2.0, 1), "b": (2.5, 1)}
    assert tally.title(PLAN, "a") == "A"
    for event in (
        ev("step.succeeded", "a", status="succeeded", duration_s=0.1),
        ev("step.retrying", "b", attempt=1, error="boom", delay_s=1),
        ev("step.started", "b", ts=3.0, attempt=2),
        ev("step.failed", "b", status="failed", error="exit 1\nmore", attempts=2),
        ev("step.failed", "c", status="ignored", error="meh"),
        ev("step.skipped", "d", reason="upstream failed: b"),
    ):
        tally.apply(event)
    assert tally.running == {}
    assert tally.done == 4
    assert tally.errors == {"b": "exit 1"}  # the first line; an ignored failure is no error
    counts = tally.step_counts()
    assert counts.total == 5
    assert step_parts(counts) == ["1 succeeded", "1 ignored", "1 failed", "1 skipped", "1 pending"]


def test_a_step_counts_once_however_many_events_end_it() -> None:
    tally = tally_of(
        started("a"),
        ev("step.succeeded", "a", status="succeeded"),
        ev("step.succeeded", "a", status="succeeded"),
    )
    assert tally.done == 1


def test_kept_steps_and_a_step_run_again() -> None:
    tally = tally_of(
        started("a", "b"),
        ev("step.resumed", "a", status="succeeded"),
        ev("step.resumed", "b", status="succeeded"),
        ev("step.started", "b", attempt=1),
    )
    assert tally.kept == {"a"}
    tally.apply(ev("step.succeeded", "b", status="succeeded"))
    counts = tally.step_counts()
    assert (counts.total, step_parts(counts)) == (2, ["2 succeeded; 1 kept from the previous run"])


def test_foreach_instances_and_sub_plan_steps_are_not_the_plans_own() -> None:
    tally = tally_of(
        started("fan", "sub"),
        ev("step.started", "fan[0]", attempt=1),
        ev("step.started", "sub/inner", attempt=1),
    )
    assert set(tally.running) == {"fan[0]", "sub/inner"}
    tally.apply(ev("step.failed", "fan[0]", status="failed", error="x"))
    tally.apply(ev("step.failed", "sub/inner", status="failed", error="y"))
    assert tally.running == {}
    assert tally.instances == {"fan[0]": "failed"}
    assert tally.errors == {}  # the instance's and the sub-plan step's own errors are theirs
    assert tally.status == {}
    assert tally.done == 0


def test_only_the_first_run_is_counted() -> None:
    tally = tally_of(
        started("a"),
        started("x", plan="other"),
        ev("step.succeeded", "x", plan="other", status="succeeded"),
    )
    assert tally.root == PLAN
    assert list(tally.tools) == ["a"]
    assert tally.title("other", "x") == "X"  # titles are kept for every plan
    assert tally.done == 0


def test_a_replan_drops_pending_steps_and_forgives_a_replaced_failure() -> None:
    tally = tally_of(
        started("a", "b", "c"),
        ev("step.failed", "a", status="failed", error="boom"),
        ev("plan.diff", added=["d"], removed=["a", "c"], changed=[]),
    )
    assert list(tally.tools) == ["a", "b", "d"]
    assert tally.status["a"] == "replaced"
    assert tally.errors == {}
