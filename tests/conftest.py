"""Shared fixtures: write a plan file, run the `planrun` command in a directory.

Two layers. `planrun(...)` and the `run` fixture run the command line inside the test process
(`planrun_inprocess`), with its working directory, environment, standard streams and
imported plan modules isolated and restored: plan semantics, output shapes and exit codes, at
no start-up cost. (A run puts back the signal handlers it found itself: that is checked in
tests/test_runs_in_one_process.py, not restored here.) In a test marked `e2e` they start a real `python -m planrun`
(`planrun_process`), as `spawn_planrun` always does: signals, terminals, start-up, process
groups and one end-to-end pass per command. `PLANRUN_TEST_SUBPROCESS=1` runs every test
through real processes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
# One module however it is imported: pytest loads this file as `conftest` and the tests import
# `tests.conftest`; two copies would keep two sets of globals (the layer a test runs in).
sys.modules.setdefault(
    "tests.conftest" if __name__ == "conftest" else "conftest", sys.modules[__name__]
)
T = TypeVar("T")


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:  # shown by pytest when an assertion fails
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def planrun(
    *args: str,
    cwd: Path | str,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> Result:
    """Run `planrun ARGS` in `cwd` and capture everything: in the test process, or in a real
    process for a test marked `e2e` (or with PLANRUN_TEST_SUBPROCESS=1)."""
    runner = planrun_process if _SUBPROCESS_LAYER[0] else planrun_inprocess
    return runner(*args, cwd=cwd, timeout=timeout, env=env, stdin=stdin)


def python_ok(
    *args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run this interpreter with ARGS in a real process (no stdin), which must exit 0: for what
    only a fresh interpreter shows (its imports, its start-up)."""
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


MEMORY_LIMIT = 600 << 20
"""A capped run's address space: far more than planrun needs (~100 MB), far less than hostile
input (a 1 GiB file, a bomb) would take read whole."""


def _cap_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def planrun_process(
    *args: str,
    cwd: Path | str,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    capped: bool = False,
) -> Result:
    """Run `python -m planrun ARGS` in `cwd`, a real process, and capture everything;
    `capped`: with its memory capped at MEMORY_LIMIT."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "planrun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        input=stdin if stdin is not None else "",
        preexec_fn=_cap_memory if capped else None,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


# Modules a run may import that belong to the environment, not to the test: kept across runs.
# (examples/ is not: its helpers.py is a plan's module, like another test's helpers.py).
_KEPT_PREFIXES = tuple(
    {str(Path(p).resolve()) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    | {str(ROOT / "planrun") + os.sep, str(ROOT / "tests") + os.sep}
)


class _RunStream:
    """The sys.stdout or sys.stderr of every in-process run: one per test process, never closed.

    A module first imported during a run stays imported (see _KEPT_PREFIXES), and some bind the
    stream they find at import time for good: the MCP SDK's `stdio_client(errlog=sys.stderr)`
    default (what `Client(StdioServerParameters(...))` passes to Popen), distributed's logging
    handlers. A per-run stream closed after the run broke every MCP server started later in that
    process ("ValueError: I/O operation on closed file" in subprocess.py). So the stream is a
    real file descriptor of its own, pointed (dup2) at the run's capture file during a run and
    at the process's own descriptor (1 or 2) between runs: what such a module would have bound
    had it been imported outside a run.
    """

    def __init__(self, home_fd: int) -> None:
        self.home_fd = home_fd
        self.fd = os.dup(home_fd)
        self.text = self._wrap()

    def _wrap(self) -> io.TextIOWrapper:
        # closefd=False: a run that closes sys.stdout must not free the descriptor (another file
        # would get its number, and the next dup2 would overwrite that file).
        raw = open(self.fd, "wb", closefd=False)  # noqa: SIM115 - lives as long as the process
        return io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", write_through=True)

    @contextlib.contextmanager
    def capturing(self) -> Any:
        """The stream, writing into a fresh file for one run; that file's text afterwards."""
        if self.text.closed:  # a run closed it: a new wrapper around the same descriptor
            self.text = self._wrap()
        text: list[str] = []
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), self.fd, inheritable=False)
            try:
                yield self.text, text
            finally:
                with contextlib.suppress(Exception):  # a run that closed the stream: flushed then
                    self.text.flush()
                os.dup2(self.home_fd, self.fd, inheritable=False)
                capture.seek(0)
                text.append(capture.read().decode("utf-8", errors="replace"))


