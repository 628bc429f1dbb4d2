"""Retries say why: each failed attempt's error and the tail of its stderr, on the console, in
the state (`attempts_log`) and in the report, secrets masked."""

from __future__ import annotations

import html
import json
from pathlib import Path

from tests.conftest import assert_no_traceback

FLAKY = """
    variables: {token: "tok-SECRET-42"}
    secrets: [token]
    steps:
      - id: fetch
        tool: shell
        retries: 2
        retry_delay: 0
        args:
          cmd: |
            n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count
            echo "noise $n"
            echo "dialing with ${token}" >&2
            echo "connection reset (try $n)" >&2
            [ "$n" -ge 3 ]
"""


def test_each_failed_attempt_says_why_on_the_console_in_the_state_and_the_report(
    run, write, tmp_path: Path
) -> None:
    write("p.yaml", FLAKY)
    r = run("run", "p.yaml", "--report", "report.html")
    assert r.code == 0, r
    assert_no_traceback(r)
    # the console: each retry line is followed by the stderr tail of the attempt that failed
    assert "connection reset (try 1)" in r.err and "connection reset (try 2)" in r.err, r
    assert "noise 1" not in r.err  # stderr, not stdout
    assert "tok-SECRET-42" not in r.err and "dialing with ***" in r.err
    # the state
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    log = state["steps"]["fetch"]["attempts_log"]
    assert [e["attempt"] for e in log] == [1, 2]
    assert all(e["error"] == "command exited with code 1" for e in log), log
    assert log[0]["stderr_tail"] == "dialing with ***\nconnection reset (try 1)"
    assert all(isinstance(e["duration_s"], int | float) for e in log)
    assert "tok-SECRET-42" not in json.dumps(state)
    # the report
    page = html.unescape((tmp_path / "report.html").read_text())
    assert "connection reset (try 1)" in page and "connection reset (try 2)" in page
    assert "tok-SECRET-42" not in page


def test_the_last_failed_attempt_is_in_the_log_too(run, write, tmp_path: Path) -> None:
    write(
        "p.yaml",
        """
        steps:
          - id: down
            tool: shell
            retries: 1
            retry_delay: 0
            args: {cmd: "echo 'connection reset' >&2; exit 3"}
        """,
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    log = state["steps"]["down"]["attempts_log"]
    assert [(e["attempt"], e["stderr_tail"]) for e in log] == [
        (1, "connection reset"),
        (2, "connection reset"),
    ]
    r = run("run", "p.yaml", "--output", "json")  # a new run starts a new log
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    assert len(state["steps"]["down"]["attempts_log"]) == 2


def test_quiet_still_shows_each_failed_attempt_of_a_step_that_then_succeeded(
    run, write, tmp_path: Path
) -> None:
    """`--quiet` shows only failures and the summary: a failed attempt is a failure, and a
    step that passed on its third try is the flaky step a CI log must show."""
    write("p.yaml", FLAKY)
    r = run("run", "p.yaml", "-q")
    assert r.code == 0, r
    retries = [line for line in r.err.splitlines() if "fetch retrying" in line]
    assert len(retries) == 2, r
    assert "attempt 1 failed: command exited with code 1" in retries[0], retries
    assert "connection reset (try 1)" in r.err and "connection reset (try 2)" in r.err, r
    assert "tok-SECRET-42" not in r.err and "dialing with ***" in r.err, r
    assert "fetch started" not in r.err and "fetch succeeded" not in r.err, r  # still quiet
