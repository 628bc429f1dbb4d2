"""The Dask executor against a real scheduler and real workers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

# MCP servers and Dask clusters take seconds to start: `pytest -m 'not slow'` skips these.
pytestmark = pytest.mark.slow

if importlib.util.find_spec("distributed") is None:  # found, not imported: collecting stays cheap
    pytest.skip("distributed is not installed (the dask extra)", allow_module_level=True)

from planrun.errors import UsageError  # noqa: E402
from planrun.executors.dask import DaskExecutor  # noqa: E402
from planrun.tools import builtin_registry  # noqa: E402
from planrun.tools.base import ToolContext, ToolFailed  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


class LocalTools:
    """The smallest local executor: planrun's built-in tools, called in this process."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.started = self.closed = False

    async def start(self) -> None:
        self.started = True

    async def aclose(self) -> None:
        self.closed = True

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any:
        self.calls.append(tool)
        spec = builtin_registry().get(tool)
        if spec is None:
            raise ToolFailed(f"unknown tool: {tool}")
        return await spec.fn(args, ctx)


# -- a real cluster: `dask scheduler` and two `dask worker` processes -----------------------


@dataclass
class Cluster:
    address: str
    procs: list[subprocess.Popen[bytes]]
    ports: set[int]  # every port the cluster's processes listened on

    def pids(self) -> set[int]:
        """The scheduler, the nannies and the worker processes they started."""
        pids: set[int] = set()
        for proc in self.procs:
            with contextlib.suppress(psutil.Error):
                pids.add(proc.pid)
                pids.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
        return pids


def _listening_ports(pids: set[int]) -> set[int]:
    return {
        c.laddr.port
        for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    }


def start_cluster(workdir: Path, n_workers: int = 2) -> Cluster:
    """A scheduler and workers on loopback, each in its own session; worker 0 has cpu=2."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    sched_file = workdir / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    log = open(workdir / "cluster.log", "ab")  # noqa: SIM115 - closed by the OS with the children

    def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, cwd=workdir, env=env, stdout=log, stderr=log, start_new_session=True
        )

    procs = [
        spawn(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", "0"]
            + ["--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)]
        )
    ]
    deadline = time.monotonic() + 120  # a bound on a hang, not a speed
    while not sched_file.exists() or not sched_file.read_text().strip():
        assert time.monotonic() < deadline, "the scheduler did not start"
        time.sleep(0.05)
    address = json.loads(sched_file.read_text())["address"]
    for i in range(n_workers):
        extra = ["--resources", "cpu=2"] if i == 0 else []
        procs.append(
            spawn(
                [*dask, "worker", address, "--host", "127.0.0.1"]
                + ["--dashboard-address", "127.0.0.1:0", "--nthreads", "1", *extra]
            )
        )
    return Cluster(address, procs, set())


def stop_cluster(cluster: Cluster) -> None:
    """SIGTERM each process group, SIGKILL what is left, and check nothing survives."""
    pids = cluster.pids()
    cluster.ports |= _listening_ports(pids)
    for proc in cluster.procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in cluster.procs:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    deadline = time.monotonic() + 60  # a bound on a hang, not a speed
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pids), f"cluster processes left behind: {alive(pids)}"
    still = _listening_ports(set(p.pid for p in psutil.process_iter())) & cluster.ports
    assert not still, f"ports still listening: {still}"


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def alive(pids: set[int]) -> list[int]:
    """The pids that are still running (zombies count as gone: only reaping is left)."""
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
    return left


# The session-wide `cluster` fixture lives in conftest.py (shared with test_dask_cli.py).


@contextlib.asynccontextmanager
async def executor(address: str | None, cwd: Path, **kw: Any) -> AsyncIterator[DaskExecutor]:
    ex = DaskExecutor(address, local=LocalTools(), cwd=str(cwd), **kw)
    await ex.start()
    try:
        await ex.client.wait_for_workers(2, timeout=30)
        yield ex
    finally:
        await ex.aclose()


def run(coro: Any) -> Any:
    # A bound on a hang, not a timing claim: the `sleep 600` of a step that was not stopped
    # outlasts it, so a kill that does not happen fails the test instead of waiting.
    return asyncio.run(asyncio.wait_for(coro, 120))


def ctx_for(cwd: Path, step: str = "s", timeout: float | None = None) -> ToolContext:
    return ToolContext(step_id=step, cwd=str(cwd), env=dict(os.environ), timeout=timeout)


def marked(cmd: str) -> tuple[str, str]:
    """`cmd` tagged with a unique no-op word, to find its process with psutil."""
    mark = f"planrun-mark-{uuid.uuid4().hex[:12]}"
    return f"{cmd}; : {mark}", mark


async def find_process(mark: str, timeout: float = 60) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            if mark in " ".join(p.info["cmdline"] or []):
                return p
        await asyncio.sleep(0.02)
    raise AssertionError(f"no process for {mark}")


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a process group."""
    members = []
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p)
    return members