_RUN_STREAMS: list[_RunStream] = []  # stdout's and stderr's, made at the first in-process run


def _run_streams() -> tuple[_RunStream, _RunStream]:
    if not _RUN_STREAMS:
        _RUN_STREAMS.extend((_RunStream(1), _RunStream(2)))
    return _RUN_STREAMS[0], _RUN_STREAMS[1]


@contextlib.contextmanager
def _process_state_restored(cwd: Path | str, env: dict[str, str]) -> Any:
    """Everything a command changes in its process, put back afterwards: the working
    directory (`-C`), os.environ, the standard streams, and sys.path and the modules a
    `python` step imported from the test's directory (another test's `mod.py` is another)."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:
            file = getattr(sys.modules[name], "__file__", None)
            if file and not str(Path(file).resolve()).startswith(_KEPT_PREFIXES):
                del sys.modules[name]


def planrun_inprocess(
    *args: str,
    cwd: Path | str,
    timeout: float = 60,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
) -> Result:
    """Run the `planrun` command line inside the test process, as `planrun(...)` would in a
    child: same arguments, environment, stdin (closed unless given) and captured output.

    An unexpected exception is a traceback on stderr and exit 1, as in a real process; a
    command still running after `timeout` s ends the test session with every thread's stack
    (an in-process hang cannot be killed any other way).
    """
    import faulthandler

    from planrun.cli.commands import main as cli

    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    run_out, run_err = _run_streams()
    with (
        run_out.capturing() as (out, out_text),
        run_err.capturing() as (err, err_text),
        _process_state_restored(cwd, full_env),
    ):
        sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
        sys.stdout, sys.stderr = out, err
        faulthandler.dump_traceback_later(timeout, exit=True, file=sys.__stderr__)
        try:
            code = _main(cli, args)
        finally:
            faulthandler.cancel_dump_traceback_later()
    return Result(code, out_text[0], err_text[0])


def _main(cli: Any, args: tuple[str, ...]) -> int:
    """The command's exit code, from however it ended."""
    try:
        cli.main(args=list(args), prog_name="planrun")
    except SystemExit as exc:  # a run's end too (planrun.errors.ExitNow: only __main__ exits)
        if isinstance(exc.code, int) or exc.code is None:
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # what a real process would print before exit 1
        traceback.print_exc(file=sys.stderr)
        return 1
    return 0


_SUBPROCESS_LAYER = [os.environ.get("PLANRUN_TEST_SUBPROCESS") == "1"]


def subprocess_layer() -> bool:
    """Whether this test runs planrun as real processes (marked `e2e`, or everywhere)."""
    return _SUBPROCESS_LAYER[0]


