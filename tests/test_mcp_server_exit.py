"""`planrun mcp` stopped by a signal leaves only once its answers are on stdout.

Raw JSON-RPC over the server's pipes, so the test decides when stdout is read: the answer of the
interrupted call is larger than the pipe, so the server can only finish writing it while the
client reads, and must not leave before.
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.test_mcp_server import (
    OPENING,
    no_leftover_processes,  # noqa: F401 (autouse fixture)
)

pytestmark = pytest.mark.slow

PAD = 300_000  # characters of one step's result: several times a pipe's capacity
F_GETPIPE_SZ = 1032  # fcntl command (Linux)

PLAN = """\
name: big
steps:
  - {id: big, tool: echo, args: {value: "${pad}"}}
  - {id: nap, tool: shell, args: {cmd: 'echo $$ > nap.pid; exec sleep 30'}, depends_on: [big]}
"""


def _call(request_id: int, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "plan_run", "arguments": arguments},
    }


def _send(pipe: Any, *messages: dict[str, Any]) -> None:
    pipe.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    pipe.flush()


def _answer(out: bytearray, request_id: int) -> dict[str, Any] | None:
    """The complete answer to `request_id` among the lines read so far."""
    for line in out.decode().splitlines(keepends=True):
        if line.endswith("\n") and (msg := json.loads(line)).get("id") == request_id:
            return msg
    return None


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe behind `fd`."""
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return buf[0]


