"""Cache decisions at the scheduler, in-process with a scripted executor and a real local cache
in a temporary directory: a miss runs and is stored, a hit settles the step without running it."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import planrun.cache.session
from planrun.cache.session import CacheOptions
from planrun.cache.wiring import open_session
from planrun.plan.definition import Plan
from planrun.status import Reason, Status
from tests.test_scheduler import FakeExecutor, Script, fails, make_plan, schedule, statuses


def cached_run(
    tmp_path: Path,
    plan: Plan,
    scripts: dict[str, Script] | None = None,
    options: CacheOptions | None = None,
    **kw: Any,
) -> tuple[Any, Any, FakeExecutor, list[Any]]:
    """One run of `plan` with the cache of `tmp_path` (outcome, scheduler, executor, events)."""
    warnings: list[str] = []
    session = open_session(options or CacheOptions(), plan, str(tmp_path), {}, warnings.append)
    assert session is not None and warnings == []
    ex = FakeExecutor(scripts or {})
    sched, events = schedule(plan, ex, cache=session, **kw)
    try:
        outcome = asyncio.run(asyncio.wait_for(sched.run(), 60))
    finally:
        session.close()
    return outcome, sched, ex, events


BUILD = [
    {"id": "build", "tool": "echo", "args": {"value": "v1"}, "cache": True, "result_variable": "b"},
    {"id": "use", "tool": "echo", "args": {"value": "${b}!"}},
]


def test_a_miss_runs_the_step_and_the_next_run_settles_it_from_the_cache(tmp_path: Path) -> None:
    plan = make_plan(BUILD)
    outcome, sched, ex, _ = cached_run(tmp_path, plan)
    assert outcome.status == Status.SUCCEEDED and ex.calls == ["build", "use"]
    outcome, sched, ex, events = cached_run(tmp_path, plan)
    assert outcome.status == Status.SUCCEEDED and ex.calls == ["use"]
    assert statuses(sched) == {"build": "cached", "use": "succeeded"}
    assert [e.step for e in events if e.event == "step.cached"] == ["build"]


def test_a_hit_binds_the_recorded_result_for_the_steps_below(tmp_path: Path) -> None:
    plan = make_plan(BUILD)
    cached_run(tmp_path, plan, {"build": returns("made once")})
    _, sched, _, _ = cached_run(tmp_path, plan, {"build": returns("made twice")})
    assert sched.records["build"].result == "made once"
    assert sched.records["use"].result == "made once!"


def test_a_changed_argument_is_a_miss_that_says_why(tmp_path: Path) -> None:
    cached_run(tmp_path, make_plan(BUILD))
    changed = [{**BUILD[0], "args": {"value": "v2"}}, BUILD[1]]
    _, _, ex, events = cached_run(tmp_path, make_plan(changed))
    assert ex.calls == ["build", "use"]
    (started,) = [e for e in events if e.event == "step.started" and e.step == "build"]
    assert "args" in started.reason


def test_a_step_without_cache_always_runs_and_says_cache_off(tmp_path: Path) -> None:
    plan = make_plan(BUILD)
    cached_run(tmp_path, plan)
    _, _, ex, events = cached_run(tmp_path, plan)
    (started,) = [e for e in events if e.event == "step.started"]
    assert started.step == "use" and started.reason == "cache off"


def test_a_failed_step_is_not_stored(tmp_path: Path) -> None:
    plan = make_plan(BUILD)
    outcome, _, _, _ = cached_run(tmp_path, plan, {"build": fails("no")})
    assert outcome.status == Status.FAILED
    _, sched, ex, _ = cached_run(tmp_path, plan)
    assert ex.calls == ["build", "use"] and statuses(sched)["build"] == "succeeded"


def test_a_forced_step_runs_although_the_cache_has_it(tmp_path: Path) -> None:
    plan = make_plan(BUILD)
    cached_run(tmp_path, plan)
    forced = CacheOptions(force=frozenset({"build"}))
    _, sched, ex, _ = cached_run(tmp_path, plan, options=forced)
    assert ex.calls == ["build", "use"] and statuses(sched)["build"] == "succeeded"


def test_a_hit_is_not_charged_to_max_steps(tmp_path: Path) -> None:
    steps = [{"id": s, "tool": "echo", "args": {"value": s}, "cache": True} for s in "abc"]
    cached_run(tmp_path, make_plan(steps))
    steps.append({"id": "fresh", "tool": "echo", "args": {"value": 1}})
    outcome, sched, ex, _ = cached_run(tmp_path, make_plan(steps, limits={"max_steps": 1}))
    assert outcome.status == Status.SUCCEEDED and ex.calls == ["fresh"]
    assert sched.budget.executions == 1


def test_a_cached_step_below_one_that_runs_again_is_a_miss(tmp_path: Path) -> None:
    steps = [
        {"id": "up", "tool": "echo", "args": {"value": 1}, "result_variable": "u"},
        {"id": "down", "tool": "echo", "args": {"value": "x"}, "depends_on": ["up"], "cache": True},
    ]
    cached_run(tmp_path, make_plan(steps), {"up": returns("first")})
    _, _, ex, _ = cached_run(tmp_path, make_plan(steps), {"up": returns("second")})
    assert ex.calls == ["up", "down"]  # its upstream's result is part of its key
    _, _, ex, _ = cached_run(tmp_path, make_plan(steps), {"up": returns("second")})
    assert ex.calls == ["up"]


def test_foreach_instances_are_cached_one_by_one(tmp_path: Path) -> None:
    fan = {"id": "s", "tool": "echo", "foreach": ["a", "b"], "args": {"value": "${item}"}}
    cached_run(tmp_path, make_plan([{**fan, "cache": True}]))
    more = {**fan, "foreach": ["a", "b", "c"], "cache": True}
    outcome, sched, ex, _ = cached_run(tmp_path, make_plan([more]))
    assert outcome.status == Status.SUCCEEDED and ex.calls == ["s[2]"]
    assert [str(sched.records[f"s[{n}]"].status) for n in range(3)] == [
        "cached",
        "cached",
        "succeeded",
    ]


def test_an_abort_elsewhere_leaves_a_hit_settled(tmp_path: Path) -> None:
    plan = make_plan(BUILD)
    cached_run(tmp_path, plan)
    bad = make_plan([*BUILD, {"id": "bad", "tool": "echo"}])
    outcome, sched, _, _ = cached_run(tmp_path, bad, {"bad": fails("no")}, jobs=1)
    assert outcome.reason == Reason.STEP_FAILED and statuses(sched)["build"] == "cached"


# ---- foreach instances sharing an `outputs` glob ---------------------------------------------

GEN = {
    "id": "gen",
    "tool": "echo",
    "foreach": ["a", "b"],
    "args": {"value": "${item} v${versions[item]}"},
    "outputs": ["dist/*.txt"],
    "cache": True,
}


def writes(tmp_path: Path) -> Script:
    """Writes `dist/NAME.txt` holding the instance's value (`NAME vN`)."""

    async def body(args: dict[str, Any]) -> Any:
        (tmp_path / "dist").mkdir(exist_ok=True)
        (tmp_path / "dist" / f"{args['value'].split()[0]}.txt").write_text(args["value"] + "\n")
        return args["value"]

    return body


