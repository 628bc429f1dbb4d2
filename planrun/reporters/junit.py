"""`--junit FILE`: a JUnit XML report with one testcase per step, written when the run closes.

How step statuses map to JUnit (CI systems only know passed / failure / error / skipped):

- succeeded -> passed; a step kept from a previous run (`step.resumed`) is reported as what it
  was there (succeeded, ignored, skipped, cached) and says it was kept in `<system-out>`;
- cached (`step.cached`: the cache had it) -> passed, `<system-out>` says so and holds the
  replayed output;
- failed -> `<failure message=error type="failed">detail</failure>`;
- ignored (failed with `on_failure: ignore`) -> passed, `<system-out>` holds the ignored error;
- replaced (failed, then a replan removed it: the run document lists it only under `revisions`)
  -> `<skipped message="replaced by the planner in revision N: error">`, never a failure: the
  planner routed around it; `<system-out>` keeps its error, detail and output;
- skipped -> `<skipped message=reason/>`;
- interrupted (stopped while running) -> `<error type="interrupted">`: the step started and never
  finished, which is neither a pass nor the step's own failure;
- pending (never started because the run stopped) -> `<skipped message="not started: ...">`;
- still running when the report is written (no end event: a crash) -> `<error type="incomplete">`.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from planrun.atomicwrite import atomic_write, not_replaceable
from planrun.reporters.failures import WriteFailures
from planrun.reporters.tally import RunTally
from planrun.run.events import (
    PlanDiff,
    RunEvent,
    RunFinished,
    RunStarted,
    StepCached,
    StepEvent,
    StepFailed,
    StepInterrupted,
    StepOutput,
    StepResumed,
    StepRetrying,
    StepSkipped,
    StepStarted,
    StepSucceeded,
    present,
)
from planrun.run.stepcounts import counts_text
from planrun.run.substeps import row_order
from planrun.text import format_duration, title_beyond_id

# XML 1.0 cannot hold most control characters; tool output often has them (ANSI colours).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` without ANSI escapes, other illegal XML characters shown as `\\xNN`."""
    text = _ANSI.sub("", text)
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_KEPT_NOTE = "kept from a previous run (unchanged)"


class _Case:
    """One step as its testcase will show it, kept up to date from the step's events."""

    __slots__ = (
        "id", "status", "duration_s", "attempts", "error", "detail", "reason", "output", "notes",
        "title",
    )  # fmt: skip

    def __init__(self, id: str) -> None:
        self.id = id
        self.title: str | None = None  # rendered, as the last event about the step carried it
        self.status = "pending"
        self.duration_s = 0.0
        self.attempts = 0
        self.error: str | None = None
        self.detail: str | None = None
        self.reason: str | None = None
        self.output: str | None = None
        self.notes: list[str] = []


class _Suite:
    """One plan's run (the top-level plan or a sub-plan) as its testsuite will show it."""

    __slots__ = (
        "plan", "cases", "started_ts", "run_id", "resumed", "status", "reason", "duration_s",
        "error",
    )  # fmt: skip

    def __init__(self, plan: str) -> None:
        self.plan = plan
        self.cases: dict[str, _Case] = {}  # plan order (dicts keep insertion)
        self.started_ts: float | None = None
        self.run_id: str | None = None
        self.resumed = False
        self.status: str | None = None
        self.reason: str | None = None
        self.duration_s: float | None = None
        self.error: str | None = None

    def case(self, step_id: str) -> _Case:
        return self.cases.get(step_id) or self.cases.setdefault(step_id, _Case(step_id))


