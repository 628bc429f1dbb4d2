"""Ctrl-C and SIGTERM with real signals: the first stops the run (exit 130, state saved), the
second exits at once, and no signal ever prints a traceback or leaves a process behind."""

from __future__ import annotations

import json
import os
import pty
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import (
    assert_no_process_left,
    kill_9,
    planrun,
    spawn_planrun,
    unique_mark,
    unique_sleep,
    wait_for_command,
    wait_for_file,
    wait_until,
)

pytestmark = pytest.mark.slow


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    """Wait for `proc` to end; `timeout` bounds a hang (what a test waits out is far longer)."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out or "", err or ""


def steps_of(cwd: Path) -> dict[str, str]:
    status = planrun("status", "p.yaml", "--output", "json", cwd=cwd)
    assert status.code == 0, status
    return {s["id"]: s["status"] for s in json.loads(status.out)["steps"]}


BLOCKING_PYTHON = """
import pathlib, time

def block(seconds):
    pathlib.Path("started").touch()
    time.sleep(seconds)
    pathlib.Path("side-effect").touch()  # must never happen once the step was interrupted
    return 1
"""


# Two different signals: two of one kind sent back to back may arrive as one.
@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGINT, signal.SIGTERM]])
def test_a_blocking_python_step_does_not_keep_planrun_alive(
    write, tmp_path: Path, signals: list[int]
) -> None:
    write("blocker.py", BLOCKING_PYTHON)
    write(
        "p.yaml",
        "steps:\n  - {id: a, tool: python, args: {function: 'blocker:block', kwargs: {seconds: 600}}}\n",
    )
    proc = spawn_planrun(
        "run",
        "p.yaml",
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        },
    )
    wait_for_file(tmp_path / "started")
    for sig in signals:
        proc.send_signal(sig)
    code, _, err = finish(proc)  # the step would block 600 s: this would time out
    assert code == 130, err
    assert "Traceback" not in err
    assert not (tmp_path / "side-effect").exists()  # the process is gone: so is the thread
    assert steps_of(tmp_path)["a"] in ("interrupted", "running")


def test_ctrl_c_at_the_approval_prompt_exits_130(write, tmp_path: Path) -> None:
    write(
        "p.yaml",
        """
        steps:
          - {id: first, tool: echo, args: {value: 1}}
          - {id: gated, tool: echo, args: {value: 2}, approval: true, depends_on: [first]}
        """,
    )
    # Two different signals: two of one kind sent back to back may arrive as one.
    for signals in ([signal.SIGINT], [signal.SIGINT, signal.SIGTERM]):
        leader, follower = pty.openpty()  # a terminal: planrun asks y/N when `gated` is reached
        proc = spawn_planrun(
            "run",
            "p.yaml",
            cwd=tmp_path,
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
        )
        os.close(follower)
        seen = b""

        def asked(leader: int = leader) -> bool:
            nonlocal seen
            try:
                seen += os.read(leader, 4096)
            except OSError:
                return False
            return b"gated" in seen and b"?" in seen

        wait_until(asked, what="the approval question")
        for sig in signals:
            proc.send_signal(sig)
        code, _, _ = finish(proc)
        os.close(leader)
        assert code == 130, seen.decode(errors="replace")
        assert b"Traceback" not in seen
        assert steps_of(tmp_path)["first"] == "succeeded"


def test_a_second_ctrl_c_kills_the_commands_and_exits_at_once(write, tmp_path: Path) -> None:
    # The step survives the first Ctrl-C (its trap notes it, then it sleeps on) and the grace
    # period is ten minutes: only the second Ctrl-C can end the run within the test's bound.
    # It is sent once the first has reached the step: two sent back to back may arrive as one.
    mark = unique_mark()
    waiting = unique_sleep(600)
    cmd = f"trap 'touch interrupted' INT; : {mark}; while :; do {waiting}; done"
    write(
        "p.yaml", f"steps:\n  - {{id: stubborn, tool: shell, args: {{cmd: {json.dumps(cmd)}}}}}\n"
    )
    proc = spawn_planrun(
        "run", "p.yaml", "-q", "--grace", "10m", cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for_command(waiting)
        proc.send_signal(signal.SIGINT)
        wait_for_file(tmp_path / "interrupted")
        assert proc.poll() is None  # in the grace period
        proc.send_signal(signal.SIGINT)
        code, _, err = finish(proc, timeout=60)  # a bound on a hang: the grace is 10 minutes
    finally:
        kill_9(proc)  # a failure leaves no command behind
    assert code == 130 and "Traceback" not in err, err
    assert_no_process_left(mark)
    assert_no_process_left(waiting)


def test_ctrl_c_during_start_up_never_prints_a_traceback(write, tmp_path: Path) -> None:
    write("p.yaml", "steps:\n  - {id: a, tool: echo, args: {value: 1}}\n")
    rng = random.Random(12)
    for _ in range(20):
        proc = spawn_planrun(
            "validate",
            "p.yaml",
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(0.03, 0.4))  # a random moment of start-up, not a wait for it
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc)
        if "KeyboardInterrupt" in err and not re.search(r'File "[^"]*/planrun/[^"]*"', err):
            # The interpreter's own start-up, before the first line of planrun runs (site's
            # .pth files, runpy importing the package): out of planrun's reach.
            continue
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        assert code in (0, 130, -signal.SIGINT), (code, err)


def test_sigint_while_mcp_servers_start_still_prints_the_document(write, tmp_path: Path) -> None:
    # A server that takes its time to answer the handshake: SIGINT arrives before any step.
    mark = unique_mark()  # an argument it ignores, to tell it from other tests' servers
    write(
        "slow_server.py",
        "import pathlib, sys, time\npathlib.Path('server-started').touch()\ntime.sleep(600)\n",
    )
    write(
        "p.yaml",
        f"""
        servers:
          slow: {{command: {sys.executable}, args: [slow_server.py, {mark}]}}
        steps:
          - {{id: a, tool: slow.anything, args: {{}}}}
        """,
    )
    proc = spawn_planrun(
        "run",
        "p.yaml",
        "--output",
        "json",
        "--events",
        "e.jsonl",
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_file(tmp_path / "server-started")
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130 and "Traceback" not in err, err
    doc = json.loads(out)
    assert (doc["status"], doc["reason"]) == ("interrupted", "interrupted")
    events = [json.loads(line)["event"] for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert events[0] == "run.started" and events[-1] == "run.finished"
    assert_no_process_left(mark)


def test_sigint_while_mcp_servers_start_never_shows_a_secret(write, tmp_path: Path) -> None:
    """The run's document, its events and its state are masked from the first instant, not
    from when its first step is scheduled."""
    mark = unique_mark()
    write(
        "slow_server.py",
        "import pathlib, sys, time\npathlib.Path('server-started').touch()\ntime.sleep(600)\n",
    )
    write(
        "p.yaml",
        f"""
        secrets: [token]
        servers:
          slow: {{command: {sys.executable}, args: [slow_server.py, {mark}]}}
        steps:
          - {{id: a, tool: slow.anything, args: {{t: "${{token}}"}}}}
        """,
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--var", "token=hunter2", "--output", "json", "--events", "e.jsonl",
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for_file(tmp_path / "server-started")
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130 and "Traceback" not in err, err
    assert json.loads(out)["variables"]["token"] == "***", out
    state = (tmp_path / ".planrun/state/p.json").read_text()
    for shown in (out, err, (tmp_path / "e.jsonl").read_text(), state):
        assert "hunter2" not in shown, shown
    assert_no_process_left(mark)


QUICK_SERVER = """
import pathlib, sys, time
from mcp.server.mcpserver import MCPServer

