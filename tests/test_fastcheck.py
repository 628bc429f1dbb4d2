"""planrun.plan.fastcheck against pydantic (planrun.plan.model): on any data it either leaves the verdict to
pydantic (None) or gives exactly the object pydantic's validation gives; never accepts what
pydantic refuses. And planrun/plan/tables.py is what planrun.plan.definition derives today."""

from __future__ import annotations

import glob
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from planrun.plan import definition as runtime
from planrun.plan import fastcheck, model
from planrun.plan import tables_write as plantables_write
from planrun.plan.loader import load_document

ROOT = Path(__file__).resolve().parent.parent

# Values of every shape a YAML or JSON plan can hold, and the edges of the kinds' rules.
POOL: list[Any] = [
    None, True, False, 0, 1, -1, 2, 2.0, 2.5, 10**30, math.inf, math.nan, "", "a", "a b",
    "30s", "1m30s", "-1s", "x\n", "é é", "a\nb", "bad id!", "${x}", "abort", "replan", "stdio",
    "local", "dask", "Deploy now?", [], ["a"], [1], ["a", 1], [None], ["*.py"], ["!x"], {},
    {"a": 1}, {"a": "b"}, {1: 2}, {"cpu": 2}, {"k": [1]}, {"x": {"command": "c"}},
]  # fmt: skip

STEP = {"id": "s", "tool": "echo"}


def pydantic_object(cls: type, data: Any) -> Any:
    """What validation makes of `data` (None when pydantic refuses it)."""
    target = model.PlanHeader if cls is runtime.Plan else model._MODELS[cls]  # noqa: SLF001
    try:
        return model.to_runtime(target.model_validate(data))
    except ValidationError:
        return None


def same(cls: type, data: Any) -> None:
    fast = fastcheck.load(cls, data)
    if fast is None:
        return  # pydantic decides
    slow = pydantic_object(cls, data)
    assert slow is not None, f"fastcheck accepted what pydantic refuses: {data!r}"
    assert repr(fast.to_dict(exact=True)) == repr(slow.to_dict(exact=True)), data


def test_the_written_tables_are_current() -> None:
    """After a change to planrun/plan/definition.py: `python -m planrun.plan.tables_write`."""
    written = (ROOT / "planrun" / "plan" / "tables.py").read_text()
    assert written == plantables_write.source()


@pytest.mark.parametrize("key", sorted(set(model.STEP_FIELDS) | {"as_", "nope"}))
def test_every_value_of_every_step_key(key: str) -> None:
    for value in POOL:
        same(runtime.Step, {**STEP, key: value})
        same(runtime.Step, {**STEP, "foreach": [1], key: value})
        same(runtime.Step, {"id": "s", "run": "true", key: value})


@pytest.mark.parametrize(
    "cls",
    [runtime.Defaults, runtime.Limits, runtime.Policy, runtime.Replan, runtime.ExecutorConfig,
     runtime.ServerEntry, runtime.Param],
)  # fmt: skip
def test_every_value_of_every_nested_key(cls: type) -> None:
    keys = [row[1] for row in plantables_write.tables()[cls.__name__]]
    bases: list[dict[str, Any]] = [{}, {"command": "c"}, {"url": "u"}, {"tool": "t"}]
    for key in keys:
        for value in POOL:
            for base in bases:
                same(cls, {**base, key: value})
                same(runtime.Plan, within(cls, {**base, key: value}))


def within(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """A plan header holding `data` where a `cls` goes."""
    if cls in (runtime.ServerEntry, runtime.Param):
        return {"servers" if cls is runtime.ServerEntry else "params": {"x": data}}
    key = {runtime.ExecutorConfig: "executor"}.get(cls, cls.__name__.lower())
    return {key: data}


def test_every_value_of_every_plan_key() -> None:
    for key in sorted(set(model.PLAN_FIELDS) - {"steps"}):
        for value in POOL:
            same(runtime.Plan, {key: value})
            same(runtime.Plan, {"name": "n", key: value, "variables": {"v": 1}})


def plan_files() -> list[str]:
    found = []
    for pattern in ("examples/**/*.yaml", "examples/**/*.json", "plans/**/*.yaml", "tests/data/**/*.yaml"):  # fmt: skip
        found += glob.glob(str(ROOT / pattern), recursive=True)
    return sorted(found)


def test_the_project_plans_agree_and_valid_ones_take_the_fast_way() -> None:
    """Every plan in the repository: the same verdict and objects; a valid one without any
    alias is checked without pydantic (the fast way is the one a run takes)."""
    fast_plans = 0
    for file in plan_files():
        try:
            data = load_document(file).data
        except Exception:  # noqa: BLE001 - a deliberately broken file: nothing to compare
            continue
        if not isinstance(data, dict):
            continue
        header = {k: v for k, v in data.items() if k != "steps"}
        same(runtime.Plan, header)
        steps = data.get("steps") if isinstance(data.get("steps"), list) else []
        for step in steps:
            same(runtime.Step, step)
        plain = pydantic_object(runtime.Plan, header) is not None and "id" not in header
        plain = plain and all(
            isinstance(s, dict) and "index" not in s and pydantic_object(runtime.Step, s)
            for s in steps
        )
        if plain:
            assert fastcheck.load(runtime.Plan, header) is not None, file
            assert all(fastcheck.load(runtime.Step, s) is not None for s in steps), file
            fast_plans += 1
    assert fast_plans >= 10
