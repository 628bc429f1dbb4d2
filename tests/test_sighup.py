"""SIGHUP (the terminal closed, an SSH session dropped) stops a run as SIGTERM does: the
commands' process groups are stopped, the state says `interrupted`, exit 130. A SIGHUP that
was ignored when planrun started (`nohup planrun run ...`) stays ignored: the run goes on.
SIGINT and SIGTERM stop a run even when they were ignored at start."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.conftest import (
    assert_no_process_left,
    kill_9,
    planrun,
    spawn_planrun,
    unique_mark,
    unique_sleep,
    wait_for_command,
    wait_for_file,
)


def _plan(tmp_path: Path, cmd: str) -> None:
    (tmp_path / "p.yaml").write_text(
        f"name: hup\nsteps:\n  - {{id: a, tool: shell, args: {{cmd: {json.dumps(cmd)}}}}}\n"
    )


# A bound, not a timing claim: should a command still miss the signal passed on, the kill after
# the grace period ends it, and these tests check what a stopped run leaves, not how long the
# grace is (tests/test_graceful_interrupts.py does).
GRACE = ("--grace", "1s")


def _hangup_as_default() -> None:
    """planrun started as from a terminal: SIGHUP not ignored, whoever started the suite
    (under `nohup` or a CI runner that ignores it, planrun would rightly keep ignoring it)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_sighup_interrupts_the_run_and_stops_its_commands(tmp_path: Path) -> None:
    mark = unique_mark()
    waiting = unique_sleep(600)
    _plan(tmp_path, f"touch started; : {mark}; {waiting}")
    proc = spawn_planrun(
        "run",
        "p.yaml",
        "-q",
        *GRACE,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_hangup_as_default,
    )
    wait_for_command(waiting)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)  # a bound on a hang
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert_no_process_left(mark)
    status = planrun("status", "p.yaml", "--output", "json", cwd=tmp_path)
    assert json.loads(status.out)["steps"][0]["status"] == "interrupted", status


def _started_ignoring(
    tmp_path: Path, *ignored: int, options: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """planrun started with `ignored` signals ignored (as nohup or a script's `&` leave them),
    once its step has started."""

    def preexec() -> None:
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)

    proc = spawn_planrun(
        "run",
        "p.yaml",
        "-q",
        *options,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec,
    )
    wait_for_file(tmp_path / "started")
    return proc


def _ignored_signals(pid: int) -> int:
    """The process's mask of ignored signals (bit N-1 for signal N), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn for {pid}")


def test_under_nohup_a_hangup_does_not_stop_the_run(tmp_path: Path) -> None:
    _plan(tmp_path, "touch started; while [ ! -e go ]; do sleep 0.02; done; echo done")
    proc = _started_ignoring(tmp_path, signal.SIGHUP)
    try:
        # The kernel's own record, which no timing can blur: touched at once after the
        # hangup, the step could end before a wrongly caught SIGHUP were acted on.
        assert _ignored_signals(proc.pid) & (1 << (signal.SIGHUP - 1))
        proc.send_signal(signal.SIGHUP)
        (tmp_path / "go").touch()
        _, err = proc.communicate(timeout=60)  # a bound on a hang
    finally:
        kill_9(proc)
    assert proc.returncode == 0, err


def test_sigint_stops_the_run_even_when_it_was_ignored_at_start(tmp_path: Path) -> None:
    # A script's `planrun run ... &` starts with SIGINT ignored; a SIGINT sent to planrun
    # itself still means "stop" (the contract's exit 130), as it did before.
    mark = unique_mark()
    waiting = unique_sleep(600)
    _plan(tmp_path, f"touch started; : {mark}; {waiting}")
    proc = _started_ignoring(tmp_path, signal.SIGINT, signal.SIGQUIT, options=GRACE)
    wait_for_command(waiting)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)  # a bound on a hang
    assert proc.returncode == 130, err
    assert_no_process_left(mark)
