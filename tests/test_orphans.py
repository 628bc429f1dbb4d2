"""After `kill -9` of planrun, the commands of its running steps live on (each has its own
session). The next run that takes over that state stops them before it starts any step — and
never touches a process that is not one of them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import (
    assert_no_process_left,
    hang_guard,
    planrun_process,
    spawn_planrun,
    unique_sleep,
    wait_until,
)

# Run again, the step writes down which of the killed run's processes were still alive then.
SEEN = """
import json, pathlib

def alive(pid):
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"Z", b"X")

names = ("first", "grand", "daemon")
seen = {n: alive(int(pathlib.Path(f"{n}.pid").read_text())) for n in names}
pathlib.Path("seen.json").write_text(json.dumps(seen))
"""


def alive(pid: int) -> bool:
    """A live process (a zombie, killed but not yet reaped by init, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] not in (b"Z", b"X")


def pid_in(path: Path) -> int:
    return int(path.read_text())


def write_plan(tmp_path: Path, mark: str) -> None:
    """`daemon` succeeds at once, leaving a background process behind on purpose; `build`
    runs a command with a grandchild until it is stopped (run again: it writes seen.json)."""
    (tmp_path / "seen.py").write_text(SEEN)
    daemon = f"{mark} > /dev/null 2>&1 < /dev/null & echo $! > daemon.pid"
    build = (
        f": {mark}\n"
        f"if [ -f first.pid ]; then exec {sys.executable} seen.py; fi\n"
        f"{mark} &\n"
        "echo $! > grand.pid\n"
        "echo $$ > first.tmp && mv first.tmp first.pid\n"
        "wait\n"
    )
    plan = {
        "name": "p",
        "steps": [
            {"id": "daemon", "tool": "shell", "args": {"cmd": daemon}},
            {"id": "build", "tool": "shell", "args": {"cmd": build}, "depends_on": ["daemon"]},
        ],
    }
    (tmp_path / "p.json").write_text(json.dumps(plan))


def kill_only_planrun(tmp_path: Path, child: str = "grand.pid") -> int:
    """Start the run, wait for its long step to be running, SIGKILL planrun alone (not its
    commands, unlike conftest.kill_9) and reap it; returns the pid of the step's command."""
    proc = spawn_planrun(
        "run", "p.json", "-q", cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    first = tmp_path / "first.pid"
    wait_until(first.exists, what="the step to start its command")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    pid = pid_in(first)
    assert alive(pid) and alive(pid_in(tmp_path / child))  # they outlive planrun
    return pid


def start_unrelated(mark: str, env: dict[str, str]) -> subprocess.Popen[Any]:
    """A process of our own, in its own session like a step's command."""
    return subprocess.Popen(
        ["sh", "-c", mark],
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )


def stopped_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "left running by the interrupted run" in line]


def cleanup(mark: str, *procs: subprocess.Popen[Any]) -> None:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert_no_process_left(mark)


