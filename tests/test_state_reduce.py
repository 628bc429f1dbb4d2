"""The state reduction: recorded changes applied to a run state in memory, no file involved."""

from __future__ import annotations

import pytest

from planrun.state.model import RunState, StepState
from planrun.state.reduce import apply


def step(status: str, **kw: object) -> dict[str, object]:
    return StepState(status=status, **kw).to_json()  # type: ignore[arg-type]


def test_a_step_change_replaces_the_step_and_binds_its_result_variable():
    state = RunState(plan="p", steps={"a": StepState()})
    entry = {"op": "step", "id": "a", "state": step("succeeded", result=3, result_variable="n")}
    assert apply(state, entry) is state
    assert state.steps["a"].status == "succeeded"
    assert state.variables == {"n": 3}


def test_an_ignored_step_binds_null_and_a_failed_one_nothing():
    state = RunState(plan="p")
    apply(state, {"op": "step", "id": "a", "state": step("ignored", result_variable="x")})
    apply(state, {"op": "step", "id": "b", "state": step("failed", result_variable="y")})
    assert state.variables == {"x": None}


def test_a_revision_drops_resets_and_adds_steps_in_the_revised_order():
    done = StepState(status="succeeded")
    state = RunState(plan="p", steps={"a": done, "b": StepState(status="failed"), "c": done})
    revision = {
        "revision": 1,
        "diff": {"removed": ["c"], "added": ["d"], "revised": ["b"]},
        "steps": [{"id": "a"}, {"id": "d"}, {"id": "b"}],
    }
    apply(state, {"op": "revision", "revision": revision})
    assert list(state.steps) == ["a", "d", "b"]
    assert state.steps["a"].status == "succeeded"
    assert state.steps["b"].status == "pending"
    assert state.revisions == [revision]


def test_the_run_change_sets_only_the_run_fields():
    state = RunState(plan="p")
    changes = {"status": "failed", "reason": "step_failed", "plan": "other", "duration_s": 1.5}
    apply(state, {"op": "run", "changes": changes})
    assert (state.status, state.reason, state.plan, state.duration_s) == (
        "failed",
        "step_failed",
        "p",
        1.5,
    )


def test_drop_and_unknown_operations():
    state = RunState(plan="p", steps={"a[0]": StepState()})
    apply(state, {"op": "drop", "id": "a[0]"})
    assert state.steps == {}
    with pytest.raises(ValueError, match="unknown operation"):
        apply(state, {"op": "rename"})