def _blocked_in_write(pid: int) -> bool:
    """Whether a thread of the process is inside write(2) (x86-64 and arm64 numbers)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            call = (task / "syscall").read_text().split()[0]
        except (OSError, IndexError):
            continue
        if call in ("1", "64"):
            return True
    return False


def _read_available(fd: int, out: bytearray, wait_s: float) -> bool:
    """Read what the pipe holds (waiting up to wait_s for something); False at end of file."""
    ready, _, _ = select.select([fd], [], [], wait_s)
    if not ready:
        return True
    chunk = os.read(fd, 1 << 16)
    out += chunk
    return bool(chunk)


@pytest.mark.skipif(sys.platform != "linux", reason="pipe capacity and FIONREAD as on Linux")
def test_sigterm_waits_until_the_interrupted_answer_is_on_stdout(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "mcp"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    fd = proc.stdout.fileno()
    out = bytearray()
    try:
        _send(proc.stdin, *OPENING, _call(2, {"plan": PLAN, "variables": {"pad": "x" * PAD}}))
        # Keep reading (progress notifications) until the second step is running.
        pid_file = tmp_path / "nap.pid"
        deadline = time.monotonic() + 120  # a bound on a hang, not a speed
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the run never reached its second step"
            _read_available(fd, out, 0.05)
        # Stop reading: the answer (larger than the pipe) can only get out as we read.
        proc.send_signal(signal.SIGTERM)
        capacity = fcntl.fcntl(fd, F_GETPIPE_SZ)
        deadline = time.monotonic() + 120  # a bound on a hang, not a speed
        while proc.poll() is None and _unread(fd) < capacity // 2:
            assert time.monotonic() < deadline, "the server neither wrote its answer nor left"
            time.sleep(0.01)  # polling the condition above
        # A slow client: it reads nothing more until the server is stuck writing its answer
        # into the full pipe. The server must still be there then (it once left after a fixed
        # 0.2 s); an answer cut short by leaving early fails the checks below whenever it left.
        wait_until(
            lambda: (
                proc.poll() is not None or (_unread(fd) >= capacity and _blocked_in_write(proc.pid))
            ),
            what="the server stuck writing into the full pipe",
        )
        assert proc.poll() is None
        while _answer(out, 2) is None and _read_available(fd, out, 30):
            pass
        # Still serving until the client hangs up, but starting no new run.
        _send(proc.stdin, _call(3, {"plan": PLAN, "variables": {"pad": "y"}}))
        while _answer(out, 3) is None and _read_available(fd, out, 30):
            pass
        proc.stdin.close()  # hang up: the server leaves now
        while _read_available(fd, out, 30):
            pass
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    refused = _answer(out, 3)
    assert refused is not None and refused["result"]["isError"]
    assert "stopping" in refused["result"]["content"][0]["text"]
    answer = _answer(out, 2)
    assert answer is not None, "the interrupted call got no answer"
    doc = answer["result"]["structuredContent"]
    assert doc["status"] == "interrupted"
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["big"]["result"] == "x" * PAD
    assert steps["nap"]["status"] == "interrupted"
    assert code == 130  # interrupted, as `planrun run` stopped by a signal


def test_a_client_that_goes_away_interrupts_the_run_in_flight(tmp_path: Path) -> None:
    """A client that dies (stdin closed and nobody left to read stdout) cannot get an answer:
    its run is interrupted as a cancelled call's is (the step's process stopped, the state
    `interrupted`), and the server leaves, rather than running the plan to its end for no one."""
    plan = (
        "name: gone\nsteps:\n"
        "  - {id: nap, tool: shell, args: {cmd: 'echo $$ > nap.pid; exec sleep 300'}}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "mcp"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message in [*OPENING, _call(2, {"plan": plan})]:
            proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        pid_file = tmp_path / "nap.pid"
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", 120)
        nap = int(pid_file.read_text())
        proc.stdout.close()  # the client is gone: nobody reads, and its end of stdin closes
        proc.stdin.close()
        proc.wait(timeout=30)
        wait_until(lambda: not _alive(nap), 10, what="the step's process to be stopped")
        state = json.loads((tmp_path / ".planrun" / "state" / "gone.json").read_text())
        assert state["status"] == "interrupted", state
        assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# A client as a process of its own: it sends the requests in `requests.jsonl`, reads the
# server's answers until `until` appears (and says so in `reading`), then waits to be killed.
# The server's pipes lead only to it, as when an editor or agent runs `planrun mcp`.
CLIENT = """
import os, sys, time
os.write(1, open("requests.jsonl", "rb").read())
got = b""
while sys.argv[1].encode() not in got:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    got += chunk
open("reading", "w").write("yes")
time.sleep(300)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="pipe capacity and /proc as on Linux")
@pytest.mark.parametrize("when", ["mid-answer", "mid-run"])
def test_a_killed_client_ends_the_server_quietly_with_exit_0(tmp_path: Path, when: str) -> None:
    """A client that dies is how a stdio session ends: the server exited 1 when it was in the
    middle of writing an answer (a broken pipe), as if it had failed. Now it leaves with 0 and
    nothing on stderr, as when the client closes stdin; a run in flight is interrupted."""
    if when == "mid-answer":  # an answer larger than the pipe: the server blocks writing it
        call = _call(2, {"plan": PLAN.split("  - {id: nap")[0], "variables": {"pad": "x" * PAD}})
        until = '"id":2'
    else:
        nap = "name: gone\nsteps:\n  - {id: nap, run: 'echo $$ > nap.pid; exec sleep 300'}\n"
        call = _call(2, {"plan": nap})
        until = '"id":1'  # the answer to `initialize`
    (tmp_path / "requests.jsonl").write_text(
        "".join(json.dumps(m, separators=(",", ":")) + "\n" for m in [*OPENING, call])
    )
    to_server, from_client = os.pipe()
    to_client, from_server = os.pipe()
    server = subprocess.Popen(
        [sys.executable, "-m", "planrun", "mcp"],
        cwd=tmp_path,
        stdin=to_server,
        stdout=from_server,
        stderr=subprocess.PIPE,
    )
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, until], cwd=tmp_path, stdin=to_client, stdout=from_client
    )
    for fd in (to_server, from_client, to_client, from_server):
        os.close(fd)  # the test holds no end: the pipes lead only from one process to the other
    try:
        wait_until(lambda: (tmp_path / "reading").exists(), what="the client to read an answer")
        if when == "mid-answer":
            wait_until(lambda: _blocked_in_write(server.pid), what="the server blocked writing")
        else:
            pid_file = tmp_path / "nap.pid"
            wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the run")
        client.kill()
        client.wait()
        code = server.wait(timeout=60)
        err = server.stderr.read().decode()  # type: ignore[union-attr]
    finally:
        for proc in (client, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        server.stderr.close()  # type: ignore[union-attr]
    assert (code, err) == (0, ""), err
    if when == "mid-run":
        state = json.loads((tmp_path / ".planrun" / "state" / "gone.json").read_text())
        assert state["status"] == "interrupted", state