def test_resume_stops_the_killed_runs_command_before_running_the_step_again(tmp_path):
    mark = unique_sleep(600)  # every command of the test runs it: found by assert_no_process_left
    write_plan(tmp_path, mark)
    unmarked = marked_other = None
    try:
        with hang_guard(120):
            first = kill_only_planrun(tmp_path)
            grand, daemon = pid_in(tmp_path / "grand.pid"), pid_in(tmp_path / "daemon.pid")
            env = {k: v for k, v in os.environ.items() if not k.startswith("PLANRUN_")}
            unmarked = start_unrelated(mark, env)
            other = {**env, "PLANRUN_RUN_ID": "0123456789ab", "PLANRUN_STEP_ID": "build"}
            marked_other = start_unrelated(mark, other)
            result = planrun_process("resume", "p.json", cwd=tmp_path)
        assert result.code == 0, result
        assert stopped_lines(result.err) == [
            f"planrun: stopped 1 command left running by the interrupted run "
            f"(step build, pid {first})"
        ], result.err
        # when `build` ran again, the killed run's command and its child were gone
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert seen == {"first": False, "grand": False, "daemon": True}
        assert not alive(first) and not alive(grand)
        # never touched: what a finished step left running on purpose, a process without the
        # marker, and one with another run's marker
        assert alive(daemon)
        assert unmarked.poll() is None and marked_other.poll() is None
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(pid_in(tmp_path / "daemon.pid"), signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            os.killpg(pid_in(tmp_path / "first.pid"), signal.SIGKILL)
        cleanup(mark, *(p for p in (unmarked, marked_other) if p is not None))


def test_a_run_on_the_killed_runs_state_stops_its_command_too(tmp_path):
    mark = unique_sleep(600)  # every command of the test runs it: found by assert_no_process_left
    write_plan(tmp_path, mark)
    try:
        with hang_guard(120):
            first = kill_only_planrun(tmp_path)
            (tmp_path / "daemon.pid").rename(tmp_path / "daemon.1.pid")  # a new one comes
            result = planrun_process("run", "p.json", cwd=tmp_path)
        assert result.code == 0, result
        assert len(stopped_lines(result.err)) == 1, result.err
        assert f"(step build, pid {first})" in result.err
        assert not alive(first)
        assert alive(pid_in(tmp_path / "daemon.1.pid"))  # what `daemon` left on purpose
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(pid_in(tmp_path / "daemon.1.pid"), signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            os.kill(pid_in(tmp_path / "daemon.pid"), signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            os.killpg(pid_in(tmp_path / "first.pid"), signal.SIGKILL)
        cleanup(mark)


@pytest.mark.slow  # a killed run, a resume and a real SIGINT with its grace period
def test_a_garbled_run_id_in_the_state_means_no_stopping_and_no_crash(tmp_path):
    mark = unique_sleep(600)  # every command of the test runs it: found by assert_no_process_left
    write_plan(tmp_path, mark)
    other = None
    try:
        with hang_guard(120):
            first = kill_only_planrun(tmp_path)
            state = tmp_path / ".planrun/state/p.json"
            doc = json.loads(state.read_text())
            # a run id that would match a process of our own if it were used as given
            doc["run_id"] = "a"
            state.write_text(json.dumps(doc))
            env = {**os.environ, "PLANRUN_RUN_ID": "a", "PLANRUN_STEP_ID": "build"}
            other = start_unrelated(mark, env)
            (tmp_path / "first.pid").rename(tmp_path / "killed.pid")  # build waits again
            # --grace 1s: the step's `sleep &` ignores SIGINT (a shell's background command),
            # so the run ends when the grace period does; how long it is plays no part here
            proc = spawn_planrun(
                "resume",
                "p.json",
                "-q",
                "--grace",
                "1s",
                cwd=tmp_path,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_until((tmp_path / "first.pid").exists, what="build to run again")
            assert alive(first) and other.poll() is None  # nothing was stopped
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)  # a bound on a hang
        assert proc.returncode == 130, err
        assert stopped_lines(err) == [] and "Traceback" not in err, err
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(pid_in(tmp_path / "daemon.pid"), signal.SIGKILL)
        with contextlib.suppress(OSError, ValueError):
            os.killpg(pid_in(tmp_path / "killed.pid"), signal.SIGKILL)
        cleanup(mark, *(p for p in (other,) if p is not None))


def test_a_run_after_a_finished_run_stops_nothing(tmp_path):
    """A state whose run ended: nothing is looked for, even a process carrying its marker."""
    mark = unique_sleep(600)  # every command of the test runs it: found by assert_no_process_left
    plan = {"name": "p", "steps": [{"id": "build", "tool": "shell", "args": {"cmd": "true"}}]}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    first = planrun_process("run", "p.json", cwd=tmp_path)
    assert first.code == 0, first
    run_id = json.loads((tmp_path / ".planrun/state/p.json").read_text())["run_id"]
    env = {**os.environ, "PLANRUN_RUN_ID": run_id, "PLANRUN_STEP_ID": "build"}
    same = start_unrelated(mark, env)
    try:
        again = planrun_process("run", "p.json", cwd=tmp_path)
        assert again.code == 0, again
        assert stopped_lines(again.err) == [], again.err
        assert same.poll() is None
    finally:
        cleanup(mark, same)


def test_the_marker_is_in_the_commands_environment_only(tmp_path):
    """Commands see PLANRUN_RUN_ID and PLANRUN_STEP_ID; expressions, fingerprints and cache
    keys do not: a cached step that reads the whole `env` is still a hit on the next run."""
    plan = {
        "name": "p",
        "steps": [
            {
                "id": "a",
                "tool": "shell",
                "args": {"cmd": 'echo "$PLANRUN_RUN_ID/$PLANRUN_STEP_ID"'},
            },
            {
                "id": "b",
                "tool": "shell",
                "args": {"cmd": "echo ${env | tojson} > /dev/null"},
                "cache": True,
            },
        ],
    }
    (tmp_path / "p.json").write_text(json.dumps(plan))
    for _ in range(2):
        result = planrun_process("run", "p.json", "--output", "json", cwd=tmp_path)
        assert result.code == 0, result
    state = json.loads((tmp_path / ".planrun/state/p.json").read_text())
    steps = {s["id"]: s for s in result.json["steps"]}
    assert steps["a"]["result"]["stdout"] == f"{state['run_id']}/a\n"
    assert state["steps"]["b"]["status"] == "cached"


def test_only_a_run_that_died_here_with_steps_running_is_looked_after(tmp_path):
    """The search is decided from the lock file a dead run left and the state: a finished run
    (no lock file left), or a lock written on another host or boot, asks for none."""
    from planrun.run.leftovers import valid_run_id
    from planrun.state import StateStore

    plan = {"name": "p", "steps": [{"id": "build", "tool": "shell", "args": {"cmd": "true"}}]}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    assert planrun_process("run", "p.json", cwd=tmp_path).code == 0
    path = tmp_path / ".planrun/state/p.json"
    store = StateStore(path, "p")
    store.acquire()
    assert store.left_running() is None  # a finished run: nothing looked for
    store.release()
    # the state of a run killed with `build` running, its lock left on another machine
    doc = json.loads(path.read_text())
    doc["status"], doc["steps"]["build"]["status"] = "running", "running"
    path.write_text(json.dumps(doc))
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock = path.with_name("p.json.lock")
    lock.write_text(f"{dead.pid}\nsome-other-boot pid:[1]\n")
    store = StateStore(path, "p")
    store.acquire()
    assert store.left_running() is None
    store.release()
    # ... or here: its id and its running step
    from planrun.state.lock import here

    lock.write_text(f"{dead.pid}\n{here()}\n")
    store = StateStore(path, "p")
    store.acquire()
    assert store.left_running() == (doc["run_id"], frozenset({"build"}))
    store.release()
    assert valid_run_id(doc["run_id"])
    for bad in ("", "a", "0123456789aZ", "../../0123456789ab", 12345678901234, None, "f" * 65):
        assert not valid_run_id(bad)


def test_a_sub_plans_command_that_ignores_sigterm_and_left_its_session_is_stopped(tmp_path):
    """SIGKILL after the grace; a command that called setsid but kept its environment is found
    by its marker; a sub-plan's step is named as the state names it."""
    mark = unique_sleep(600)
    push = (
        f": {mark}\n"
        "if [ -f first.pid ]; then exit 0; fi\n"
        "trap '' TERM\n"  # inherited by its children: nothing here ends on SIGTERM
        f"setsid {mark} &\n"
        "echo $! > setsid.pid\n"
        "echo $$ > first.tmp && mv first.tmp first.pid\n"
        "wait\n"
    )
    sub = {"name": "sub", "steps": [{"id": "push", "tool": "shell", "args": {"cmd": push}}]}
    (tmp_path / "sub.json").write_text(json.dumps(sub))
    plan = {"name": "p", "steps": [{"id": "deploy", "tool": "plan", "args": {"path": "sub.json"}}]}
    (tmp_path / "p.json").write_text(json.dumps(plan))
    try:
        with hang_guard(120):
            first = kill_only_planrun(tmp_path, "setsid.pid")
            alone = pid_in(tmp_path / "setsid.pid")
            assert os.getpgid(alone) == alone != first  # a session of its own
            result = planrun_process("resume", "p.json", cwd=tmp_path)
        assert result.code == 0, result
        lines = stopped_lines(result.err)
        assert len(lines) == 1, result.err
        assert lines[0].startswith("planrun: stopped 2 commands left running by the interrupted")
        for pid in (first, alone):
            assert f"step deploy/push, pid {pid}" in lines[0]
            assert not alive(pid)
    finally:
        for name in ("first.pid", "setsid.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.killpg(pid_in(tmp_path / name), signal.SIGKILL)
        cleanup(mark)