async def wait_group_gone(pgid: int, timeout: float = 60) -> None:
    """Wait until the group has no live process; `timeout` bounds a hang (what is waited for
    is a kill: the processes would live far longer on their own)."""
    deadline = time.monotonic() + timeout
    while group_members(pgid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not group_members(pgid), f"left behind: {group_members(pgid)}"


async def outcome(coro: Any) -> tuple[str, Any]:
    """("ok", result) or ("failed", (message, detail, result)): to compare local and remote."""
    try:
        return "ok", await coro
    except ToolFailed as exc:
        return "failed", (exc.message, exc.detail, exc.result)


# -- shell ----------------------------------------------------------------------------------


SHELL_CASES: list[dict[str, Any]] = [
    {"cmd": "echo hello; echo warn >&2"},
    {"cmd": "echo out; echo oops >&2; exit 3"},
    {"cmd": "exit 4", "check": False},
    {"cmd": ["printf", "%s|", "a b", "$HOME", 7]},
    {"cmd": "pwd", "cwd": "sub"},
    {"cmd": "cat", "stdin": "fed\nin"},
    {"cmd": "echo $PLANRUN_A-$PLANRUN_B", "env": {"PLANRUN_A": 1, "PLANRUN_B": True}},
    {"cmd": "echo ${HOME:-unset}", "env": {"HOME": None}},
    {"cmd": "true", "cwd": "no-such-dir"},
    {"cmd": ["no-such-command-planrun"]},
    {"cmd": "true", "bogus": 1},
    {"cmd": []},
    {"cmd": "true", "stdin": 5},
    {"run": ["echo a", "echo b >&2; exit 2", "echo never"]},  # `run[1] exited with code 2`
    {"run": ["true", "exit 3"], "env": {"X": "1"}},
    {"run": ["echo only"]},
    {"run": "echo a; false; echo never"},
]


def test_shell_results_and_errors_are_the_local_tools(cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    shell = builtin_registry().get("shell")
    assert shell is not None

    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            for args in SHELL_CASES:
                local = await outcome(shell.fn(args, ctx_for(tmp_path)))
                remote = await outcome(ex.call("shell", args, ctx_for(tmp_path)))
                assert remote == local, args
            assert ex._local.calls == []  # type: ignore[attr-defined]

    run(scenario())


def test_failure_message_names_the_code_and_stderr_tail(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            cmd = "for i in $(seq 30); do echo line$i >&2; done; exit 7"
            with pytest.raises(ToolFailed) as info:
                await ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path))
            exc = info.value
            assert exc.message == "command exited with code 7"
            assert exc.detail is not None
            lines = exc.detail.splitlines()
            assert lines[0] == f"$ {cmd}" and lines[1] == "line11" and lines[-1] == "line30"
            assert exc.result["exit_code"] == 7

    run(scenario())


def test_env_is_merged_over_the_workers_environment(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            ctx = ctx_for(tmp_path)
            ctx.env = {"ONLY_ON_THE_CLIENT": "1"}  # planrun's environment is not sent
            result = await ex.call(
                "shell",
                {
                    "cmd": "echo ${ONLY_ON_THE_CLIENT:-no}:$X:${PYTHONPATH:+worker}",
                    "env": {"X": "y"},
                },
                ctx,
            )
            assert result["stdout"] == "no:y:worker\n"

    run(scenario())


def test_streamed_output_reaches_on_output(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            lines: list[tuple[str, str]] = []
            ctx = ctx_for(tmp_path)
            ctx.on_output = lambda stream, line: lines.append((stream, line))
            cmd = "echo a; sleep 0.3; echo b >&2; echo c"
            result = await ex.call("shell", {"cmd": cmd}, ctx)
            assert result["stdout"] == "a\nc\n"
            assert sorted(lines) == [("stderr", "b"), ("stdout", "a"), ("stdout", "c")]
            assert [x for x in lines if x[0] == "stdout"] == [("stdout", "a"), ("stdout", "c")]

    run(scenario())


# -- python ---------------------------------------------------------------------------------

MODULE = """
import asyncio, os

def add(a, b):
    print("noise on stdout")
    return a + b

async def double(x):
    await asyncio.sleep(0)
    return {"x": x * 2, "t": (1, 2)}

def boom():
    raise ValueError("bad input")

def not_json():
    return {1, 2}

def where():
    return os.getpid()

def env(names):
    return {n: os.environ.get(n) for n in names}

def hang():
    import time
    time.sleep(30)
"""

PYTHON_CASES: list[dict[str, Any]] = [
    {"function": "MOD:add", "kwargs": {"a": 2, "b": 3}},
    {"function": "MOD:double", "kwargs": {"x": 21}},
    {"function": "MOD:boom"},
    {"function": "MOD:not_json"},
    {"function": "MOD:missing"},
    {"function": "no_such_module_planrun:f"},
    {"function": "MOD:add", "kwargs": {"a": 1}},
    {"function": "nocolon"},
    {"function": "MOD:env", "kwargs": {"names": ["PLANRUN_PY_A"]}, "env": {"PLANRUN_PY_A": "a"}},
]


def test_python_results_and_errors_are_the_local_tools(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The local python tool appends its working directory to sys.path (as a run does): this
    # test's own, left there for every later test in the process without this copy.
    monkeypatch.setattr(sys, "path", list(sys.path))
    mod = f"planrun_dask_mod_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{mod}.py").write_text(MODULE)
    python = builtin_registry().get("python")
    assert python is not None

    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            for case in PYTHON_CASES:
                args = {**case, "function": case["function"].replace("MOD", mod)}
                local = await outcome(python.fn(args, ctx_for(tmp_path)))
                remote = await outcome(ex.call("python", args, ctx_for(tmp_path)))
                if local[0] == "failed" and local[1][1] and "Traceback" in local[1][1]:
                    # Same message; the traceback's file paths differ between the processes.
                    assert remote[0] == "failed" and remote[1][0] == local[1][0], args
                    assert "Traceback" in remote[1][1]
                else:
                    assert remote == local, args
            pid = await ex.call("python", {"function": f"{mod}:where"}, ctx_for(tmp_path))
            assert pid != os.getpid()  # it ran on a worker

    run(scenario())


def test_a_python_steps_dotenv_and_env_reach_it_on_the_worker(
    cluster: Cluster, tmp_path: Path
) -> None:
    """As the local tool: the plan's dotenv values under the step's `env`."""
    from planrun.tools.base import Services

    mod = f"planrun_dask_env_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{mod}.py").write_text(MODULE)
    names = ["PLANRUN_DOT_A", "PLANRUN_DOT_B"]
    args = {"function": f"{mod}:env", "kwargs": {"names": names}, "env": {"PLANRUN_DOT_B": "s"}}

    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            ctx = ctx_for(tmp_path)
            ctx.services = Services(dotenv={"PLANRUN_DOT_A": "d", "PLANRUN_DOT_B": "d"})
            result = await ex.call("python", args, ctx)
            assert result == {"PLANRUN_DOT_A": "d", "PLANRUN_DOT_B": "s"}

    run(scenario())


# -- cancellation, timeouts, lost workers -----------------------------------------------------


def test_step_timeout_kills_the_remote_process(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            # The scheduler's timeout (asyncio.timeout), counted from when the process is seen
            # running: counted from the call, a loaded machine could spend it before the
            # process starts. The worker-side backstop (its own test) is far later.
            cmd, mark = marked("sleep 600")
            call = asyncio.create_task(
                ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path, timeout=600))
            )
            leader = await find_process(mark)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await call
            assert call.cancelled()
            await wait_group_gone(leader.pid)

    run(scenario())


def test_worker_side_timeout_is_a_backstop(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            cmd, mark = marked("sleep 600")
            with pytest.raises(ToolFailed, match=r"^timed out after 1s$"):
                # No client-side timeout here: only the worker's own enforces ctx.timeout.
                await ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path, timeout=1))
            assert not [
                p for p in psutil.process_iter(["cmdline"]) if mark in str(p.info["cmdline"])
            ]

    run(scenario())


