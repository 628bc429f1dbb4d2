"""Run-path values (dataclasses and NamedTuples): value equality, defaults made afresh, a readable repr,
`replace`, frozen ones refusing assignment; and how `--events` writes one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from planrun.run.events import Event
from planrun.run.request import RunRequest
from planrun.run.scope import StepRecord
from planrun.state.model import RunState, StepState
from planrun.tools.base import Services


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
    event = Event("run.started", "p")
    assert event.ts > 0 and Event("run.finished", "p", ts=1.0).ts == 1.0


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