def stored_paths(tmp_path: Path) -> dict[str, list[str]]:
    """Each stored entry's step -> the output paths it holds."""
    out: dict[str, list[str]] = {}
    for path in sorted((tmp_path / ".planrun/cache/entries").glob("*.json")):
        doc = json.loads(path.read_bytes().partition(b"\n")[2])
        out.setdefault(doc["step"], []).extend(o["path"] for o in doc["outputs"])
    return out


def test_an_instance_ending_while_a_sibling_s_bookkeeping_is_under_way_stores_only_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gen[1] writes b.txt while gen[0] runs and ends first; its store is held between its
    command's end and the reading of its outputs while gen[0] ends and is stored. gen[0] must
    not take b.txt (it did not make it): else a later hit of gen[0], whose key does not change
    when b's version does, puts the old b.txt back over the rebuilt one."""
    loop: list[asyncio.AbstractEventLoop] = []
    a_running, a_may_end = asyncio.Event(), asyncio.Event()  # (bound to the run's loop on use)
    second_stored = threading.Event()
    calls: list[str] = []
    collect = planrun.cache.session.collect_outputs

    def held_collect(*args: Any, **kw: Any) -> Any:
        calls.append("collect")
        if len(calls) == 1:  # gen[1]'s: let gen[0] end and be stored first
            loop[0].call_soon_threadsafe(a_may_end.set)
            assert second_stored.wait(10), "gen[0] was not stored while gen[1] was held"
            return collect(*args, **kw)
        try:
            return collect(*args, **kw)
        finally:
            second_stored.set()

    async def gen_a(args: dict[str, Any]) -> Any:
        loop.append(asyncio.get_running_loop())
        a_running.set()
        await a_may_end.wait()
        return await writes(tmp_path)(args)

    async def gen_b(args: dict[str, Any]) -> Any:
        await a_running.wait()  # b.txt changes while gen[0] runs
        return await writes(tmp_path)(args)

    monkeypatch.setattr(planrun.cache.session, "collect_outputs", held_collect)
    v1 = {"versions": {"a": 1, "b": 1}}
    plan = make_plan([GEN])
    outcome, _, _, _ = cached_run(tmp_path, plan, {"gen[0]": gen_a, "gen[1]": gen_b}, variables=v1)
    assert outcome.status == Status.SUCCEEDED and len(calls) == 2
    # b.txt changed while gen[0] was running: stored by neither; a.txt is gen[0]'s alone
    assert stored_paths(tmp_path) == {"gen[0]": ["dist/a.txt"], "gen[1]": []}
    monkeypatch.undo()

    v2 = {"versions": {"a": 1, "b": 2}}
    scripts = {"gen[0]": writes(tmp_path), "gen[1]": writes(tmp_path)}
    for _ in range(2):  # gen[1] is rebuilt, then hits; gen[0] hits both times
        _, sched, _, _ = cached_run(tmp_path, plan, scripts, variables=v2)
        assert str(sched.records["gen[0]"].status) == "cached"
        assert (tmp_path / "dist/b.txt").read_text() == "b v2\n"
        assert (tmp_path / "dist/a.txt").read_text() == "a v1\n"


def returns(value: Any) -> Script:
    async def body(args: dict[str, Any]) -> Any:
        return value

    return body