def test_cancel_kills_the_process_group(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            # A grandchild that ignores SIGTERM: the group still dies (SIGKILL after the grace).
            cmd, mark = marked("(trap '' TERM; sleep 600) & sleep 600")
            task = asyncio.create_task(ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path)))
            leader = await find_process(mark)
            while len(group_members(leader.pid)) < 3:  # sh, the subshell and its sleep at least
                await asyncio.sleep(0.02)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await wait_group_gone(leader.pid)
            # The python tool runs in a child process on the worker: it is killable too.
            mod = f"planrun_dask_mod_{uuid.uuid4().hex[:8]}"
            (tmp_path / f"{mod}.py").write_text(MODULE)
            task = asyncio.create_task(
                ex.call("python", {"function": f"{mod}:hang"}, ctx_for(tmp_path))
            )
            child = await find_process("--planrun-python-child")
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await wait_group_gone(child.pid)

    run(scenario())


def test_cancel_before_the_process_starts(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with executor(cluster.address, tmp_path) as ex:
            for _ in range(5):
                cmd, mark = marked("sleep 600")
                task = asyncio.create_task(ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path)))
                await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await asyncio.sleep(0.3)  # a process started late would be there by now
                # ...and gone in the end: one that started is killed, which on a loaded
                # machine may take longer than the 0.3 s (the bound is on a hang; it sleeps 600 s)
                deadline = time.monotonic() + 60
                while left := [
                    p for p in psutil.process_iter(["cmdline"]) if mark in str(p.info["cmdline"])
                ]:
                    assert time.monotonic() < deadline, left
                    await asyncio.sleep(0.05)

    run(scenario())


