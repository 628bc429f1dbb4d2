"""Run-path values (dataclasses and NamedTuples): value equality, defaults made afresh, a readable repr,
`replace`, frozen ones refusing assignment; and how `--events` writes one."""

from __future__ import annotations

import copy
import inspect
import json
import pickle
import re
from dataclasses import FrozenInstanceError, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from planrun import records_write, records_written
from planrun.plan import definition as plan
from planrun.records import fingerprint, record_key
from planrun.run.request import RunRequest
from planrun.run.scope import StepRecord
from planrun.state.model import RunState, StepState
from planrun.tools.base import Services
from tests.testkit import Event

ROOT = Path(__file__).resolve().parent.parent


def test_records_keep_the_dataclass_behaviour() -> None:
    """Defaults made afresh per instance, equality by value, a readable repr, replace."""
    a, b = RunRequest("p.yaml", cwd="/w"), RunRequest("p.yaml", cwd="/w")
    assert a == b and a.variables is not b.variables and a.only is not b.only
    assert a != replace(a, console=False) and replace(a, console=False).plan == "p.yaml"
    assert RunRequest("p.yaml").cwd  # the working directory by default
    rec = StepRecord(attempts=2, result=[1, 2])
    copy = replace(rec, attempts=1)
    assert (copy.attempts, copy.result, rec.attempts) == (1, [1, 2], 2)
    assert repr(StepRecord()).startswith("StepRecord(status=")
    assert RunState("p").steps == {} and RunState("p").steps is not RunState("p").steps
    assert StepState(status="succeeded") != StepState()
    with pytest.raises(TypeError):
        hash(StepState())  # mutable, so unhashable, as a plain @dataclass


def test_frozen_records_refuse_assignment_and_hash_by_value() -> None:
    from planrun.errors import Diagnostic

    d = Diagnostic("p.yaml", 1, 2, "error", "bad", "fix it")
    with pytest.raises(AttributeError):
        d.line = 3  # type: ignore[misc]
    assert hash(d) == hash(Diagnostic("p.yaml", 1, 2, "error", "bad", "fix it"))
    assert d.render() == "p.yaml:1:2: error: bad (fix it)"
    assert repr(d) == (
        "Diagnostic(file='p.yaml', line=1, col=2, severity='error', message='bad', hint='fix it')"
    )
    with pytest.raises(AttributeError):
        Services().notice = None  # type: ignore[misc]
    assert Services().dotenv == {} and Services().dotenv is not Services().dotenv


def test_events_write_a_record_or_a_dataclass_as_asdict_wrote_it(tmp_path: Path) -> None:
    """--events' fallback for values JSON cannot hold: a record (there is none in a run's own
    events today) and a dataclass both become their fields, as dataclasses.asdict gave."""
    import dataclasses

    from planrun.errors import Diagnostic
    from planrun.reporters.jsonl import JsonLinesReporter

    @dataclasses.dataclass
    class Point:
        x: int
        tags: tuple[str, ...]

    path = tmp_path / "events.jsonl"
    reporter = JsonLinesReporter(path)
    diagnostic = Diagnostic("p.yaml", 1, 2, "error", "bad")
    reporter.handle(
        Event("step.succeeded", "p", "a", {"result": {"d": diagnostic, "p": Point(1, ("t",))}}, 0)
    )
    reporter.close()
    doc = json.loads(path.read_text())["result"]
    fields = {"file": "p.yaml", "line": 1, "col": 2, "severity": "error", "message": "bad"}
    assert doc["d"] == {**fields, "hint": None}
    assert doc["p"] == {"x": 1, "tags": ["t"]}


# ---- records whose methods are written ahead of time (planrun.records) ----


