"""The dataclasses a run makes are the plan's and a known few values: a dataclass costs 2-5 M
instructions a class on every start (its methods are generated and compiled), so the run path's
bundles of fields are plain slotted classes and its small option groups NamedTuples, and a new
dataclass on the start-up path is a measured choice (docs/architecture.md gives the figures).
Checked in a real `planrun run`, the way tests/test_plancache.py looks at what a run imported:
`run` ends with os._exit, so the check runs just before it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from planrun.events import Event
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


# The plan format's one definition.
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


# The values of every run that are compared, hashed or copied (dataclasses.replace).
RUN_VALUES = [
    "planrun.context.ChildContext",
    "planrun.context.RunContext",
    "planrun.errors.Diagnostic",
    "planrun.expressions.Expr",
    "planrun.expressions.Template",
    "planrun.request.RunRequest",
    "planrun.scope.StepRecord",
    "planrun.tools.base.Services",
]
STATE_VALUES = ["planrun.state.model.RunState", "planrun.state.model.StepState"]
QUOTED_VALUES = ["planrun.shellquote.Hole"]  # a `${...}` in a shell command


def made(*groups: list[str]) -> list[str]:
    return sorted(name for group in (PLAN_CLASSES, RUN_VALUES, *groups) for name in group)


def at_exit(cwd: Path, *args: str) -> dict[str, object]:
    proc = python_ok("-c", AT_EXIT, *args, cwd=cwd)
    found: dict[str, object] = json.loads(proc.stderr.splitlines()[-1])
    return found


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--no-state"], made()),
        ([], made(STATE_VALUES)),
        (
            ["-j", "2", "--events", "events.jsonl", "--junit", "junit.xml", "--var", "x=1"],
            made(STATE_VALUES),
        ),
    ],
    ids=["no-state", "state", "reports"],
)
def test_a_plain_run_makes_the_known_dataclasses(
    tmp_path: Path, extra: list[str], expected: list[str]
) -> None:
    (tmp_path / "plan.yaml").write_text(ONE_STEP)
    args = ["run", "plan.yaml", "--quiet", *extra]
    at_exit(tmp_path, *args)  # the first run checks the plan (pydantic) and caches it
    found = at_exit(tmp_path, *args)  # a plan cache hit: the run path alone
    # `ran`: the step ran (the measurement works); `made`: the dataclasses of planrun modules.
    assert found == {"made": expected, "imported": True, "ran": True}, found


def test_a_run_with_values_in_commands_and_foreach_makes_the_known_dataclasses(
    tmp_path: Path,
) -> None:
    """`${...}` in a shell command is quoted by planrun.shellquote; foreach expands instances."""
    (tmp_path / "plan.yaml").write_text(INTERPOLATED)
    args = ["run", "plan.yaml", "--quiet", "--no-state"]
    at_exit(tmp_path, *args)
    found = at_exit(tmp_path, *args)
    assert found == {"made": made(QUOTED_VALUES), "imported": True, "ran": True}, found


def test_a_resumed_run_makes_the_known_dataclasses(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text(ONE_STEP)
    at_exit(tmp_path, "run", "plan.yaml", "--quiet")
    found = at_exit(tmp_path, "resume", "plan.yaml", "--quiet")
    assert found == {"made": made(STATE_VALUES), "imported": True, "ran": True}, found


def test_run_values_compare_copy_and_show_as_dataclasses() -> None:
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
    assert event.data == {} and event.ts > 0 and Event("x", "p", ts=1.0).ts == 1.0


def test_frozen_values_refuse_assignment_and_hash_by_value() -> None:
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


def test_events_write_a_dataclass_as_asdict_writes_it(tmp_path: Path) -> None:
    """--events' fallback for values JSON cannot hold: a dataclass (there is none in a run's own
    events today) becomes its fields, as dataclasses.asdict gives them."""
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
    reporter.handle(Event("step.succeeded", "p", "a", {"d": diagnostic, "p": Point(1, ("t",))}, 0))
    reporter.close()
    doc = json.loads(path.read_text())
    fields = {"file": "p.yaml", "line": 1, "col": 2, "severity": "error", "message": "bad"}
    assert doc["d"] == {**fields, "hint": None}
    assert doc["p"] == {"x": 1, "tags": ["t"]}