def test_resources_route_steps_to_the_worker_that_has_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        ex = DaskExecutor(cluster.address, local=LocalTools(), cwd=str(tmp_path))
        await ex.start()  # no wait_for_workers: the executor asks the scheduler itself
        try:
            ctx = ctx_for(tmp_path)
            result = await ex.call("shell", {"cmd": "echo $PPID"}, ctx, resources={"cpu": 2})
            info = (await ex.client.scheduler.identity(n_workers=-1))["workers"]
            with_cpu = [a for a, w in info.items() if w.get("resources", {}).get("cpu") == 2]
            assert len(with_cpu) == 1
            pids = await ex.client.run(os.getpid)
            assert int(result["stdout"]) == pids[with_cpu[0]]
            for _ in range(3):
                result = await ex.call("shell", {"cmd": "echo $PPID"}, ctx, resources={"cpu": 2})
                assert int(result["stdout"]) == pids[with_cpu[0]]
            ctx.resources = {"cpu": 1}  # how the scheduler passes a step's resources
            result = await ex.call("shell", {"cmd": "echo $PPID"}, ctx)
            assert int(result["stdout"]) == pids[with_cpu[0]]
            with pytest.raises(ToolFailed, match="no Dask worker offers the resources"):
                await ex.call("shell", {"cmd": "true"}, ctx_for(tmp_path), resources={"gpu": 1})
        finally:
            await ex.aclose()

    run(scenario())