@pytest.fixture(autouse=True)
def _layer(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A test marked `e2e` runs every `planrun(...)` and `run(...)` as a real process."""
    everywhere = os.environ.get("PLANRUN_TEST_SUBPROCESS") == "1"
    _SUBPROCESS_LAYER[0] = everywhere or request.node.get_closest_marker("e2e") is not None
    yield
    _SUBPROCESS_LAYER[0] = everywhere


@pytest.fixture(autouse=True)
def _not_on_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's own CI may be a GitHub Actions job: its console output would be grouped
    there (`::group::`). A test that wants that passes GITHUB_ACTIONS=true itself."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)


@pytest.fixture
def write(tmp_path: Path):  # type: ignore[no-untyped-def]
    """write("plan.yaml", yaml_text) -> path; dedents the text."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
        return path

    return _write


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    """run(*args) -> Result, with tmp_path as the working directory: in the test process,
    or in a real `python -m planrun` for a test marked `e2e`."""

    def _run(*args: str, **kw: Any) -> Result:
        return planrun(*args, cwd=kw.pop("cwd", tmp_path), **kw)

    return _run


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.err and "Traceback" not in result.out, str(result)


_CLUSTER: list[Any] = []  # this process's running cluster, if any


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1, shared by the
    tests that use it one after the other (pytest_collection_modifyitems keeps them together),
    and stopped after the last of them (pytest_runtest_teardown): idle, it costs 15 % of a CPU."""
    pytest.importorskip("distributed")
    from tests.test_dask_executor import start_cluster

    if not _CLUSTER:
        _CLUSTER.append(start_cluster(tmp_path_factory.mktemp("dask-cluster")))
    return _CLUSTER[0]


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The cluster stops (every process and port checked gone) once the next test has no use
    for it; a later test that has starts another."""
    if _CLUSTER and "cluster" not in getattr(nextitem, "fixturenames", ()):
        from tests.test_dask_executor import stop_cluster

        stop_cluster(_CLUSTER.pop())


def pytest_sessionfinish() -> None:
    """A session cut short (Ctrl-C, -x) leaves no cluster running."""
    if _CLUSTER:
        from tests.test_dask_executor import stop_cluster

        stop_cluster(_CLUSTER.pop())


def spawn_planrun(*args: str, cwd: Path, **popen: Any) -> subprocess.Popen[Any]:
    """Start `python -m planrun ARGS` in `cwd` without waiting (to signal or kill it)."""
    return subprocess.Popen([sys.executable, "-m", "planrun", *args], cwd=cwd, **popen)


def kill_9(proc: subprocess.Popen[Any], timeout: float = 60) -> None:
    """SIGKILL the running planrun `proc`, then wait until it and every command it had started
    are gone.

    A command runs in its own session, so it outlives a planrun killed with SIGKILL: until it
    ends it may still write (a line in a log after the test has read it), and until it has
    exec'd it holds copies of planrun's descriptors. planrun is stopped first, so that the
    children it has then are all it will ever have, and the kill lands at that instant.
    """
    import psutil

    if proc.poll() is not None:
        return  # it ended on its own, and a run waits for its commands before it ends
    os.kill(proc.pid, signal.SIGSTOP)
    # stopped (or exited meanwhile): once waitid says so, it forks nothing more
    os.waitid(os.P_PID, proc.pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    proc.kill()
    proc.wait()
    # a command's own children are in its process group (its pid): wait for the group too
    groups = {c.pid for c in children}

    def gone() -> bool:
        for p in [*children, *_processes_in_groups(groups)]:
            with contextlib.suppress(psutil.Error):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    return False
        return True

    wait_until(gone, timeout, what="the killed run's commands to end")


def _processes_in_groups(groups: set[int]) -> list[Any]:
    import psutil

    found: list[Any] = []
    if not groups:
        return found
    for p in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getpgid(p.pid) in groups:
                found.append(p)
    return found


def planrun_at_tty(cwd: Path | str, args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m planrun ARGS` started with a pseudo-terminal as stdin and stderr (stdout a
    pipe): (the process, the terminal's leader side, to read what it shows and type into)."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", *args],
        cwd=cwd,
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**os.environ, "NO_COLOR": "1"},
    )
    os.close(follower)
    return proc, leader


def answer_at_tty(
    cwd: Path | str, args: list[str], answers: list[str], timeout: float = 30
) -> tuple[int, str, str]:
    """Run `python -m planrun ARGS` with a pseudo-terminal as stdin and stderr, answering each
    `[y/N]` question in turn: (exit code, stdout, what the terminal showed)."""
    proc, leader = planrun_at_tty(cwd, args)
    seen = b""
    deadline = time.monotonic() + timeout
    for answer in answers:
        asked = seen.count(b"[y/N]")
        while seen.count(b"[y/N]") == asked and time.monotonic() < deadline:
            try:
                seen += os.read(leader, 4096)
            except OSError:
                break
        os.write(leader, answer.encode() + b"\n")
    out, _ = proc.communicate(timeout=timeout)
    try:
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:
        pass
    os.close(leader)
    return proc.returncode, out.decode(), seen.decode(errors="replace")


@contextlib.contextmanager
def serve_http(handler: Callable[..., Any]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (a free port, one thread per request) while the block
    runs; yields its base URL."""
    from http.server import ThreadingHTTPServer

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def wait_until(
    condition: Callable[[], T], timeout: float = 120, interval: float = 0.02, what: str = ""
) -> T:
    """Poll `condition` until it returns something truthy, and return that; fail on timeout.

    Tests wait on what they need to see (a file, a line, a process), never for a fixed time.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        time.sleep(interval)


@contextlib.contextmanager
def hang_guard(seconds: float = 60) -> Any:
    """A bound on a hang, not a timing claim: a block still running after `seconds` ends the
    test session with every thread's stack (for code that cannot be interrupted otherwise).

    Tests give the work they expect to be cut short (a `sleep 600` that a timeout or a
    cancellation must stop) far more time than this, so not stopping it fails here."""
    import faulthandler

    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def wait_for_file(path: Path, timeout: float = 120, interval: float = 0.02) -> None:
    """Wait until `path` exists (a step's side effect shows the run got that far)."""
    wait_until(path.exists, timeout, interval, f"{path} to exist")


def unique_mark() -> str:
    """A word that is unique to one test, to tag the commands it starts (`: MARK; cmd`)."""
    return f"planrun-test-{uuid.uuid4().hex[:12]}"


def unique_sleep(seconds: int) -> str:
    """`sleep N.xxxxxx`: a command only this test runs (not another test, another worker or
    another checkout's suite on the same machine), to find its process, or miss it."""
    return f"sleep {seconds}.{uuid.uuid4().int % 10**6:06d}"


def processes_marked(mark: str) -> list[Any]:
    """Live (not zombie) processes whose command line contains `mark`."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and mark in " ".join(
                proc.info["cmdline"] or []
            ):
                found.append(proc)
    return found


def wait_for_command(command: str, timeout: float = 120) -> None:
    """Wait until a process runs exactly `command` (e.g. a `unique_sleep`), i.e. it has been
    exec'd: a signal sent to its group before that can be missed by a shell's forked child, which
    still has the shell's handlers until it execs."""
    import psutil

    def running() -> bool:
        for proc in psutil.process_iter(["cmdline", "status"]):
            with contextlib.suppress(psutil.Error):
                if (
                    proc.info["status"] != psutil.STATUS_ZOMBIE
                    and " ".join(proc.info["cmdline"] or []) == command
                ):
                    return True
        return False

    wait_until(running, timeout, what=f"`{command}` to run")


def assert_no_process_left(mark: str, timeout: float = 10) -> None:
    """No process tagged with `mark` outlives the test (waits for them to go, then fails).

    Whatever is still alive at the deadline is killed, so one failure leaves nothing behind.
    """
    import psutil

    deadline = time.monotonic() + timeout
    left = processes_marked(mark)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = processes_marked(mark)
    if left:
        described = [(p.pid, " ".join(p.cmdline())) for p in left if p.is_running()]
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        raise AssertionError(f"processes left behind: {described}")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the Dask cluster run one after the other, where the first of them would
    have run, and under pytest-xdist in one worker: one cluster to start, not one per file or
    per worker."""
    on_cluster = [item for item in items if "cluster" in getattr(item, "fixturenames", ())]
    for item in on_cluster:
        item.add_marker(pytest.mark.xdist_group("dask"))
    if on_cluster:
        first = items.index(on_cluster[0])
        together = set(on_cluster)
        rest = [item for item in items[first:] if item not in together]
        items[first:] = [*on_cluster, *rest]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject.toml's default): one worker more than the CPUs this process may use.
    The tests wait on real processes, servers and files much of the time, which a further
    worker fills (the quick layer on 2 cores: 85-90 s with two workers, 74 s with three).
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides when it is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    getaffinity = getattr(os, "sched_getaffinity", None)
    cpus = len(getaffinity(0)) if getaffinity is not None else os.cpu_count() or 1
    return cpus + 1


def pytest_configure(config: pytest.Config) -> None:
    """Byte-code for planrun's modules, written once per change of a module, so that the
    hundreds of `python -m planrun` the tests start read it instead of compiling planrun each
    time (PYTHONDONTWRITEBYTECODE=1 stops Python from ever writing it; reading it is allowed).
    The session's first process writes it (the pytest-xdist workers start after): a command's
    own modules, a plan's, are never compiled ahead, so an edited one is always read afresh."""
    _this_interpreter_first_on_path()
    if not hasattr(config, "workerinput"):
        import compileall

        import planrun

        compileall.compile_dir(Path(planrun.__file__).parent, quiet=1)


def _this_interpreter_first_on_path() -> None:
    """`python3` in the tests' commands (a shell step, a planner, a Taskfile) is the interpreter
    running the tests, as in an activated virtualenv, and not a version manager's shim found
    first on PATH (pyenv's is a shell script that costs a tenth of a second before each start).
    Set in the session's first process, before the pytest-xdist workers start with its
    environment."""
    import shutil

    found = shutil.which("python3")
    if found is None or os.path.realpath(found) != os.path.realpath(sys.executable):
        here = os.path.dirname(sys.executable)
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (the test modules, planrun, the items) lives until the session
    ends: frozen out of the cyclic garbage collector, which otherwise walks it again in each
    full collection during the tests and five times at the end (a second or more a worker)."""
    import gc

    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Any:
    """The test modules' assertion rewriting, kept on disk between sessions even under
    PYTHONDONTWRITEBYTECODE=1 (pytest redoes it in each worker otherwise: seconds each).
    Only during collection: a run in a test imports the plan's own modules, never cached."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved
