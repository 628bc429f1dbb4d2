"""Interrupts are graceful: the first SIGINT/SIGTERM is passed on to every running step's process
group, planrun waits up to the grace period (`--grace`, plan `grace`, default 10s) for them to
end, then kills what is left; a second signal ends the wait at once. State is saved, exit 130."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from tests.conftest import (
    assert_no_process_left,
    planrun,
    spawn_planrun,
    unique_mark,
    unique_sleep,
    wait_for_command,
    wait_for_file,
    wait_until,
)
from tests.testkit import ALL_REPORTS

pytestmark = pytest.mark.slow


def _plan(tmp_path: Path, cleanup_s: int, mark: str, header: str = "") -> tuple[str, str]:
    """A plan whose one step traps INT and TERM and cleans up for `cleanup_s` s (writing
    done.txt at the end); returns the cleanup's own sleep command (to find its process) and
    the step's long sleep (to wait for before signalling: see `wait_for_command`)."""
    sleep = unique_sleep(cleanup_s)
    waiting = unique_sleep(600)
    cmd = (
        f"trap '{sleep}; echo cleanup done > done.txt; exit 0' INT TERM; "
        f"touch started; : {mark}; {waiting}"
    )
    (tmp_path / "p.yaml").write_text(
        f"name: p\n{header}steps:\n  - {{id: deploy, tool: shell, args: {{cmd: {json.dumps(cmd)}}}}}\n"
    )
    return sleep, waiting


def _status_of(tmp_path: Path) -> dict[str, str]:
    status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    assert status.code == 0, status
    doc = json.loads(status.out)
    return {"run": doc["status"], **{s["id"]: s["status"] for s in doc["steps"]}}


def _stop(proc: subprocess.Popen[str], *signals: int, between: Path | None = None) -> str:
    """Send the signals (waiting for `between` to exist after the first), wait for the exit."""
    proc.send_signal(signals[0])
    if between is not None:
        wait_for_file(between)
    for sig in signals[1:]:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)  # a bound: the steps sleep 600 s
    return err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_step_that_traps_the_signal_finishes_its_cleanup(tmp_path: Path, sig: int) -> None:
    mark = unique_mark()
    sleep, waiting = _plan(tmp_path, 1, mark)
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    wait_for_command(waiting)
    err = _stop(proc, sig)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert (tmp_path / "done.txt").read_text() == "cleanup done\n"
    assert _status_of(tmp_path) == {"run": "interrupted", "deploy": "interrupted"}
    assert_no_process_left(mark)
    assert_no_process_left(sleep)