def test_other_tools_stay_local(cluster: Cluster, tmp_path: Path) -> None:
    async def scenario() -> None:
        local = LocalTools()
        ex = DaskExecutor(cluster.address, local=local, cwd=str(tmp_path))
        await ex.start()
        assert local.started
        try:
            assert await ex.call("echo", {"value": {"a": [1]}}, ctx_for(tmp_path)) == {"a": [1]}
            await ex.call("write_file", {"path": "f.txt", "content": "hi"}, ctx_for(tmp_path))
            assert await ex.call("read_file", {"path": "f.txt"}, ctx_for(tmp_path)) == "hi"
            assert local.calls == ["echo", "write_file", "read_file"]
        finally:
            await ex.aclose()
        assert local.closed

    run(scenario())


def test_a_worker_killed_mid_step(tmp_path: Path) -> None:
    """The scheduler re-runs the step on a worker that is alive; the re-run is reported.

    On a cluster of its own: the worker it kills may be the one with `cpu=2`, which the
    session's cluster must keep offering to the tests after it (while the nanny restarts it,
    a step asking for cpu=2 found no worker offering it and failed at once)."""
    (tmp_path / "cluster").mkdir()
    cluster = start_cluster(tmp_path / "cluster")

    async def scenario() -> None:
        reruns: list[tuple[str, list[str]]] = []
        async with executor(
            cluster.address, tmp_path, on_reexecution=lambda s, w: reruns.append((s, w))
        ) as ex:
            # The first run sleeps 600 s, the re-run ends at once: only reaping can end the
            # orphan the dead worker leaves within the bound below.
            cmd, mark = marked("if [ -e tried ]; then echo done; else touch tried; sleep 600; fi")
            task = asyncio.create_task(ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path, "k")))
            first = await find_process(mark)
            while not (tmp_path / "tried").exists():  # the re-run must not be a first run
                await asyncio.sleep(0.02)
            worker = psutil.Process(first.ppid())
            worker.send_signal(signal.SIGKILL)
            try:
                result = await asyncio.wait_for(task, 60)  # a bound on a hang
            except ToolFailed as exc:  # allowed if the scheduler gave up on the step
                assert exc.message.startswith("worker lost while running step k: ")
            else:
                assert result["stdout"] == "done\n"
                assert reruns and reruns[0][0] == "k" and len(reruns[0][1]) == 2
            # The orphan the dead worker left (its own session) was reaped by the re-run.
            await wait_group_gone(first.pid)
            await ex.client.wait_for_workers(2, timeout=30)  # the nanny restarts the worker

    try:
        run(scenario())
    finally:
        stop_cluster(cluster)


# -- LocalCluster mode ----------------------------------------------------------------------


def test_local_cluster_mode_and_worker_lost(tmp_path: Path) -> None:
    import dask
    import distributed  # noqa: F401  # its defaults loaded before the `set` below, see there

    me = psutil.Process()
    ports_before = {c.laddr.port for c in me.net_connections("inet") if c.status == "LISTEN"}
    children_before = {p.pid for p in me.children(recursive=True)}

    async def scenario() -> None:
        # allowed-failures 0: the first lost worker fails the step (no re-run). `set` undoes
        # itself by removing the keys it did not find: had distributed's defaults been loaded
        # inside the block, the whole "distributed" section would go with it, and every later
        # Client in this test process would fail (KeyError: 'distributed').
        with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
            async with executor(None, tmp_path) as ex:
                result = await ex.call("shell", {"cmd": "echo local"}, ctx_for(tmp_path))
                assert result["stdout"] == "local\n"
                listening = {c.laddr for c in me.net_connections("inet") if c.status == "LISTEN"}
                assert listening and all(addr.ip == "127.0.0.1" for addr in listening)
                cmd, mark = marked("sleep 600")  # only reaping ends it within the bound
                task = asyncio.create_task(ex.call("shell", {"cmd": cmd}, ctx_for(tmp_path, "w")))
                leader = await find_process(mark)
                psutil.Process(leader.ppid()).send_signal(signal.SIGKILL)
                with pytest.raises(ToolFailed) as info:
                    await asyncio.wait_for(task, 60)  # a bound on a hang
                assert info.value.message.startswith("worker lost while running step w: ")
                assert "its worker (tcp://127.0.0.1:" in info.value.message
                await wait_group_gone(leader.pid)  # reaped after the loss

    run(scenario())
    deadline = time.monotonic() + 60  # a bound on the LocalCluster's processes ending
    while time.monotonic() < deadline:
        children = {
            p.pid
            for p in me.children(recursive=True)
            # multiprocessing's resource tracker is one per interpreter, started by the first
            # spawned process and meant to outlive it: not a cluster process.
            if "resource_tracker" not in " ".join(_cmdline(p))
        } - children_before
        if not alive(children):
            break
        time.sleep(0.05)
    assert not alive(children), [psutil.Process(p).cmdline() for p in alive(children)]
    ports_after = {c.laddr.port for c in me.net_connections("inet") if c.status == "LISTEN"}
    assert ports_after <= ports_before