def _twins(frozen: bool, kw_only: bool) -> tuple[type, type]:
    """The same class made by `@record` and by `@dataclass(slots=True)`."""
    from planrun.records import record

    def body() -> dict[str, Any]:
        return {
            "__annotations__": {
                "a": "int",
                "b": "str | None",
                "c": "tuple[int, ...]",
                "hidden": "int",
                "ignored": "int",
                "later": "dict[str, int] | None",
            },
            "b": None,
            "c": field(default_factory=tuple),
            "hidden": field(default=3, repr=False),
            "ignored": field(default=0, compare=False),
            "later": field(default=None, init=False),
            "__module__": __name__,
            "__qualname__": "Point",
        }

    written = record(frozen=frozen, kw_only=kw_only)(type("Point", (), body()))
    stock = dataclass(frozen=frozen, slots=True, kw_only=kw_only)(type("Point", (), body()))
    return written, stock


@pytest.mark.parametrize(("frozen", "kw_only"), [(True, True), (True, False), (False, False)])
def test_a_record_is_what_dataclass_makes(frozen: bool, kw_only: bool) -> None:
    """Signature, docstring, repr, equality, hash, fields, match args, slots, replace and the
    frozen refusals: the same as dataclasses' own class (here the methods are compiled at
    start-up: the class is not in planrun/records_written.py)."""
    written, stock = _twins(frozen, kw_only)
    assert str(inspect.signature(written)) == str(inspect.signature(stock))
    assert written.__doc__ == stock.__doc__
    assert written.__match_args__ == stock.__match_args__
    assert written.__slots__ == stock.__slots__
    assert [f.name for f in fields(written)] == [f.name for f in fields(stock)]
    assert is_dataclass(written) and written.__dataclass_params__.eq
    args = {"a": 1, "b": "x"} if kw_only else {"a": 1}
    one, other = written(**args), stock(**args)
    assert repr(one) == repr(other)
    assert one == written(**args) and one != replace(one, a=2) and one != other
    assert one.c == () and written(**args, c=(1,)).c == (1,)
    match one:
        case written(a=1):
            pass
        case _:
            raise AssertionError("no match")
    assert written(**args, ignored=5) == one  # compare=False
    assert replace(one, a=2).a == 2 and replace(one, a=2).later is None
    if frozen:
        assert hash(one) == hash(written(**args)) == hash(stock(**args))
        for thing in (one, other):
            with pytest.raises(FrozenInstanceError, match="cannot assign to field 'a'"):
                thing.a = 2
            with pytest.raises(FrozenInstanceError, match="cannot delete field 'a'"):
                del thing.a
        assert copy.deepcopy(one) == one
    else:
        assert written.__hash__ is None and stock.__hash__ is None
        one.a = 7
        assert one.a == 7


def test_the_plans_records_pickle_copy_and_replace() -> None:
    step = plan.Step(id="s", tool="echo", args={"v": 1})
    whole = plan.Plan(name="p", steps=[step])
    assert pickle.loads(pickle.dumps(whole)) == whole
    assert copy.deepcopy(whole) == whole and copy.copy(step) == step
    assert whole.step("s") is step
    assert replace(whole, name="q").name == "q" and replace(whole, name="q").step("s") is step
    assert repr(plan.Defaults()) == (
        "Defaults(timeout=None, retries=0, retry_delay=1.0, on_failure=<OnFailure.abort: 'abort'>)"
    )
    assert plan.Defaults.__doc__.startswith("Defaults(*, timeout: 'Duration | None' = None")
    with pytest.raises(FrozenInstanceError):
        step.id = "t"  # type: ignore[misc]


def test_the_written_methods_are_current() -> None:
    """After changing or adding a record: `python -m planrun.records_write`."""
    written = (ROOT / "planrun" / "records_written.py").read_text()
    assert written == records_write.source()
    for cls in records_write.records():
        assert records_written.MAKERS[record_key(cls)][0] == fingerprint(cls)


def test_every_module_with_records_is_written() -> None:
    """A module that uses `@record` is in records_write.MODULES (else its methods are compiled
    at every start, as dataclasses would)."""
    using = set()
    for path in (ROOT / "planrun").rglob("*.py"):
        if re.search(r"^@record\(", path.read_text(), re.MULTILINE):
            using.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert using == set(records_write.MODULES)