@pytest.mark.parametrize(
    ("header", "flags"),
    [("grace: 0.2s\n", ()), ("grace: 5m\n", ("--grace", "0.2s")), ("", ("--grace", "200ms"))],
    ids=["plan-grace", "flag-over-plan", "flag"],
)
def test_a_cleanup_longer_than_the_grace_period_is_cut(
    tmp_path: Path, header: str, flags: tuple[str, ...]
) -> None:
    mark = unique_mark()
    sleep, waiting = _plan(tmp_path, 5, mark, header)
    proc = spawn_planrun(
        "run", "p.yaml", "-q", *flags, cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    wait_for_command(waiting)
    err = _stop(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    # Nothing of the step is left running, so the cut cleanup can never write its file.
    assert_no_process_left(mark)
    assert_no_process_left(sleep)
    assert not (tmp_path / "done.txt").exists()
    assert _status_of(tmp_path) == {"run": "interrupted", "deploy": "interrupted"}


def test_a_second_signal_ends_the_wait_at_once_and_the_state_is_saved(tmp_path: Path) -> None:
    mark = unique_mark()
    sleep = unique_sleep(600)
    waiting = unique_sleep(600)
    cmd = (
        f"trap 'touch cleaning; {sleep}; echo cleanup done > done.txt' INT TERM; "
        f"touch started; : {mark}; {waiting}"
    )
    (tmp_path / "p.yaml").write_text(
        "name: p\ngrace: 1h\nsteps:\n"
        f"  - {{id: deploy, tool: shell, args: {{cmd: {json.dumps(cmd)}}}}}\n"
    )
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    wait_for_command(waiting)
    # The grace is an hour: only the second signal can end this within the test's bound.
    err = _stop(proc, signal.SIGINT, signal.SIGINT, between=tmp_path / "cleaning")
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert_no_process_left(mark)
    assert_no_process_left(sleep)
    assert not (tmp_path / "done.txt").exists()
    assert _status_of(tmp_path) == {"run": "interrupted", "deploy": "interrupted"}


def test_a_bad_grace_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    result = planrun("run", "p.yaml", "--grace", "soon", cwd=tmp_path)
    assert result.code == 2, result
    assert "--grace" in result.err and "Traceback" not in result.err


def test_a_bad_plan_grace_is_invalid(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "grace: -1\nsteps:\n  - {id: a, tool: echo, args: {value: 1}}\n"
    )
    result = planrun("validate", "p.yaml", cwd=tmp_path)
    assert result.code == 3, result
    assert "grace" in result.out + result.err


def _in_a_terminal(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], int, bytes]:
    """planrun as the foreground job of a new pseudo-terminal (its controlling terminal):
    the process, the terminal's leader side and its INTR character (Ctrl-C)."""
    import fcntl

    leader, follower = pty.openpty()
    intr = termios.tcgetattr(follower)[6][termios.VINTR]

    def take_the_terminal() -> None:  # in the child, after setsid: make the pty ours
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", *args],
        cwd=tmp_path,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
        preexec_fn=take_the_terminal,
        env={**os.environ, "NO_COLOR": "1"},
    )
    os.close(follower)
    return proc, leader, intr if isinstance(intr, bytes) else bytes([intr])


def _reading(leader: int) -> tuple[threading.Thread, list[bytes]]:
    """A thread reading everything the terminal shows (so planrun never blocks writing to it)
    until the terminal's other side is closed."""
    seen: list[bytes] = []

    def read() -> None:
        try:
            while chunk := os.read(leader, 4096):
                seen.append(chunk)
        except OSError:  # EIO: every process holding the terminal is gone
            pass

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, seen


def test_ctrl_c_at_a_terminal_lets_the_cleanup_finish(tmp_path: Path) -> None:
    mark = unique_mark()
    sleep, waiting = _plan(tmp_path, 1, mark)
    proc, leader, intr = _in_a_terminal(tmp_path, "run", "p.yaml", "-q")
    reader, seen = _reading(leader)
    try:
        wait_for_command(waiting)
        os.write(leader, intr)  # the terminal sends SIGINT to its foreground process group
        code = proc.wait(timeout=60)  # a bound: the step sleeps 600 s
        reader.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    shown = b"".join(seen)
    assert code == 130, shown.decode(errors="replace")
    assert b"Traceback" not in shown
    assert (tmp_path / "done.txt").read_text() == "cleanup done\n"
    assert _status_of(tmp_path) == {"run": "interrupted", "deploy": "interrupted"}
    assert_no_process_left(mark)
    assert_no_process_left(sleep)


