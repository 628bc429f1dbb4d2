"""One duration format: the console, the status table and the JUnit messages say it alike."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from planrun.reporters.console import ConsoleReporter
from planrun.reporters.junit import JUnitReporter
from planrun.run.events import EventBus
from planrun.state import RunState, StepState, render_status_text
from planrun.text import format_duration
from tests.testkit import Event


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0.00s"),
        (0.421, "0.42s"),
        (9.994, "9.99s"),
        (10, "10.0s"),
        (12.34, "12.3s"),
        (59.94, "59.9s"),
        (60, "1m00s"),
        (123.4, "2m03s"),
        (3599.4, "59m59s"),
        (3600, "1h00m"),
        (3725, "1h02m"),
        (None, "-"),
        ("soon", "-"),
        (True, "-"),
    ],
)
def test_format(seconds: object, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_console_status_and_junit_agree(tmp_path: Path) -> None:
    took = 75.4  # 1m15s
    done = Event(
        "step.succeeded",
        "p",
        "build",
        {"status": "succeeded", "attempts": 1, "duration_s": took, "output": None},
    )
    stream = io.StringIO()
    console = ConsoleReporter(stream, color=False, live=False)
    junit = JUnitReporter(tmp_path / "j.xml")
    stopped = Event("step.interrupted", "p", "watch", {"status": "interrupted", "duration_s": took})
    retry = Event("step.retrying", "p", "flaky", {"attempt": 1, "error": "boom", "delay_s": took})
    bus = EventBus()
    bus.subscribe(console.handle)
    bus.subscribe(junit.handle)
    bus.emit(retry)
    bus.emit(done)
    bus.emit(stopped)
    console.close()
    junit.close()
    assert "build succeeded (1m15s)" in stream.getvalue()
    assert "watch interrupted after 1m15s" in stream.getvalue()
    assert "flaky retrying in 1m15s" in stream.getvalue()
    state = RunState(plan="p", status="succeeded", duration_s=took)
    state.steps["build"] = StepState(status="succeeded", attempts=1, duration_s=took)
    status = render_status_text(state)
    assert "plan p: succeeded, 1m15s" in status
    assert "1m15s" in status.splitlines()[-1]
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    error = suite.find("testcase[@name='watch']/error")
    assert error is not None and error.get("message", "").startswith("interrupted after 1m15s")
    assert "retrying in 1m15s" in (suite.findtext("testcase[@name='flaky']/system-out") or "")