if pathlib.Path("slow").exists():  # the resume's server: it never answers
    pathlib.Path("server-started").touch()
    time.sleep(600)
server = MCPServer("quick")

@server.tool()
def hello() -> str:
    return "hi"

server.run()
"""


def test_sigint_while_a_resume_starts_its_servers_keeps_the_kept_steps(
    write, tmp_path: Path
) -> None:
    """Stopped at once, a resumed run still shows what it keeps: the step that succeeded last
    time is `succeeded`, the one it would run again `pending`, in --output json and status."""
    mark = unique_mark()
    write("server.py", QUICK_SERVER)
    write(
        "p.yaml",
        f"""
        servers:
          quick: {{command: {sys.executable}, args: [server.py, {mark}]}}
        steps:
          - {{id: a, tool: quick.hello, args: {{}}}}
          - {{id: b, tool: shell, args: {{cmd: "test -f fixed"}}, depends_on: [a]}}
        """,
    )
    assert planrun("run", "p.yaml", cwd=tmp_path).code == 1
    (tmp_path / "slow").touch()
    proc = spawn_planrun(
        "resume", "p.yaml", "--output", "json", cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for_file(tmp_path / "server-started")
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130 and "Traceback" not in err, err
    doc = json.loads(out)
    assert (doc["status"], doc["reason"]) == ("interrupted", "interrupted"), doc
    want = {"a": "succeeded", "b": "pending"}
    assert {s["id"]: s["status"] for s in doc["steps"]} == want, doc
    assert steps_of(tmp_path) == want
    assert_no_process_left(mark)


LINGERING_SERVER = """
import pathlib, time
from mcp.server.mcpserver import MCPServer

