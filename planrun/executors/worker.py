"""The functions the Dask executor runs ON workers: start a step's process, track it, kill it.

This module imports only the standard library at top level so that it can be imported (and
pickled by reference) anywhere; `distributed` and `psutil`, which every Dask worker has, are
imported inside the functions that need them.

Every function returns plain data. A command's non-zero exit is not an exception here: the
client side (planrun/executors/dask.py) decides what fails, so a step fails with exactly the
error the local tools would raise.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: asyncio, psutil, distributed and the python
# tool: only in the worker code path that uses each.
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

ATTEMPT_TOPIC = "planrun.attempt"
OUTPUT_TOPIC = "planrun.output"
TASK_ENV = "PLANRUN_DASK_TASK"  # set in each step's environment: finds the processes of a task
KILL_GRACE_S = 0.5  # SIGTERM first, SIGKILL the group after this (as the local shell tool)
_FORGET_CANCELLED_S = 3600.0

_lock = threading.Lock()
_running: dict[str, subprocess.Popen[bytes]] = {}  # task key -> the step's process (group leader)
_cancelled: dict[str, float] = {}  # task key -> when kill_task was asked for it
_own_start: dict[int, float | None] = {}  # this worker's start time, to tell it from pid reuse


def _record_dir() -> str:
    """Per-host, per-user directory of running steps, so that a later task can reap orphans.

    Raises OSError when the directory is not this user's alone: records there could not be
    trusted to name processes to kill.
    """
    path = os.path.join(tempfile.gettempdir(), f"planrun-dask-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise PermissionError(f"{path} is not a private directory of this user")
    return path


def _proc_start_time(pid: int) -> float | None:
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:
        return None


def _is_alive(pid: int, started: float | None) -> bool:
    """Whether the process `pid` started at `started` still runs (a zombie has died)."""
    import psutil

    try:
        p = psutil.Process(pid)
        return p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _write_record(key: str) -> str | None:
    """Note on this host's disk that this worker process is about to run task `key`.

    Written before the process starts, so that a worker killed at any moment leaves a record.
    The step's processes carry TASK_ENV=key in their environment, which is how they are found.
    """
    try:
        path = os.path.join(_record_dir(), key + ".json")
        pid = os.getpid()
        if pid not in _own_start:  # by pid: a forked worker has its own
            _own_start[pid] = _proc_start_time(pid)
        record = {"owner": pid, "owner_started": _own_start[pid]}
        with open(path, "w") as fh:
            json.dump(record, fh)
        return path
    except OSError:
        return None


def _remove(path: str | None) -> None:
    """Remove a file of ours (a task's record, a run list's index file) if it is there."""
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def reap_orphans(starting: str | None = None) -> list[int]:
    """Kill the processes of steps whose worker died (SIGKILL, OOM) without cleaning up.

    Steps run in their own session, so they outlive a killed worker. Every worker calls this
    before it starts a step (`starting`: that task's key), and the client after a lost worker;
    it returns the pids killed. An earlier attempt of the task about to start is killed even
    while its worker still shows as alive: Dask runs a task again once the worker's connections
    close, which can be before that worker has finished exiting, and a key is never run twice
    at once (each call makes a new one)."""
    try:
        import psutil
    except ImportError:
        return []
    orphaned: dict[str, str] = {}  # task key -> its record
    try:
        directory = _record_dir()
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path) as fh:
                record = json.load(fh)
            owner = int(record["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        key = name.removesuffix(".json")
        if key != starting and (
            owner == os.getpid() or _is_alive(owner, record.get("owner_started"))
        ):
            continue  # the owner is alive and cleans up after itself
        orphaned[key] = path
    if not orphaned:
        return []
    killed = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TASK_ENV) in orphaned:
                p.kill()
                killed.append(p.pid)
        except (OSError, psutil.Error):
            pass  # gone, or not ours to read
    for path in orphaned.values():
        _remove(path)
    return sorted(killed)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def kill_task(key: str, sig: int = signal.SIGTERM, grace: float = KILL_GRACE_S) -> bool:
    """Stop the step of task `key` on this worker (run on every worker by `client.run`).

    Marks the key cancelled, so that a task that has not started its process yet never does;
    sends `sig` to the step's process group (SIGTERM, or the signal that interrupted the run),
    SIGKILLs it after `grace` seconds (KILL_GRACE_S, or the run's grace period), and returns
    once the process is reaped. Returns whether there was a process. A coroutine: the waiting
    runs on the worker's event loop without blocking it.
    """
    import asyncio

    now = time.monotonic()
    with _lock:
        for old in [k for k, t in _cancelled.items() if now - t > _FORGET_CANCELLED_S]:
            del _cancelled[old]
        _cancelled[key] = now
        proc = _running.get(key)
    if proc is None:
        return False

    def reaped() -> bool:
        with _lock:
            return _running.get(key) is not proc  # the task's thread is done with it

    _kill_group(proc.pid, sig)
    for wait in (grace, 2.0):
        deadline = time.monotonic() + wait
        while not reaped() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if reaped():
            break
        _kill_group(proc.pid, signal.SIGKILL)  # the leader is unreaped: its pgid is still ours
    return True


def _worker_address() -> str | None:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except Exception:  # not on a worker (called directly, e.g. in a unit test)
        return None


def _log_event(topic: str, msg: dict[str, Any]) -> None:
    """Send an event to the client through the scheduler (thread-safe, best effort)."""
    try:
        from distributed import get_worker

        worker = get_worker()
        worker.loop.add_callback(worker.log_event, topic, msg)
    except Exception:
        pass


def _mark_attempt(key: str) -> dict[str, Any]:
    """Tell the client this task started here: a second marker for a key means a re-execution."""
    info = {"key": key, "worker": _worker_address(), "pid": os.getpid(), "time": time.time()}
    _log_event(ATTEMPT_TOPIC, info)
    return info


def _pump(
    pipe: Any, sink: Any, emit: Callable[[str], None] | None
) -> None:  # pragma: no cover - runs in a thread
    """Read the pipe into `sink` (a CappedOutput: memory stays bounded, as locally), passing
    each line to `emit`, split as the local shell tool splits them."""
    from planrun.tools.cmdoutput import LineSplitter

    lines = LineSplitter(sink.limit) if emit is not None else None
    while chunk := pipe.read1(65536):
        sink.write(chunk)
        if lines is not None and emit is not None:
            for line in lines.feed(chunk):
                emit(line.decode("utf-8", errors="replace"))
    if lines is not None and emit is not None:
        for line in lines.flush():
            emit(line.decode("utf-8", errors="replace"))
    pipe.close()


def _feed(pipe: Any, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        pipe.close()


def _start_pipes(
    key: str,
    proc: subprocess.Popen[bytes],
    out: Any,
    err: Any,
    stdin: bytes | None,
    stream: bool,
) -> list[threading.Thread]:
    """Threads that collect stdout and stderr (and publish each line when `stream`) and feed
    stdin; started."""

    def emitter(stream_name: str) -> Callable[[str], None] | None:
        if not stream:
            return None
        return lambda line: _log_event(
            OUTPUT_TOPIC, {"key": key, "stream": stream_name, "line": line}
        )

    threads = [
        threading.Thread(target=_pump, args=(proc.stdout, out, emitter("stdout")), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, err, emitter("stderr")), daemon=True),
    ]
    if stdin is not None:
        threads.append(threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True))
    for t in threads:
        t.start()
    return threads


def _deadline(
    key: str, proc: subprocess.Popen[bytes], timeout: float | None, timed_out: threading.Event
) -> threading.Timer | None:
    """A started timer that stops the process group at `timeout` (and sets `timed_out`)."""
    if not timeout:
        return None

    def on_deadline() -> None:  # a backstop: the client's own timeout normally fires first
        with _lock:
            if _running.get(key) is not proc:
                return
        timed_out.set()
        _kill_group(proc.pid, signal.SIGTERM)
        time.sleep(KILL_GRACE_S)
        with _lock:  # still running means still unreaped: the pgid cannot have been reused
            if _running.get(key) is proc:
                _kill_group(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, on_deadline)
    timer.daemon = True
    timer.start()
    return timer


def _run_process(
    key: str,
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdin: bytes | None,
    timeout: float | None,
    stream: bool,
    output: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run argv in its own session; wait for it, a cancel request or the deadline.

    Returns {"status": "ok"|"timeout"|"cancelled"|"launch_error", "stdout": bytes-as-text,
    "stderr", "exit_code", "message", "worker"}.
    """
    attempt = _mark_attempt(key)
    reap_orphans(key)
    base: dict[str, Any] = {"worker": attempt["worker"], "pid": attempt["pid"]}
    env = {**env, TASK_ENV: key}
    record = _write_record(key)
    with _lock:
        if key in _cancelled:
            _remove(record)
            return {**base, "status": "cancelled", "stdout": "", "stderr": "", "exit_code": None}
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: cancel kills the whole tree
            )
        except OSError as exc:
            _remove(record)
            return {
                **base,
                "status": "launch_error",
                "error": type(exc).__name__,
                "filename": exc.filename,
                "strerror": exc.strerror or str(exc),
            }
        _running[key] = proc
    out, err = _sinks(output or {})
    threads = _start_pipes(key, proc, out, err, stdin, stream)
    timed_out = threading.Event()
    timer = _deadline(key, proc, timeout, timed_out)
    try:
        proc.wait()  # a plain blocking wait: no polling delay on a step's end
    finally:
        if timer is not None:
            timer.cancel()
        with _lock:
            cancelled = key in _cancelled
        status = "timeout" if timed_out.is_set() else "cancelled" if cancelled else "ok"
        if status != "ok":
            _kill_group(proc.pid, signal.SIGKILL)  # what is left of the group after a stop
        proc.wait()
        with _lock:
            _running.pop(key, None)
            _cancelled.pop(key, None)
        _remove(record)
    for t in threads:
        # A background child that kept the pipes open would block us forever; its output is lost.
        t.join(timeout=None if status == "ok" else KILL_GRACE_S)
    return {
        **base,
        "status": status,
        "exit_code": proc.returncode,
        "stdout": out.finish().decode("utf-8", errors="replace"),
        "stderr": err.finish().decode("utf-8", errors="replace"),
    }


_WHOLE = {"limit": sys.maxsize}


def _sinks(output: dict[str, Any]) -> tuple[Any, Any]:
    """The (stdout, stderr) CappedOutput of a step: output: {limit, logs: [stdout path, stderr
    path], secrets} as the client worked them out (the local tool's limit, log files and
    masks); without them, the default limit and no log file."""
    from planrun.tools.cmdoutput import DEFAULT_LIMIT, CappedOutput

    limit = int(output.get("limit") or DEFAULT_LIMIT)
    logs = output.get("logs") or [None, None]
    forms = [str(f) for f in output.get("secrets") or []]
    return (
        CappedOutput(limit, logs[0], (lambda: forms) if forms else None),
        CappedOutput(limit, logs[1], (lambda: forms) if forms else None),
    )


# A `run:` list in one process: each script by its own `/bin/sh -c`, in order, ending at the
# first that fails with its exit code; its 0-based index is written to the file named by $1 (an
# argument, not a variable: the scripts' environment stays the step's).
_RUN_LIST = 'f=$1; shift; i=0; for c do /bin/sh -c "$c" || { s=$?; echo $i >"$f"; exit $s; }; i=$((i+1)); done'


def run_shell(key: str, request: dict[str, Any]) -> dict[str, Any]:
    """Run a `shell` step on this worker.

    request: {argv, cwd (absolute: resolved by the client, the filesystem is assumed shared),
    env_set / env_unset (applied over the worker's environment), stdin, timeout (seconds, a
    backstop for the client's own), stream (send output lines as events), run_list (a `run:`
    list's scripts, run instead of argv; the reply's failed_index is the one that failed)}.
    """
    env = dict(os.environ)
    for name in request.get("env_unset") or []:
        env.pop(name, None)
    env.update(request.get("env_set") or {})
    env.update(request.get("marks") or {})
    stdin = request.get("stdin")
    argv, index_file = list(request["argv"]), None
    if request.get("run_list"):
        fd, index_file = tempfile.mkstemp(prefix="planrun-run-list-")
        os.close(fd)
        argv = ["/bin/sh", "-c", _RUN_LIST, "sh", index_file, *request["run_list"]]
    try:
        result = _run_process(
            key,
            argv,
            cwd=request["cwd"],
            env=env,
            stdin=None if stdin is None else stdin.encode(),
            timeout=request.get("timeout"),
            stream=bool(request.get("stream")),
            output=request.get("output"),
        )
        if index_file is not None:
            with open(index_file) as f:
                text = f.read().strip()
            result["failed_index"] = int(text) if text.isdigit() else None
    finally:
        _remove(index_file)
    return result


def run_python(key: str, request: dict[str, Any]) -> dict[str, Any]:
    """Run a `python` step on this worker, in a child interpreter so that cancel can kill it.

    request: {args (the step's args), step_id, base_cwd (planrun's working directory, made
    importable as planrun does locally), timeout}. The child runs planrun's own python tool, so
    results and errors are the local ones; its answer is in "reply": {"ok": value} or
    {"failed": message, "detail": text}.
    """
    payload = json.dumps(
        {"args": request["args"], "step_id": request["step_id"], "cwd": request["base_cwd"]}
    )
    # -P: no script directory on sys.path (it holds dask.py, which would shadow Dask).
    argv = [sys.executable, "-P", os.path.abspath(__file__), "--planrun-python-child"]
    result = _run_process(
        key,
        argv,
        cwd=request["base_cwd"],
        env={**os.environ, **(request.get("marks") or {})},
        stdin=payload.encode(),
        timeout=request.get("timeout"),
        stream=False,
        output=_WHOLE,  # the answer is the last line: never cut (the local tool's is not)
    )
    if result["status"] != "ok":
        return result
    # The answer is the last line of stdout; the function's own prints went to stderr.
    lines = result["stdout"].splitlines()
    try:
        result["reply"] = json.loads(lines[-1]) if lines else None
    except ValueError:
        result["reply"] = None
    return result


def _python_child() -> None:  # pragma: no cover - runs in the child interpreter
    """Run planrun's python tool on the request read from stdin; print the answer last."""
    import asyncio

    try:
        import planrun.tools.python  # noqa: F401
    except ImportError:  # planrun not installed on the worker: use the copy this file is in
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    from planrun.tools.base import ToolContext, ToolFailed
    from planrun.tools.python import run_python as local_run_python

    request = json.loads(sys.stdin.read())
    # The function's prints must not mix with the answer: point fd 1 (and sys.stdout) at stderr.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    ctx = ToolContext(step_id=request["step_id"], cwd=request["cwd"], env=dict(os.environ))
    try:
        doc: dict[str, Any] = {"ok": asyncio.run(local_run_python(request["args"], ctx))}
    except ToolFailed as exc:
        doc = {"failed": exc.message, "detail": exc.detail, "result": exc.result}
    with os.fdopen(answer_fd, "w") as answer:
        answer.write("\n" + json.dumps(doc, default=str) + "\n")


if __name__ == "__main__" and sys.argv[1:] == ["--planrun-python-child"]:
    _python_child()
