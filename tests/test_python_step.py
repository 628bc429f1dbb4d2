"""A `python` step is contained: sys.exit, KeyboardInterrupt and prints stay inside the step."""

from __future__ import annotations

import pytest

from tests.conftest import Result


def assert_no_planrun_frames(r: Result) -> None:
    """The user's own tracebacks are shown with a failed step; planrun's never are."""
    assert "/planrun/" not in r.out + r.err, r


MODULE = """
import sys


def exit0():
    sys.exit(0)


def exit3():
    sys.exit(3)


def exit_msg():
    sys.exit("bad things")


def interrupt():
    raise KeyboardInterrupt


def gen_exit():
    raise GeneratorExit


def noisy():
    print("hello from the step")
    print("to stderr", file=sys.stderr)
    return 1


async def noisy_async():
    print("async hello")
    return 2


def noisy_failure():
    print("what I saw before failing")
    raise ValueError("nope")
"""

PLAN = """
steps:
  - {id: exit0, tool: python, args: {function: "steplib:exit0"}, on_failure: continue}
  - {id: exit3, tool: python, args: {function: "steplib:exit3"}, on_failure: continue}
  - {id: exit_msg, tool: python, args: {function: "steplib:exit_msg"}, on_failure: continue}
  - {id: interrupt, tool: python, args: {function: "steplib:interrupt"}, on_failure: continue}
  - {id: gen_exit, tool: python, args: {function: "steplib:gen_exit"}, on_failure: continue}
  - {id: noisy, tool: python, args: {function: "steplib:noisy"}}
  - {id: noisy_async, tool: python, args: {function: "steplib:noisy_async"}}
  - {id: after, tool: echo, args: {value: done}, depends_on: [exit0, noisy]}
"""


@pytest.mark.e2e  # a real `python -m planrun` process
def test_exits_and_interrupts_fail_or_succeed_the_step_only(run, write):
    write("steplib.py", MODULE)
    write("plan.yaml", PLAN)
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert_no_planrun_frames(r)
    steps = {s["id"]: s for s in r.json["steps"]}  # stdout is the JSON document alone
    assert steps["exit0"]["status"] == "succeeded" and steps["exit0"]["result"] is None
    assert steps["exit3"]["status"] == "failed"
    assert steps["exit3"]["error"] == "python: steplib:exit0 called sys.exit(3)".replace(
        "exit0", "exit3"
    )
    assert steps["exit_msg"]["status"] == "failed"
    assert steps["exit_msg"]["error"] == "python: steplib:exit_msg called sys.exit('bad things')"
    assert steps["interrupt"]["status"] == "failed"
    assert steps["interrupt"]["error"] == "KeyboardInterrupt"
    assert steps["gen_exit"]["status"] == "failed"
    assert steps["gen_exit"]["error"] == "GeneratorExit"
    assert steps["noisy"]["result"] == 1 and steps["noisy_async"]["result"] == 2
    assert steps["after"]["status"] == "succeeded"
    assert "hello from the step" not in r.out and "async hello" not in r.out
    # the prints are the step's output, shown on the console like a command's
    assert "hello from the step" in r.err and "to stderr" in r.err and "async hello" in r.err
    status = run("status", "plan.yaml", "--output", "json")
    assert status.json["status"] == "failed", status
    assert {s["status"] for s in status.json["steps"]} == {"succeeded", "failed"}


CANCELS = """
import asyncio


async def cancels():
    raise asyncio.CancelledError("gave up")


def cancels_in_thread():
    raise asyncio.CancelledError()
"""


def test_a_function_raising_cancelled_error_fails_its_step(run, write):
    # Its own CancelledError is a failure like any exception: the step was not stopped, and
    # the run (which read it as interrupted) succeeded with a dependent skipped.
    write("cancellib.py", CANCELS)
    write(
        "plan.yaml",
        """
        steps:
          - {id: a, tool: python, args: {function: "cancellib:cancels"}, on_failure: continue}
          - {id: t, tool: python, args: {function: "cancellib:cancels_in_thread"}, on_failure: continue}
          - {id: after, tool: echo, args: {value: done}, depends_on: [a]}
        """,
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["status"] == "failed" and r.json["reason"] == "step_failed", r
    steps = {s["id"]: s for s in r.json["steps"]}
    assert (steps["a"]["status"], steps["a"]["error"]) == ("failed", "CancelledError: gave up")
    assert (steps["t"]["status"], steps["t"]["error"]) == ("failed", "CancelledError")
    assert steps["after"]["status"] == "skipped"


def test_an_exception_that_cannot_be_shown_is_named_by_its_type(run, write):
    # str() of it raises: the step names the function's exception, not the error of its str().
    write(
        "badexc.py",
        """
        class Unprintable(Exception):
            def __str__(self):
                raise RuntimeError("str failed")


        def fails():
            raise Unprintable()
        """,
    )
    write("plan.yaml", "steps:\n  - {id: a, tool: python, args: {function: 'badexc:fails'}}\n")
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["steps"][0]["error"] == "Unprintable", r
    assert "raise Unprintable()" in r.err, r  # its traceback, as for any exception


def test_prints_of_a_failing_function_are_in_its_failure(run, write):
    write("steplib.py", MODULE)
    write(
        "plan.yaml",
        "steps:\n  - {id: bad, tool: python, args: {function: 'steplib:noisy_failure'}}\n",
    )
    r = run("run", "plan.yaml", "--output", "json")
    assert r.code == 1, r
    assert r.json["steps"][0]["error"] == "ValueError: nope"
    assert "what I saw before failing" in r.err and "what I saw" not in r.out


def test_stream_shows_a_python_steps_prints_with_its_id(run, write):
    write("steplib.py", MODULE)
    write("plan.yaml", "steps:\n  - {id: noisy, tool: python, args: {function: 'steplib:noisy'}}\n")
    r = run("run", "plan.yaml", "--stream", "--output", "json")
    assert r.code == 0, r
    assert "[noisy] hello from the step" in r.err
    assert r.json["steps"][0]["result"] == 1