class JUnitReporter:
    """EventBus subscriber collecting step results; `close()` writes the XML file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        failures: WriteFailures | None = None,
        matrix_steps: Collection[str] = (),
    ) -> None:
        self.path = Path(path)
        self.matrix_steps = frozenset(matrix_steps)  # their instances are counted as matrix ones
        # Where a write that fails is remembered: the run's record, told by the command.
        self.failures = WriteFailures() if failures is None else failures
        self._suites: dict[str, _Suite] = {}
        self.tally = RunTally()  # the run's count, kept as the console keeps it
        self._closed = False
        # Fail now (OSError), not after the run, when the report cannot be written there.
        self._refuse_replacing()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.path.parent, prefix=".planrun-"):
                pass
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def _refuse_replacing(self) -> None:
        """OSError if the path is a link, FIFO or device: renamed over, it would be a plain
        file in their place (as root, `--junit /dev/null` would replace /dev/null)."""
        kind = not_replaceable(str(self.path))
        if kind is not None:
            raise OSError(errno.EEXIST, f"it is {kind}; not replacing it", str(self.path))

    def _suite(self, plan: str) -> _Suite:
        return self._suites.get(plan) or self._suites.setdefault(plan, _Suite(plan))

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, StepOutput):
            return
        self.tally.apply(event)
        suite = self._suite(event.plan)
        match event:
            case RunStarted():
                suite.started_ts = event.ts
                suite.run_id = event.run_id
                suite.resumed = bool(event.resumed)
                for step in event.steps or ():
                    suite.case(step["id"]).title = step.get("title")
            case RunFinished():
                suite.status = event.status
                suite.reason = event.reason
                suite.duration_s = event.duration_s
                suite.error = event.error
            case PlanDiff():
                self._plan_diff(suite, event)
            case _:
                self._step(suite.case(event.step), event)

    def _plan_diff(self, suite: _Suite, event: PlanDiff) -> None:
        for step_id in event.removed or ():
            case = suite.cases.get(step_id)
            if case is not None and case.status == "pending":
                del suite.cases[step_id]  # replaced before it ever ran: not part of this run
            elif case is not None and case.status == "failed":
                # the planner routed around it: the run document lists it only under
                # `revisions`, and it is no failure of the run
                case.status = "replaced"
                case.reason = f"replaced by the planner in revision {event.revision}"
        for step_id in event.added or ():
            suite.case(step_id)

    def _step(self, case: _Case, event: StepEvent) -> None:
        title = getattr(event, "title", None)
        if isinstance(title, str):
            case.title = title
        match event:
            case StepStarted():
                case.status = "running"
                case.attempts = event.attempt
                for iid in event.instances or ():  # a foreach step's: each one a testcase
                    self._suite(event.plan).case(str(iid))
            case StepRetrying(delay_s=delay):
                wait = (
                    f", retrying in {format_duration(delay)}"
                    if isinstance(delay, int | float)
                    else ""
                )
                case.notes.append(f"attempt {event.attempt} failed: {event.error}{wait}")
            case StepSucceeded() | StepFailed() | StepInterrupted():
                case.status = event.status
                case.duration_s = float(event.duration_s or 0.0)
                case.attempts = event.attempts
                case.error = getattr(event, "error", None)
                case.detail = present(getattr(event, "detail", None))
                case.output = present(getattr(event, "output", None))
            case StepSkipped():
                case.status = "skipped"
                case.reason = event.reason
            case StepResumed():  # kept from the previous run: reported as what it is
                case.status = event.status or "succeeded"
                case.duration_s = float(event.duration_s or 0.0)
                case.attempts = event.attempts or 0
                case.error = present(event.error)
                case.reason = present(event.reason)
                case.notes.append(_KEPT_NOTE)
            case StepCached():
                case.status = "cached"
                case.output = event.output

    __call__ = handle

    def close(self) -> None:
        """Write the report (once); a crash before close leaves no half-written file behind.
        A write that fails (a full disk) is remembered in planrun.reporters.failures."""
        if self._closed:
            return
        self._closed = True
        root = self.to_xml()
        ET.indent(root)
        try:  # as the HTML report: a temporary file renamed (none left on a full disk), 0644
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._refuse_replacing()  # again: it may have appeared during the run
            atomic_write(str(self.path), ET.tostring(root, "utf-8", xml_declaration=True))
        except OSError as exc:
            self.failures.add(self.path, exc)

    def to_xml(self) -> ET.Element:
        """The `<testsuites>` element: one `<testsuite>` per plan seen (normally one)."""
        root = ET.Element("testsuites")
        # junit-10.xsd (Jenkins) allows no `skipped` on <testsuites>: only per suite.
        totals = dict.fromkeys(("tests", "failures", "errors"), 0)
        total_time = 0.0
        for index, suite in enumerate(self._suites.values()):
            # The run's properties (its count as the console, `status` and the report say it)
            # on the run's own suite only: readers such as xunitparser merge all suites'
            # properties and refuse a name seen twice.
            said = counts_text(self.tally.step_counts(), self.matrix_steps) if index == 0 else None
            element, counts, seconds = _suite_xml(suite, said)
            root.append(element)
            for key in totals:
                totals[key] += counts[key]
            total_time += seconds
        if len(self._suites) == 1:
            root.set("name", xml_text(next(iter(self._suites))))
        for key, value in totals.items():
            root.set(key, str(value))
        root.set("time", f"{total_time:.3f}")
        return root


def _case_outcome(tc: ET.Element, case: _Case, stopped: str, counts: dict[str, int]) -> list[str]:
    """Mark test case `tc` failed, skipped or in error as its step ended (counting it), and
    return the lines for its system-out."""
    out: list[str] = list(case.notes)
    title = title_beyond_id(case.id, case.title)
    if title is not None:  # the step as people read it, first
        out.insert(0, title)
    status = case.status
    if status == "failed":
        counts["failures"] += 1
        failure = ET.SubElement(
            tc, "failure", message=xml_text(case.error or "failed"), type="failed"
        )
        failure.text = xml_text(case.detail or case.error or "failed")
    elif status == "ignored":
        out.append(f"ignored error: {case.error}")
        if case.detail:
            out.append(case.detail)
    elif status == "skipped":
        counts["skipped"] += 1
        ET.SubElement(tc, "skipped", message=xml_text(case.reason or "skipped"))
    elif status == "replaced":
        counts["skipped"] += 1
        ET.SubElement(tc, "skipped", message=xml_text(f"{case.reason}: {case.error or 'failed'}"))
        out.append(f"failed, then {case.reason}: {case.error or 'failed'}")
        if case.detail:
            out.append(case.detail)
    elif status == "pending":
        counts["skipped"] += 1
        ET.SubElement(tc, "skipped", message=f"not started: {stopped}")
    elif status == "interrupted":
        counts["errors"] += 1
        ET.SubElement(
            tc,
            "error",
            message=f"interrupted after {format_duration(case.duration_s)}: {stopped}",
            type="interrupted",
        )
    elif status == "running":
        counts["errors"] += 1
        ET.SubElement(tc, "error", message="started but no result was recorded", type="incomplete")
    elif status == "cached":
        out.append("cached: not run, output replayed from the cache")
    if case.attempts > 1:
        out.append(f"attempts: {case.attempts}")
    if case.output:
        out.append(case.output)
    return out


def _suite_xml(suite: _Suite, said: str | None) -> tuple[ET.Element, dict[str, int], float]:
    """One suite's element, its test counts and its time; `said`: the run's count, given for
    the run's own suite only, which alone carries the run's properties."""
    counts = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    element = ET.Element("testsuite", name=xml_text(suite.plan))
    props = {
        "run_id": suite.run_id,
        "status": suite.status,
        "reason": suite.reason,
        "resumed": str(suite.resumed).lower(),
        "counts": said,
    }
    if said is not None:  # run properties once: readers such as xunitparser refuse a name twice
        listed = ET.SubElement(element, "properties")
        for key, value in props.items():
            if value is not None:
                ET.SubElement(listed, "property", name=key, value=xml_text(str(value)))
    if suite.status is None:
        stopped = "the run did not finish"
    elif suite.reason and suite.reason != suite.status:
        stopped = f"run {suite.status} ({suite.reason})"
    else:
        stopped = f"run {suite.status}"
    case_time = 0.0
    for case in (
        suite.cases[sid] for sid in row_order(suite.cases)
    ):  # as every view lists them: sub-plan steps and instances after their step
        counts["tests"] += 1
        case_time += case.duration_s
        tc = ET.SubElement(
            element,
            "testcase",
            name=xml_text(case.id),
            classname=xml_text(suite.plan),
            time=f"{case.duration_s:.3f}",
        )
        out = _case_outcome(tc, case, stopped, counts)
        if out:
            ET.SubElement(tc, "system-out").text = xml_text("\n".join(out))
    seconds = suite.duration_s if isinstance(suite.duration_s, int | float) else case_time
    for key, count in counts.items():
        element.set(key, str(count))
    element.set("time", f"{seconds:.3f}")
    if suite.started_ts is not None:
        # JUnit's schema wants xs:dateTime without a zone; the value is UTC.
        when = datetime.fromtimestamp(suite.started_ts, UTC)
        element.set("timestamp", when.strftime("%Y-%m-%dT%H:%M:%S"))
    element.set("hostname", socket.gethostname())
    if suite.error:
        ET.SubElement(element, "system-err").text = xml_text(suite.error)
    return element, counts, float(seconds)
