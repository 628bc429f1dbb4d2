"""A run makes no dataclass but the plan's own: the values of the run path are written-out
slotted classes (planrun.record), since generating a dataclass's methods costs about 1 ms a
class on every start; the plan's classes (planrun.plan) are dataclasses because they are the one
definition of the plan format (docs/architecture.md gives the figure). Checked in a real
`planrun run`, the way tests/test_plancache.py looks at what a run imported: `run` ends with
os._exit, so the check runs just before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planrun.events import Event, RunStarted
from planrun.record import replace
from planrun.request import RunRequest
from planrun.scope import StepRecord
from planrun.state.model import RunState, StepState
from planrun.tools.base import Services
from tests.conftest import python_ok

ONE_STEP = """\
name: one
steps:
  - id: a
    tool: shell
    args: {cmd: "true"}
"""

INTERPOLATED = """\
variables: {who: world}
steps:
  - id: a
    tool: shell
    args: {cmd: "echo hello ${who}"}
  - id: b
    tool: shell
    args: {cmd: "echo ${item} ${steps.a.result.stdout}"}
    foreach: [1, 2]
"""

# `python -c CODE ARGS...`: `python -m planrun ARGS`, then what it imported and which of the
# classes of the planrun modules it loaded are dataclasses, as JSON on the last line of stderr.
AT_EXIT = """\
import json, sys
import planrun.interrupts
def exit_now(code):  # `run` ends with os._exit: see what it loaded first
    raise SystemExit(code)
planrun.interrupts.exit_now = exit_now
sys.argv = ["planrun", *sys.argv[1:]]
from planrun.__main__ import main
try:
    main()
finally:
    planrun_modules = {n: m for n, m in list(sys.modules.items()) if n.startswith("planrun")}
    made = sorted(
        f"{name}.{attr}"
        for name, module in planrun_modules.items()
        for attr, value in vars(module).items()
        if isinstance(value, type) and value.__module__ == name
        and "__dataclass_fields__" in vars(value)
    )
    imported = "dataclasses" in sys.modules
    ran = "planrun.scheduler" in sys.modules
    print(json.dumps({"made": made, "imported": imported, "ran": ran}), file=sys.stderr)
"""


# The plan format's one definition; no other module of a run makes a dataclass.
PLAN_CLASSES = [
    f"planrun.plan.{name}"
    for name in sorted(
        [
            "Defaults",
            "ExecutorConfig",
            "Limits",
            "Param",
            "Plan",
            "Policy",
            "Replan",
            "ServerEntry",
            "Step",
        ]
    )
]


def at_exit(cwd: Path, *args: str) -> dict[str, object]:
    proc = python_ok("-c", AT_EXIT, *args, cwd=cwd)
    found: dict[str, object] = json.loads(proc.stderr.splitlines()[-1])
    return found


@pytest.mark.parametrize(
    "extra",
    [
        ["--no-state"],
        [],
        ["-j", "2", "--events", "events.jsonl", "--junit", "junit.xml", "--var", "x=1"],
    ],
    ids=["no-state", "state", "reports"],
)
def test_a_plain_run_creates_no_dataclass_but_the_plans(tmp_path: Path, extra: list[str]) -> None:
    (tmp_path / "plan.yaml").write_text(ONE_STEP)
    args = ["run", "plan.yaml", "--quiet", *extra]
    at_exit(tmp_path, *args)  # the first run checks the plan (pydantic) and caches it
    found = at_exit(tmp_path, *args)  # a plan cache hit: the run path alone
    # `ran`: the step ran (the measurement works); `made`: the dataclasses of planrun modules.
    assert found == {"made": PLAN_CLASSES, "imported": True, "ran": True}, found


def test_a_run_with_values_in_commands_and_foreach_creates_no_other_dataclass(
    tmp_path: Path,
) -> None:
    """`${...}` in a shell command is quoted by planrun.shellquote; foreach expands instances."""
    (tmp_path / "plan.yaml").write_text(INTERPOLATED)
    args = ["run", "plan.yaml", "--quiet", "--no-state"]
    at_exit(tmp_path, *args)
    found = at_exit(tmp_path, *args)
    assert found == {"made": PLAN_CLASSES, "imported": True, "ran": True}, found


def test_a_resumed_run_creates_no_other_dataclass(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(ONE_STEP)
    at_exit(tmp_path, "run", "plan.yaml", "--quiet")
    found = at_exit(tmp_path, "resume", "plan.yaml", "--quiet")
    assert found == {"made": PLAN_CLASSES, "imported": True, "ran": True}, found


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
    assert isinstance(event, RunStarted) and event.ts > 0
    assert Event("run.finished", "p", ts=1.0).ts == 1.0
    with pytest.raises(AttributeError):
        event.plan = "q"  # type: ignore[misc]  # an event is immutable


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
    result = {"d": diagnostic, "p": Point(1, ("t",))}
    reporter.handle(Event("step.succeeded", "p", "a", {"result": result}, 0))
    reporter.close()
    doc = json.loads(path.read_text())["result"]
    fields = {"file": "p.yaml", "line": 1, "col": 2, "severity": "error", "message": "bad"}
    assert doc["d"] == {**fields, "hint": None}
    assert doc["p"] == {"x": 1, "tags": ["t"]}
