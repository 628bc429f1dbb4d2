"""Reporters fed synthetic event streams: JSON Lines, JUnit XML and the console."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from planrun.reporters.console import ConsoleReporter
from planrun.reporters.jsonl import JsonLinesReporter
from planrun.reporters.junit import JUnitReporter
from planrun.run.events import EventBus
from tests.testkit import Event

PLAN = "demo"
T0 = 1795658824.123  # 2026-11-26T02:07:04.123Z
STEPS = [
    ("build", "shell"),
    ("test", "shell"),
    ("lint", "shell"),
    ("deploy", "http"),
    ("docs", "shell"),
    ("publish", "shell"),
    ("watch", "shell"),
    ("archive", "write_file"),
]


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self, step: float = 0.01) -> float:
        self.t += step
        return self.t


def ev(clock: Clock, name: str, step: str | None = None, **data: Any) -> Event:
    return Event(name, PLAN, step, data, ts=clock())


def failed_run() -> list[Event]:
    """build and test run in parallel (interleaved output), test is retried once, lint fails
    but is ignored, deploy fails for good, docs is skipped by `when`, publish by upstream,
    watch is interrupted when the run aborts, archive never starts."""
    c = Clock()
    steps = [{"id": s, "title": s.title(), "tool": t, "depends_on": []} for s, t in STEPS]
    return [
        ev(c, "run.started", run_id="r1", digest="d", resumed=False, variables={}, steps=steps),
        ev(c, "step.started", "build", attempt=1, fingerprint="f", status="running"),
        ev(c, "step.started", "test", attempt=1, fingerprint="f", status="running"),
        ev(c, "step.output", "build", stream="stdout", line="build line 1"),
        ev(c, "step.output", "test", stream="stdout", line="test line 1"),
        ev(c, "step.output", "build", stream="stdout", line="build line 2"),
        ev(c, "step.output", "test", stream="stderr", line="test line 2"),
        ev(c, "step.retrying", "test", attempt=1, error="command exited with code 1", delay_s=1.0),
        ev(c, "step.started", "test", attempt=2, fingerprint="f", status="running"),
        ev(c, "step.output", "test", stream="stdout", line="test line 3"),
        ev(
            c,
            "step.succeeded",
            "build",
            status="succeeded",
            attempts=1,
            duration_s=0.52,
            result={"exit_code": 0},
            fingerprint="f",
            output="build line 1\nbuild line 2\n",
            result_variable=None,
        ),
        ev(
            c,
            "step.succeeded",
            "test",
            status="succeeded",
            attempts=2,
            duration_s=1.25,
            result=None,
            fingerprint="f",
            output="test line 1\ntest line 2\ntest line 3\n",
            result_variable="t",
        ),
        ev(c, "step.started", "lint", attempt=1, fingerprint="f", status="running"),
        ev(
            c,
            "step.failed",
            "lint",
            status="ignored",
            attempts=1,
            duration_s=0.1,
            error="command exited with code 3",
            detail="$ ruff check\nE501 line too long",
            result=None,
            fingerprint="f",
            result_variable=None,
        ),
        ev(c, "step.skipped", "docs", status="skipped", reason="condition false"),
        ev(c, "step.started", "watch", attempt=1, fingerprint="f", status="running"),
        ev(c, "step.started", "deploy", attempt=1, fingerprint="f", status="running"),
        ev(c, "step.retrying", "deploy", attempt=1, error="HTTP 503", delay_s=0.5),
        ev(c, "step.started", "deploy", attempt=2, fingerprint="f", status="running"),
        ev(
            c,
            "step.failed",
            "deploy",
            status="failed",
            attempts=2,
            duration_s=2.0,
            error="command exited with code 1",
            detail="$ ./deploy.sh --prod\nerror: <connection refused> & \x1b[31mred\x1b[0m",
            result=None,
            fingerprint="f",
            result_variable=None,
        ),
        ev(c, "step.interrupted", "watch", status="interrupted", attempts=1, duration_s=0.3),
        ev(c, "step.skipped", "publish", status="skipped", reason="upstream failed: deploy"),
        ev(
            c,
            "run.finished",
            status="failed",
            reason="step_failed",
            duration_s=3.41,
            error="step 'deploy' failed: command exited with code 1",
        ),
    ]


def interrupted_run() -> list[Event]:
    c = Clock()
    steps = [{"id": s, "title": s, "tool": "shell", "depends_on": []} for s in ("a", "b")]
    return [
        ev(c, "run.started", run_id="r2", digest="d", resumed=True, variables={}, steps=steps),
        ev(c, "step.resumed", "a", status="succeeded", result=1, fingerprint="f"),
        ev(c, "step.started", "b", attempt=1, fingerprint="f", status="running"),
        ev(c, "step.interrupted", "b", status="interrupted", attempts=1, duration_s=1.5),
        ev(
            c,
            "run.finished",
            status="interrupted",
            reason="interrupted",
            duration_s=1.6,
            error=None,
        ),
    ]


def feed(reporter: Any, events: list[Event]) -> None:
    bus = EventBus()
    bus.subscribe(reporter.handle)
    for event in events:
        bus.emit(event)
    reporter.close()


# -- JSON Lines ------------------------------------------------------------------------------


def test_jsonl_lines_parse_and_carry_the_envelope(tmp_path: Path) -> None:
    path = tmp_path / "out" / "events.jsonl"  # the directory is created
    events = failed_run()
    feed(JsonLinesReporter(path), events)
    docs = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    expected = [e for e in events if e.event != "step.output"]
    assert [d["event"] for d in docs] == [e.event for e in expected]
    assert "step.output" not in {d["event"] for d in docs}
    for doc, event in zip(docs, expected, strict=True):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["ts"])
        assert doc["plan"] == PLAN
        assert doc.get("step") == event.step
        assert ("step" in doc) == (event.step is not None)
    assert docs[0]["ts"] == "2026-11-26T02:07:04.133Z"
    assert docs[0]["steps"][0] == {
        "id": "build",
        "title": "Build",
        "tool": "shell",
        "depends_on": [],
    }
    finished = docs[-1]
    assert (finished["status"], finished["reason"]) == ("failed", "step_failed")
    failed = next(d for d in docs if d["event"] == "step.failed" and d["step"] == "deploy")
    assert failed["error"] == "command exited with code 1"


def test_jsonl_appends_flushes_each_line_and_survives_odd_values(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"earlier": true}\n')
    reporter = JsonLinesReporter(path)
    reporter.handle(Event("step.succeeded", PLAN, "x", {"result": {"raw": b"\xffok", "tags": {1}}}))
    # visible before close: a `tail -f` sees each event as it happens
    lines = path.read_text("utf-8").splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["result"] == {"raw": "\ufffdok", "tags": [1]}
    reporter.handle(Event("step.output", PLAN, "x", {"stream": "stdout", "line": "hi"}))
    reporter.handle(Event("step.succeeded", PLAN, "y", {"output": "bad \udcff byte ✓"}))
    reporter.close()
    reporter.close()
    lines = path.read_text("utf-8").splitlines()
    assert len(lines) == 3
    assert json.loads(lines[2])["output"] == "bad \udcff byte ✓"


# -- JUnit XML -------------------------------------------------------------------------------


def test_junit_counts_statuses_and_failure_text(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "junit.xml"
    feed(JUnitReporter(path), failed_run())
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    assert suite.get("name") == PLAN
    counts = {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped", "time")}
    assert counts == {"tests": "8", "failures": "1", "errors": "1", "skipped": "3", "time": "3.410"}
    # <testsuites> has no `skipped` (junit-10.xsd allows none there)
    assert {k: root.get(k) for k in counts} == {**counts, "skipped": None}
    cases = {tc.get("name"): tc for tc in suite.findall("testcase")}
    assert list(cases) == [s for s, _ in STEPS]  # plan order, not finishing order
    assert all(tc.get("classname") == PLAN for tc in cases.values())
    assert cases["build"].get("time") == "0.520"
    # its output; its title `Build` only repeats the id: not shown, as on the console
    assert cases["build"].findtext("system-out") == "build line 1\nbuild line 2\n"
    assert len(cases["build"]) == 1
    # retried then passed: passed, with the retry noted
    assert cases["test"].find("failure") is None
    assert "attempt 1 failed: command exited with code 1" in cases["test"].findtext("system-out")
    failure = cases["deploy"].find("failure")
    assert failure is not None
    assert failure.get("message") == "command exited with code 1"
    assert failure.text == "$ ./deploy.sh --prod\nerror: <connection refused> & red"
    lint = cases["lint"]
    assert lint.find("failure") is None and lint.find("skipped") is None
    assert "ignored error: command exited with code 3" in lint.findtext("system-out")
    assert cases["docs"].find("skipped").get("message") == "condition false"
    assert cases["publish"].find("skipped").get("message") == "upstream failed: deploy"
    error = cases["watch"].find("error")
    assert error is not None and error.get("type") == "interrupted"
    assert (
        cases["archive"].find("skipped").get("message") == "not started: run failed (step_failed)"
    )
    assert suite.get("timestamp") == "2026-11-26T02:07:04"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["status"] == "failed" and props["reason"] == "step_failed"


@pytest.mark.parametrize("umask", [0o002, 0o077])
def test_report_files_are_0644_less_the_umask(tmp_path: Path, umask: int) -> None:
    # The JUnit file and the HTML report are written one way: readable by others, writable by
    # you alone, and never more open than the umask allows (0644 with the usual 022).
    from planrun.report import write_report

    old = os.umask(umask)
    try:
        feed(JUnitReporter(tmp_path / "junit.xml"), failed_run())
        write_report(str(tmp_path / "report.html"), "<html></html>")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"junit.xml": 0o644 & ~umask, "report.html": 0o644 & ~umask}


def test_junit_interrupted_and_resumed_run(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    feed(JUnitReporter(path), interrupted_run())
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("errors"), suite.get("failures")) == ("2", "1", "0")
    a, b = suite.findall("testcase")
    assert "previous run" in a.findtext("system-out")
    assert b.find("error").get("message") == "interrupted after 1.50s: run interrupted"


def test_junit_replanned_steps_and_unfinished_run(tmp_path: Path) -> None:
    c = Clock()
    steps = [{"id": s, "title": s, "tool": "shell", "depends_on": []} for s in ("a", "b", "c")]
    path = tmp_path / "j.xml"
    reporter = JUnitReporter(path)
    for event in [
        ev(c, "run.started", run_id="r", digest="d", resumed=False, variables={}, steps=steps),
        ev(c, "step.started", "a", attempt=1),
        ev(c, "step.failed", "a", status="failed", attempts=1, duration_s=0.1, error="boom"),
        ev(c, "plan.diff", removed=["b", "c"], added=["fix"], revised=[], revision=1, error="boom"),
        ev(c, "step.started", "fix", attempt=1),  # still running: no run.finished (a crash)
    ]:
        reporter.handle(event)
    reporter.close()
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert [tc.get("name") for tc in suite.findall("testcase")] == ["a", "fix"]
    assert (suite.get("failures"), suite.get("errors")) == ("1", "1")
    assert suite.find("testcase[@name='a']/failure").text == "boom"
    assert not list(tmp_path.glob(".*.tmp"))  # written through a temp file, then renamed


def test_junit_text_is_always_valid_xml(tmp_path: Path) -> None:
    path = tmp_path / "j.xml"
    reporter = JUnitReporter(path)
    output = "\x1b[1mbold\x1b[0m bell\x07 nul\x00 \ud800 ok ✓"
    reporter.handle(Event("step.succeeded", PLAN, "a", {"duration_s": 1, "output": output}))
    reporter.close()
    case = ET.parse(path).getroot().find("testsuite/testcase")
    assert case is not None
    assert case.findtext("system-out") == "bold bell\\x07 nul\\x00 \\xd800 ok ✓"


# -- console ---------------------------------------------------------------------------------

TS = r"\d\d:\d\d:\d\d\.\d{3}"


def console_text(events: list[Event], **options: Any) -> str:
    stream = io.StringIO()
    options.setdefault("color", False)
    options.setdefault("live", False)
    feed(ConsoleReporter(stream, **options), events)
    return stream.getvalue()


def test_console_plain_lines_have_timestamps_and_symbols() -> None:
    out = console_text(failed_run())
    lines = out.splitlines()
    assert re.fullmatch(TS + r" ▶ run demo started: 8 steps", lines[0])
    assert re.search(rf"^{TS} ▶ build started \[shell\]$", out, re.M)
    assert re.search(rf"^{TS} ▶ test started \[shell\] \(attempt 2\)$", out, re.M)
    assert re.search(rf"^{TS} ✓ build succeeded \(0\.52s\)$", out, re.M)
    assert re.search(
        rf"^{TS} ↻ test retrying in 1\.00s \(attempt 1 failed: command exited with code 1\)$",
        out,
        re.M,
    )
    assert re.search(
        rf"^{TS} ✗ deploy failed \(attempt 2\): command exited with code 1$", out, re.M
    )
    assert re.search(rf"^{TS} ! lint failed \(ignored\): command exited with code 3$", out, re.M)
    assert re.search(rf"^{TS} ⊘ publish skipped: upstream failed: deploy$", out, re.M)
    assert re.search(rf"^{TS} ■ watch interrupted after 0\.30s$", out, re.M)
    assert "\x1b[" not in out.replace("\x1b[31mred\x1b[0m", "")  # no colour unless asked


def test_console_parallel_output_is_one_block_per_step() -> None:
    out = console_text(failed_run())
    lines = out.splitlines()
    assert "[build]" not in out  # not streaming
    i = lines.index("  │ build line 1")
    assert lines[i - 1].endswith("✓ build succeeded (0.52s)")
    assert lines[i + 1] == "  │ build line 2"
    j = lines.index("  │ test line 1")
    assert lines[j - 1].endswith("✓ test succeeded (1.25s)")
    assert lines[j + 1 : j + 3] == ["  │ test line 2", "  │ test line 3"]
    # a failed step always shows its detail (command, stderr tail) under its line
    k = next(n for n, line in enumerate(lines) if "deploy failed" in line)
    assert lines[k + 1 : k + 3] == [
        "  │ $ ./deploy.sh --prod",
        "  │ error: <connection refused> & \x1b[31mred\x1b[0m",
    ]


def test_console_failure_block_shows_command_then_output_once() -> None:
    c = Clock()
    steps = [{"id": "t", "title": "t", "tool": "shell", "depends_on": []}]
    out = console_text(
        [
            ev(c, "run.started", steps=steps),
            ev(c, "step.started", "t", attempt=1, tool="shell"),
            ev(
                c,
                "step.failed",
                "t",
                status="failed",
                attempts=1,
                error="command exited with code 1",
                detail="$ pytest -x\nE   boom",
                output="collected 3 items\nFAILED test_x\nE   boom\n",
            ),
        ]
    )
    assert "  │ $ pytest -x\n  │ collected 3 items\n  │ FAILED test_x\n  │ E   boom\n" in out
    assert out.count("boom") == 1


def test_console_summary_names_failed_steps() -> None:
    out = console_text(failed_run(), resume_hint="plans/demo.yaml")
    tail = out[out.index("run failed") :].splitlines()
    assert re.search(
        r"run failed \(step_failed\): 8 steps \(2 succeeded, 1 ignored, 1 failed, "
        r"1 interrupted, 2 skipped, 1 pending\) in 3\.41s$",
        tail[0],
    )
    # the run's error only repeats deploy's, which the list shows
    assert tail[1:3] == ["failed steps:", "  ✗ deploy: command exited with code 1"]
    assert "lint:" not in "\n".join(tail)  # ignored is not failed
    assert "interrupted steps: watch" in tail
    assert tail[-1] == "resume with: planrun resume plans/demo.yaml"


def test_console_summary_shows_a_run_error_no_step_explains() -> None:
    c = Clock()
    out = console_text(
        [
            ev(c, "run.started", steps=[]),
            ev(
                c,
                "run.finished",
                status="failed",
                reason="no_plan",
                error="the planner returned nothing",
            ),
        ]
    )
    assert out.endswith("run failed (no_plan): 0 steps\n  the planner returned nothing\n")


def test_console_interrupted_run_prints_resume_hint() -> None:
    out = console_text(interrupted_run(), resume_hint="planrun -C ci resume 'my plan.yaml'")
    assert "resuming demo: 2 steps" in out
    assert "a kept from the previous run" in out
    # a kept step is counted as what it is (succeeded), and the summary says it was kept
    assert re.search(
        r"run interrupted: 2 steps \(1 succeeded, 1 interrupted; 1 kept from the previous run\) "
        r"in 1\.60s\n",
        out,
    )
    assert out.endswith("resume with: planrun -C ci resume 'my plan.yaml'\n")
    assert "resume with" not in console_text(interrupted_run())  # no hint given


def test_console_quiet_shows_only_failures_and_summary() -> None:
    out = console_text(failed_run(), quiet=True)
    assert " started" not in out and "▶" not in out and "succeeded (" not in out
    assert "build line" not in out and "lint" not in out and "skipped:" not in out
    lines = out.splitlines()
    # a failed attempt is a failure: its retry line shows (test's too, which then passed)
    assert lines[0].endswith(
        "↻ test retrying in 1.00s (attempt 1 failed: command exited with code 1)"
    )
    assert lines[1].endswith("↻ deploy retrying in 0.50s (attempt 1 failed: HTTP 503)")
    assert lines[2].endswith("✗ deploy failed (attempt 2): command exited with code 1")
    assert lines[3] == "  │ $ ./deploy.sh --prod"
    assert any(line.startswith("failed steps:") for line in lines)
    assert "run failed (step_failed)" in out


def test_console_stream_mode_prefixes_each_line() -> None:
    out = console_text(failed_run(), stream_output=True)
    lines = out.splitlines()
    streamed = [line for line in lines if line.startswith("[")]
    assert streamed == [
        "[build] build line 1",
        "[test] test line 1",
        "[build] build line 2",
        "[test] test line 2",
        "[test] test line 3",
    ]
    assert "  │ build line 1" not in lines  # not printed twice
    assert "  │ $ ./deploy.sh --prod" in lines  # a failure's detail still is


def test_console_notice_and_color() -> None:
    stream = io.StringIO()
    console = ConsoleReporter(stream, color=True, live=False)
    console.notice("skipping 'build': unchanged since last run")
    console.notice("state file is old", warning=True)
    quiet = io.StringIO()
    ConsoleReporter(quiet, quiet=True, color=False, live=False).notice("hidden")
    out = stream.getvalue()
    assert "skipping 'build': unchanged since last run" in out
    assert "\x1b[2m" in out and "\x1b[33;1m!\x1b[0m state file is old" in out
    assert quiet.getvalue() == ""


def test_console_ascii_stream_gets_ascii_symbols() -> None:
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    feed(ConsoleReporter(stream, color=False, live=False), interrupted_run())
    out = raw.getvalue().decode("ascii")
    assert "= a kept from the previous run" in out and "# b interrupted" in out


def test_console_sub_plan_steps_are_named_but_not_counted() -> None:
    c = Clock()
    steps = [{"id": "child", "title": "c", "tool": "plan", "depends_on": []}]
    events = [
        ev(c, "run.started", run_id="r", digest="d", resumed=False, variables={}, steps=steps),
        Event("run.started", "inner", None, {"steps": [{"id": "x"}]}, ts=c()),
        Event("step.started", "inner", "x", {"attempt": 1}, ts=c()),
        Event("step.succeeded", "inner", "x", {"duration_s": 0.1}, ts=c()),
        Event("run.finished", "inner", None, {"status": "succeeded"}, ts=c()),
        ev(c, "step.succeeded", "child", status="succeeded", duration_s=0.2, attempts=1),
        ev(c, "run.finished", status="succeeded", reason="completed", duration_s=0.3),
    ]
    out = console_text(events)
    assert "✓ inner:x succeeded (0.10s)" in out
    assert "run succeeded: 1 step (1 succeeded) in 0.30s" in out


def test_console_batches_writes_inside_an_event_loop() -> None:
    class CountingStream(io.StringIO):
        writes = 0

        def write(self, s: str) -> int:
            self.writes += 1
            return super().write(s)

    stream = CountingStream()
    console = ConsoleReporter(stream, color=False, live=False)

    async def run() -> None:
        for event in failed_run()[:12]:  # no failure in there: nothing forces a flush
            console.handle(event)
        assert stream.getvalue() == ""  # held until this loop iteration ends
        await asyncio.sleep(0)
        assert "build succeeded" in stream.getvalue()

    asyncio.run(run())
    assert stream.writes == 1
    console.close()


def test_live_view_renders_when_forced() -> None:
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=True, color=True)
    events = failed_run()
    for event in events[:9]:
        console.handle(event)
    assert console._live is not None
    # render the live view as Live would, while steps are running
    from rich.console import Console

    render = Console(file=io.StringIO(), force_terminal=True, width=100)
    render.print(console._render(30))
    view = render.file.getvalue()  # type: ignore[attr-defined]
    assert "1/8" in view or "0/8" in view
    assert "build" in view and "test" in view and "attempt 2" in view
    for event in events[9:]:
        console.handle(event)
    console.close()
    out = stream.getvalue()
    assert console._live is None
    assert "deploy failed" in out and "run failed (step_failed)" in out
    assert "  │ build line 1\n  │ build line 2\n" in out  # blocks printed above the view


def test_live_view_suspend_for_a_prompt() -> None:
    stream = io.StringIO()
    console = ConsoleReporter(stream, live=True, color=False)
    console.handle(failed_run()[0])
    with console.suspend():
        assert console._live is None
        stream.write("Run step 'deploy'? [y/N] ")
    assert console._live is not None
    console.close()
    assert "Run step 'deploy'?" in stream.getvalue()


def test_defaults_follow_the_stream(tmp_path: Path) -> None:
    with open(tmp_path / "log", "w") as f:
        console = ConsoleReporter(f)
        assert (console.color, console._live_wanted) == (False, False)
    assert ConsoleReporter().__dict__["_stream"] is not None


# -- speed -----------------------------------------------------------------------------------


def synthetic_steps(n: int) -> list[Event]:
    steps = [{"id": f"s{i}", "title": "", "tool": "shell", "depends_on": []} for i in range(n)]
    t = time.time()
    events = [Event("run.started", PLAN, None, {"steps": steps, "resumed": False}, ts=t)]
    for i in range(n):
        t += 0.0003
        events.append(Event("step.started", PLAN, f"s{i}", {"attempt": 1}, ts=t))
        events.append(
            Event(
                "step.succeeded",
                PLAN,
                f"s{i}",
                {"status": "succeeded", "attempts": 1, "duration_s": 0.0002, "output": None},
                ts=t,
            )
        )
    events.append(Event("run.finished", PLAN, None, {"status": "succeeded", "duration_s": 3.0}))
    return events


@pytest.mark.parametrize("kind", ["console", "jsonl"])
def test_10000_steps_are_all_reported(kind: str, tmp_path: Path) -> None:
    # What it costs per event is measured by bench/bench_reporters.py, not asserted here.
    events = synthetic_steps(10_000)
    out = tmp_path / "out"
    with contextlib.ExitStack() as stack:
        if kind == "console":
            stream = stack.enter_context(open(out, "w", encoding="utf-8"))
            reporter: Any = ConsoleReporter(stream, color=False, live=False)
        else:
            reporter = JsonLinesReporter(str(out))
        for event in events:
            reporter.handle(event)
        reporter.close()
    text = out.read_text(encoding="utf-8")
    assert "s9999" in text
    if kind == "jsonl":
        assert len(text.splitlines()) == len(events)