def test_worker_functions_need_no_dask(tmp_path: Path) -> None:
    """planrun.executors.worker imports, and runs a step, without Dask (off any worker)."""
    code = (
        "import sys, json\n"
        "sys.modules['distributed'] = sys.modules['dask'] = None\n"
        "from planrun.executors import worker\n"
        "r = worker.run_shell('k1', {'argv': ['/bin/sh', '-c', 'echo $PLANRUN_DASK_TASK'],"
        " 'cwd': '.', 'env_set': {}, 'env_unset': []})\n"
        "print(json.dumps([r['status'], r['stdout'], r['exit_code'], r['worker']]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == ["ok", "k1\n", 0, None]


def test_a_rerun_reaps_its_earlier_attempt_while_that_worker_is_still_exiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dask runs a task again as soon as it sees the worker gone, which can be before that
    worker has finished exiting (its connections close first): the re-run kills the processes
    of the task's earlier attempt even while their owner still shows as alive. Another task's
    processes whose owner is alive are left alone."""
    import tempfile

    from planrun.executors import worker

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the records' directory
    owner = subprocess.Popen(["sleep", "600"])  # the lost worker, not gone yet
    started: list[subprocess.Popen[bytes]] = [owner]
    try:
        keys = {"again": f"planrun-k-{uuid.uuid4().hex}", "other": f"planrun-o-{uuid.uuid4().hex}"}
        steps = {}
        record = {"owner": owner.pid, "owner_started": psutil.Process(owner.pid).create_time()}
        for name, key in keys.items():
            env = {**os.environ, worker.TASK_ENV: key}
            steps[name] = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
            started.append(steps[name])
            directory = Path(tempfile.gettempdir()) / f"planrun-dask-{os.getuid()}"
            directory.mkdir(mode=0o700, exist_ok=True)
            (directory / f"{key}.json").write_text(json.dumps(record))

        killed = worker.reap_orphans(keys["again"])

        assert killed == [steps["again"].pid]
        assert steps["again"].wait(timeout=60) == -signal.SIGKILL  # a bound on a hang
        assert steps["other"].poll() is None
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_missing_dask_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # what `import` sees without the extra
    ex = DaskExecutor(None, local=LocalTools(), cwd=str(tmp_path))
    with pytest.raises(UsageError, match=r"pip install 'planrun\[dask\]'"):
        run(ex.start())


def test_an_unreachable_scheduler_is_a_usage_error(tmp_path: Path) -> None:
    local = LocalTools()
    ex = DaskExecutor("tcp://127.0.0.1:9", local=local, cwd=str(tmp_path), connect_timeout=1)
    with pytest.raises(UsageError, match=r"cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        run(ex.start())
    assert not local.started


def test_a_separate_cluster_leaves_nothing_behind(tmp_path: Path) -> None:
    c = start_cluster(tmp_path, n_workers=1)

    async def scenario() -> None:
        ex = DaskExecutor(c.address, local=LocalTools(), cwd=str(tmp_path))
        await ex.start()
        try:
            await ex.client.wait_for_workers(1, timeout=30)
            assert (await ex.call("shell", {"cmd": "echo x"}, ctx_for(tmp_path)))["stdout"] == "x\n"
        finally:
            await ex.aclose()

    try:
        run(scenario())
        c.ports = _listening_ports(c.pids())
        assert c.ports  # the scheduler's and the worker's, checked closed by stop_cluster
    finally:
        stop_cluster(c)