def test_a_step_that_traps_the_signal_and_exits_non_zero_is_interrupted_not_failed(
    tmp_path: Path,
) -> None:
    mark = unique_mark()
    waiting = unique_sleep(600)
    cmd = (
        f"test -e fixed && exit 0; trap 'echo trapped > trapped; exit 3' TERM; : {mark}; {waiting}"
    )
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n"
        f"  - {{id: deploy, tool: shell, args: {{cmd: {json.dumps(cmd)}}}}}\n"
        "  - {id: after, tool: shell, args: {cmd: 'touch after'}, depends_on: [deploy]}\n"
    )
    proc = spawn_planrun("run", "p.yaml", "-q", cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    wait_for_command(waiting)
    err = _stop(proc, signal.SIGTERM)
    assert proc.returncode == 130, err
    assert (tmp_path / "trapped").exists()
    assert _status_of(tmp_path) == {
        "run": "interrupted",
        "deploy": "interrupted",
        "after": "pending",
    }
    assert_no_process_left(mark)
    (tmp_path / "fixed").touch()
    again = planrun("resume", "p.yaml", "-q", cwd=tmp_path)
    assert again.code == 0, again
    assert _status_of(tmp_path) == {"run": "succeeded", "deploy": "succeeded", "after": "succeeded"}


def test_a_step_that_traps_the_signal_and_exits_0_is_interrupted_in_every_view(
    tmp_path: Path,
) -> None:
    """The run was interrupted while the step ran: its exit 0 after the signal says it ended
    cleanly, not that its work was done (as GitHub Actions marks a step cancelled, whatever
    it exits with). State, console, --output json, events and JUnit say `interrupted`, the
    exit is 130, nothing is cached or bound, and `resume` runs the step again."""
    mark = unique_mark()
    waiting = unique_sleep(600)
    cmd = (
        f"echo run >> runs.log; echo partial > out.txt; test -e fixed && exit 0; "
        f"trap 'exit 0' INT; : {mark}; {waiting}"
    )
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n"
        f"  - {{id: deploy, run: {json.dumps(cmd)}, outputs: [out.txt], result_variable: r}}\n"
        "  - {id: after, tool: echo, args: {value: '${r}'}, depends_on: [deploy]}\n"
    )
    proc = spawn_planrun(
        "run", "p.yaml", *ALL_REPORTS, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    wait_for_command(waiting)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)  # a bound: the step sleeps 600 s
    assert proc.returncode == 130, err
    assert_no_process_left(mark)
    assert _status_of(tmp_path) == {
        "run": "interrupted",
        "deploy": "interrupted",
        "after": "pending",
    }
    doc = json.loads(out)
    assert [(s["id"], s["status"]) for s in doc["steps"]] == [
        ("deploy", "interrupted"),
        ("after", "pending"),
    ], doc
    assert "r" not in doc["variables"], doc
    assert "deploy interrupted after" in err and "deploy succeeded" not in err, err
    events = [
        json.loads(line)["event"] for line in (tmp_path / "ev.jsonl").read_text().splitlines()
    ]
    assert "step.interrupted" in events and "step.succeeded" not in events, events
    junit = (tmp_path / "junit.xml").read_text()
    assert '<testcase name="deploy"' in junit and 'type="interrupted"' in junit, junit
    info = planrun("cache", "info", "--output", "json", cwd=tmp_path)
    assert info.code == 0 and json.loads(info.out)["entries"] == 0, info
    (tmp_path / "fixed").touch()
    again = planrun("resume", "p.yaml", "--output", "json", cwd=tmp_path)
    assert again.code == 0, again
    assert "running 'deploy' again: interrupted last time" in again.err, again
    assert (tmp_path / "runs.log").read_text() == "run\nrun\n"


def test_a_step_waiting_to_retry_is_interrupted_without_waiting(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n"
        "  - {id: flaky, run: 'touch tried; exit 1', retries: 3, retry_delay: 1h}\n"
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--events", "ev.jsonl", cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    events = tmp_path / "ev.jsonl"
    wait_until(lambda: events.exists() and "step.retrying" in events.read_text())
    err = _stop(proc, signal.SIGINT)  # the wait is an hour: only the interrupt ends it
    assert proc.returncode == 130, err
    status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    (step,) = json.loads(status.out)["steps"]
    assert (step["status"], step["attempts"]) == ("interrupted", 1), status


def test_a_step_interrupted_while_waiting_to_retry_reads_the_same_in_every_view(
    tmp_path: Path,
) -> None:
    """Its failed attempt is in the attempts log; the step itself was interrupted, not failed:
    `run --output json` and `status --output json` (read from the state) give it the same
    fields, error included."""
    (tmp_path / "p.yaml").write_text(
        "name: p\nsteps:\n  - {id: flaky, run: 'exit 1', retries: 3, retry_delay: 1h}\n"
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--output", "json", "--events", "ev.jsonl", cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    events = tmp_path / "ev.jsonl"
    wait_until(lambda: events.exists() and "step.retrying" in events.read_text())
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)  # a bound: the wait is an hour
    assert proc.returncode == 130, err
    status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    assert status.code == 0, status
    (step,) = json.loads(out)["steps"]
    assert (step["status"], step["attempts"], step["error"]) == ("interrupted", 1, None), step
    assert json.loads(status.out)["steps"] == [step], status