server = MCPServer("lingering")

@server.tool()
def hello() -> str:
    return "hi"

server.run()  # until stdin closes: the run is over
pathlib.Path("closing").touch()
time.sleep(600)  # planrun's shutdown of it ends this (stdin closed, a grace, then a signal)
"""


def test_sigint_while_mcp_servers_shut_down_keeps_the_finished_run(write, tmp_path: Path) -> None:
    # Every step has run and the run is recorded; the signal comes while a server shuts down.
    mark = unique_mark()
    write("lingering_server.py", LINGERING_SERVER)
    write(
        "p.yaml",
        f"""
        servers:
          ling: {{command: {sys.executable}, args: [lingering_server.py, {mark}]}}
        steps:
          - {{id: a, tool: ling.hello, args: {{}}}}
        """,
    )
    proc = spawn_planrun(
        "run",
        "p.yaml",
        "--output",
        "json",
        "--events",
        "e.jsonl",
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_file(tmp_path / "closing")
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert "Traceback" not in err, err
    doc = json.loads(out)
    assert (doc["status"], doc["reason"]) == ("succeeded", "completed"), out
    assert code == 0, err
    assert steps_of(tmp_path) == {"a": "succeeded"}
    events = [json.loads(line)["event"] for line in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert events[-1] == "run.finished"
    assert_no_process_left(mark)


def test_mcp_http_server_stops_on_sigint(tmp_path: Path) -> None:
    proc = spawn_planrun(
        "mcp",
        "--http",
        "127.0.0.1:0",
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Listening (or failed): wait until it printed something, then interrupt it.
    wait_until(lambda: proc.poll() is not None or _listening(proc.pid), what="the server")
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == 130, err
    assert "never awaited" not in err and "Traceback" not in err, err


def _listening(pid: int) -> bool:
    import psutil

    try:
        return any(c.status == psutil.CONN_LISTEN for c in psutil.Process(pid).net_connections())
    except psutil.Error:
        return False


def _blocked_in_write(pid: int) -> bool:
    """Whether the process's main thread is inside write(2) (x86-64 and arm64 numbers)."""
    try:
        call = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    except (OSError, IndexError):
        return False
    return call in ("1", "64")


@pytest.mark.skipif(not Path("/proc/self/syscall").exists(), reason="needs /proc/PID/syscall")
def test_a_second_signal_ends_a_run_stuck_writing_to_a_full_pipe(write, tmp_path: Path) -> None:
    # `planrun run ... 2>&1 | less`, and less stops reading: planrun blocks writing its
    # progress. The loop cannot run then, but a second signal still ends the process.
    mark = unique_mark()
    write(
        "p.yaml",
        f"""
        steps:
          - {{id: chatty, tool: shell, args: {{cmd: ": {mark}; seq 200000"}}}}
          - {{id: after, tool: shell, args: {{cmd: ": {mark}; sleep 60"}}, depends_on: [chatty]}}
        """,
    )
    proc = spawn_planrun(
        "run", "p.yaml", "--stream", cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_until(lambda: _blocked_in_write(proc.pid), what="planrun stuck writing")
        # Two different signals: two of one kind sent at once may arrive as one.
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130  # a bound: stuck, it would never end
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_no_process_left(mark)
