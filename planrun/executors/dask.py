"""The distributed executor: `shell` and `python` steps run on Dask workers, the rest locally."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: distributed (Dask) only with `--executor
# dask`.
import asyncio
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from planrun.errors import UsageError
from planrun.executors import worker as _worker
from planrun.executors.base import Executor
from planrun.tools.base import ToolContext, ToolFailed

if TYPE_CHECKING:
    from planrun.run.procgroups import ProcessGroups

log = logging.getLogger(__name__)

REMOTE_TOOLS = frozenset({"shell", "python"})
MISSING_DASK = "the dask executor needs the 'dask' extra: pip install 'planrun[dask]'"
_CLEANUP_TIMEOUT_S = 10.0
_STDERR_TAIL = 20
_WORKERS_TTL_S = 2.0  # how long the list of workers' resources is trusted
_RESOURCE_WAIT_S = 5.0  # how long a step waits for a worker offering its resources to join
_RESOURCE_POLL_S = 0.2
_HURRY_POLL_S = 0.05  # how often an interrupted run's stop looks for a second signal

ReexecutionCallback = Callable[[str, list[str]], None]
"""Called with (step id, worker addresses in start order) when a step's task started more than
once on the cluster: its worker died and the Dask scheduler ran it again."""


class DaskExecutor:
    """Runs `shell` and `python` steps on a Dask cluster; delegates every other tool to `local`.

    `address` is a scheduler address (``tcp://host:8786``) or None for a LocalCluster on
    127.0.0.1. The executor owns `local`'s lifecycle: `start` and `aclose` start and close it.
    """

    def __init__(
        self,
        address: str | None,
        *,
        local: Executor,
        cwd: str,
        n_workers: int = 2,
        threads_per_worker: int = 1,
        on_reexecution: ReexecutionCallback | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        self.address = address
        self.cwd = cwd
        self._local = local
        self._n_workers = n_workers
        self._threads_per_worker = threads_per_worker
        self._on_reexecution = on_reexecution
        self._connect_timeout = connect_timeout
        self._client: Any = None
        self._cluster: Any = None
        self._scheduler_address = address or ""
        self._attempts: dict[str, list[str]] = {}  # task key -> worker of each start, in order
        self._outputs: dict[str, _OutputRoute] = {}  # task key -> where its streamed lines go
        self._workers: list[dict[str, Any]] = []  # the scheduler's view, for resource checks
        self._workers_at = -1e9
        self._client_quiet = False  # _only_critical filters distributed.client's records
        # name -> (value before, value set) of what starting the LocalCluster set in os.environ
        self._env_set: dict[str, tuple[str | None, str | None]] = {}

    @property
    def client(self) -> Any:
        """The `distributed.Client` (after `start`)."""
        if self._client is None:
            raise RuntimeError("DaskExecutor.start() has not been awaited")
        return self._client

    async def start(self) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise UsageError(MISSING_DASK) from exc
        try:
            await self._connect(Client, LocalCluster)
            await self._local.start()
        except BaseException:
            await self._close_cluster()  # a half-started cluster must not outlive us
            raise

    async def _connect(self, Client: Any, LocalCluster: Any) -> None:  # noqa: N803
        if self.address is None:
            before = dict(os.environ)
            try:
                self._cluster = await LocalCluster(
                    n_workers=self._n_workers,
                    threads_per_worker=self._threads_per_worker,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address="127.0.0.1:0",
                    worker_dashboard_address="127.0.0.1:0",
                    asynchronous=True,
                    # planrun reports a step's failure itself; Dask's warnings would repeat it.
                    silence_logs=logging.ERROR,
                )
            finally:
                self._note_env_set(before)
            self._client = await Client(self._cluster, asynchronous=True)
        else:
            try:
                self._client = await Client(
                    self.address, asynchronous=True, timeout=self._connect_timeout
                )
            except OSError as exc:
                raise UsageError(
                    f"cannot reach the Dask scheduler at {self.address}: {exc}"
                ) from exc
        self._scheduler_address = str(self._client.scheduler.address)
        self._client.subscribe_topic(_worker.ATTEMPT_TOPIC, self._on_attempt_event)
        self._client.subscribe_topic(_worker.OUTPUT_TOPIC, self._on_output_event)

    async def aclose(self) -> None:
        try:
            await self._local.aclose()
        finally:
            try:
                await self._close_cluster()
            finally:
                self._quiet_client(False)

    async def _close_cluster(self) -> None:
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        try:
            if client is not None:
                await client.close()
        finally:
            try:
                if cluster is not None:
                    await cluster.close()
            finally:
                self._put_env_back()

    def _note_env_set(self, before: dict[str, str]) -> None:
        """Remember what starting the LocalCluster set in os.environ: Dask's nanny sets its
        workers' variables (OMP_NUM_THREADS=1, PYTHONHASHSEED, ...) in its own process before
        it starts them (and again before a restart), and here that process is the caller's."""
        for name in set(before) | set(os.environ):
            if before.get(name) != os.environ.get(name):
                self._env_set[name] = (before.get(name), os.environ.get(name))

    def _put_env_back(self) -> None:
        """The variables the LocalCluster set, as they were before it (those still as it set
        them: a value someone else has set since is theirs)."""
        for name, (old, new) in self._env_set.items():
            if os.environ.get(name) == new:
                if old is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = old
        self._env_set = {}

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        ctx: ToolContext,
        *,
        resources: dict[str, float] | None = None,
    ) -> Any:
        if tool not in REMOTE_TOOLS:
            return await self._local.call(tool, args, ctx)
        key = f"planrun-{ctx.step_id}-{uuid.uuid4().hex}"
        request, fn = self._request(tool, args, ctx)
        # The scheduler passes a step's `resources` in ctx; a direct caller may pass it.
        resources = resources or ctx.resources or None
        if resources:
            await self._check_resources(ctx.step_id, resources)
        self._attempts[key] = []
        if request.get("stream") and ctx.on_output is not None:
            self._outputs[key] = _OutputRoute(ctx.on_output)
        try:
            reply = await self._submit_and_wait(
                fn, key, request, ctx.step_id, resources, ctx.services.groups
            )
        finally:
            self._report_reexecution(ctx.step_id, key)
            self._attempts.pop(key, None)
            route = self._outputs.pop(key, None)
        if route is not None and reply.get("status") == "ok":
            route.flush_tail(reply)
        if tool == "shell":
            return _shell_outcome(request, reply, ctx)
        return _python_outcome(reply, ctx)

    # -- submitting and cancelling -------------------------------------------------------

    async def _submit_and_wait(
        self,
        fn: Callable[..., dict[str, Any]],
        key: str,
        request: dict[str, Any],
        step_id: str,
        resources: dict[str, float] | None,
        groups: ProcessGroups | None = None,
    ) -> dict[str, Any]:
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        client = self.client
        if client.status in ("closing", "closed"):  # it gave up reconnecting: submit would hang
            raise self._scheduler_lost(step_id, started=False)
        future = client.submit(
            fn, key, request, key=key, pure=False, retries=0, resources=resources or None
        )
        try:
            return await future  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            # Abort, Ctrl-C or the step timeout: stop the remote process before we return.
            await asyncio.shield(self._stop_remote(future, key, groups))
            raise
        except KilledWorker as exc:
            # The dead worker's process group lives on in its own session: have the
            # surviving workers on that host reap it.
            what = "reaping the processes of a lost worker"
            await self._on_workers(what, _CLEANUP_TIMEOUT_S, _worker.reap_orphans)
            raise ToolFailed(
                f"worker lost while running step {step_id}: "
                + self._reexecution_note(key, exc.allowed_failures + 1),
                detail=str(exc),
            ) from None
        except FutureCancelledError as exc:
            if exc.reason == "scheduler-connection-lost" or client.status != "running":
                raise self._scheduler_lost(step_id) from None
            raise ToolFailed(f"step {step_id} was cancelled on the Dask cluster") from None
        except Exception as exc:  # the worker function failed, or the scheduler is gone
            raise ToolFailed(
                f"dask executor error in step {step_id}: {type(exc).__name__}: {exc}"
            ) from None

    def _scheduler_lost(self, step_id: str, *, started: bool = True) -> ToolFailed:
        """The failure of a step whose scheduler went away. planrun says so itself: Dask's
        client would log its reconnection attempts, tracebacks included, on planrun's stderr."""
        self._quiet_client(True)
        if not started:
            return ToolFailed(
                f"lost the Dask scheduler at {self._scheduler_address}: step {step_id} was not started"
            )
        return ToolFailed(
            f"lost the Dask scheduler at {self._scheduler_address} while running step "
            f"{step_id}; its command may still be running on its worker"
        )

    def _quiet_client(self, quiet: bool) -> None:
        """Drop (or, once the client is closed, let through again) Dask's client records below
        CRITICAL. A filter of this executor's own, not the logger's level: a run leaves the
        process's logging as it found it (a library caller's, another run's executor)."""
        if quiet != self._client_quiet:
            logger = logging.getLogger("distributed.client")
            (logger.addFilter if quiet else logger.removeFilter)(self._only_critical)
            self._client_quiet = quiet

    def _only_critical(self, record: logging.LogRecord) -> bool:  # bound: one per executor
        return record.levelno >= logging.CRITICAL

    async def _stop_remote(self, future: Any, key: str, groups: ProcessGroups | None) -> None:
        """Cancel the future and stop the step's process group on whichever worker has it: the
        run's interrupt signal and grace period when the run is interrupted (cut short by a
        second signal), else SIGTERM and a short grace."""
        client = self.client
        if client.status != "running":
            # The scheduler is gone (Dask's client is reconnecting, or gave up): no worker can
            # be reached, and waiting for it would hold up an abort or a Ctrl-C.
            return
        try:
            await asyncio.wait_for(client.cancel(future), _CLEANUP_TIMEOUT_S)
        except Exception as exc:  # cleanup is best effort: the scheduler may be gone
            log.warning("cancelling %s failed: %s", key, exc)
        sig: int = signal.SIGTERM
        grace = _worker.KILL_GRACE_S
        if groups is not None and groups.stop_signal is not None:
            sig, grace = groups.stop_signal, groups.grace
        killing = asyncio.ensure_future(self._kill_task(key, sig, grace))
        while groups is not None and not groups.hurried and not killing.done():
            await asyncio.wait([killing], timeout=_HURRY_POLL_S)
        if not killing.done():  # a second signal: the wait ends now
            await self._kill_task(key, signal.SIGKILL, 0.0)
        await killing

    async def _kill_task(self, key: str, sig: int, grace: float) -> None:
        what, timeout = f"killing {key} on the workers", _CLEANUP_TIMEOUT_S + grace
        await self._on_workers(what, timeout, _worker.kill_task, key, sig, grace)

    async def _on_workers(self, what: str, timeout: float, fn: Any, *args: Any) -> None:
        """Run `fn(*args)` on every worker, best effort: a failure is logged, never raised."""
        try:
            await asyncio.wait_for(self.client.run(fn, *args, on_error="ignore"), timeout)
        except Exception as exc:
            log.warning("%s failed: %s", what, exc)

    async def _check_resources(self, step_id: str, resources: dict[str, float]) -> None:
        """Fail when no worker offers the resources (Dask would queue the task forever), after
        waiting _RESOURCE_WAIT_S for one to join: a worker still starting, or being restarted
        by its nanny, is not a missing one."""
        deadline = time.monotonic() + _RESOURCE_WAIT_S
        fresh = False
        while True:
            now = time.monotonic()
            if fresh or now - self._workers_at > _WORKERS_TTL_S:
                # An asynchronous client's scheduler_info() has no per-worker data: ask.
                identity = await self.client.scheduler.identity(n_workers=-1)
                self._workers = list(identity.get("workers", {}).values())
                self._workers_at = now
            for info in self._workers:
                offered = info.get("resources") or {}
                if all(offered.get(name, 0) >= amount for name, amount in resources.items()):
                    return
            if fresh and now >= deadline:
                break
            if fresh:
                await asyncio.sleep(_RESOURCE_POLL_S)
            fresh = True
        raise ToolFailed(
            f"no Dask worker offers the resources of step {step_id}: {resources} "
            f'(start workers with --resources, e.g. --resources "cpu=2")'
        )

    # -- re-execution and streamed output ------------------------------------------------

    def _on_attempt_event(self, event: tuple[float, dict[str, Any]]) -> None:
        _, msg = event
        attempts = self._attempts.get(msg.get("key", ""))
        if attempts is not None:
            attempts.append(str(msg.get("worker")))

    def _on_output_event(self, event: tuple[float, dict[str, Any]]) -> None:
        _, msg = event
        route = self._outputs.get(msg.get("key", ""))
        if route is not None:
            route.emit(msg["stream"], msg["line"])

    def _reexecution_note(self, key: str, runs: int) -> str:
        seen = self._attempts.get(key, [])
        runs = max(runs, len(seen))
        where = ", ".join(seen) or "unknown"
        if runs == 1:
            return f"its worker ({where}) died; the command may have run in part"
        return (
            f"the task was started {runs} times and each worker died ({where}); "
            f"the command may have run in part {runs} times"
        )

    def _report_reexecution(self, step_id: str, key: str) -> None:
        seen = self._attempts.get(key, [])
        if len(seen) > 1:
            log.warning("step %s ran %d times (a worker died): %s", step_id, len(seen), seen)
            if self._on_reexecution is not None:
                try:
                    self._on_reexecution(step_id, list(seen))
                except Exception:  # a reporting hook must not change the step's outcome
                    log.exception("on_reexecution hook failed")

    # -- requests ------------------------------------------------------------------------

    def _request(
        self, tool: str, args: dict[str, Any], ctx: ToolContext
    ) -> tuple[dict[str, Any], Callable[..., dict[str, Any]]]:
        base_cwd = ctx.cwd or self.cwd
        if tool == "shell":
            return _shell_request(args, ctx, base_cwd), _worker.run_shell
        # The worker runs planrun's own python tool, which checks the args itself. The plan's
        # dotenv values go under the step's `env`, as for a shell step.
        added = _dotenv_added(ctx)
        own = args.get("env") if isinstance(args, dict) else None
        if added and isinstance(args, dict) and (own is None or isinstance(own, dict)):
            args = {**args, "env": {**added, **(own or {})}}
        request = {"args": args, "step_id": ctx.step_id, "base_cwd": base_cwd}
        return {**request, "timeout": ctx.timeout, "marks": _marks(ctx)}, _worker.run_python


class _OutputRoute:
    """Forwards a step's streamed lines; lines the events did not deliver come from the result."""

    def __init__(self, on_output: Callable[[str, str], None]) -> None:
        self.on_output = on_output
        self.sent = {"stdout": 0, "stderr": 0}

    def emit(self, stream: str, line: str) -> None:
        self.sent[stream] = self.sent.get(stream, 0) + 1
        self.on_output(stream, line)

    def flush_tail(self, reply: dict[str, Any]) -> None:
        for stream in ("stdout", "stderr"):
            text = reply.get(stream) or ""
            lines = text.removesuffix("\n").split("\n") if text else []
            for line in lines[self.sent[stream] :]:
                self.on_output(stream, line)


def _dotenv_added(ctx: ToolContext) -> dict[str, str]:
    """What the run's environment adds to planrun's own (planrun.run.request.Prepared's
    added_environment): the plan's dotenv values where planrun's own environment does not win,
    and in a sub-plan what its plan step passed down."""
    return {str(k): str(v) for k, v in ctx.services.dotenv.items()}


def _shell_request(args: dict[str, Any], ctx: ToolContext, base_cwd: str) -> dict[str, Any]:
    """Check a shell step's args as the local tool does; the request for the worker."""
    from planrun.tools.shell import command_argv, command_env, parse_shell_args, run_commands

    parsed = parse_shell_args(args, base_cwd)
    run_list: list[str] | None = None
    if parsed.run is None:
        argv, command = command_argv(parsed.cmd)
    else:
        commands = run_commands(parsed.run)
        argv, command = commands[0]
        if isinstance(parsed.run, list):  # one task: the worker runs them in order (run_list)
            run_list = [shown for _, shown in commands]
    cwd, stdin, check, env = parsed.cwd, parsed.stdin, parsed.check, parsed.env
    # The plan's dotenv values (where planrun's own environment does not win), then the
    # step's own `env` as text: both merged over the worker's environment there.
    env_set = {**_dotenv_added(ctx), **command_env(env, {})}
    env_unset = [str(k) for k, v in env.items() if v is None] if isinstance(env, dict) else []
    return {
        "argv": argv,
        "command": command,
        "run_list": run_list,
        "check": check,
        "cwd": cwd,
        "env_set": env_set,
        "env_unset": env_unset,
        "stdin": stdin,
        "timeout": ctx.timeout,
        "stream": ctx.on_output is not None,
        "output": _output_request(ctx),
        "marks": _marks(ctx),
    }


def _marks(ctx: ToolContext) -> dict[str, str]:
    """PLANRUN_RUN_ID and PLANRUN_STEP_ID in the step's environment on the worker, as a local
    command has them: after `kill -9` of planrun, the next run on that state finds what it left
    running (planrun/run/leftovers.py)."""
    from planrun.tools.shell import RUN_ENV, STEP_ENV

    parent = ctx.parent
    if parent is None or not parent.run_id:
        return {}
    return {RUN_ENV: parent.run_id, STEP_ENV: parent.prefix + ctx.step_id}


def _output_request(ctx: ToolContext) -> dict[str, Any]:
    """How the worker keeps a step's output, as the local shell tool does: whole up to
    PLANRUN_MAX_OUTPUT, past it head and tail in memory and the whole stream (the run's secrets
    masked) in the step's log file under the working directory (a shared filesystem)."""
    from planrun.tools.cmdoutput import log_path, output_limit

    plan = ctx.parent.plan if ctx.parent is not None else "plan"
    secrets = ctx.parent.masks.values() if ctx.parent is not None else []
    return {
        "limit": output_limit(ctx.env),
        "logs": [log_path(ctx.cwd, plan, ctx.step_id, s) for s in ("stdout", "stderr")],
        "secrets": list(secrets),
    }


def _not_ok(reply: dict[str, Any], ctx: ToolContext) -> ToolFailed:
    """The error for a task stopped on its worker (the worker-side timeout, or a cancel)."""
    partial = {k: reply.get(k) for k in ("stdout", "stderr", "exit_code")}
    if reply.get("status") == "timeout":
        # Worded as the scheduler words its own timeout, which normally fires first.
        return ToolFailed(
            f"timed out after {ctx.timeout or 0:g}s",
            detail=f"stopped by the worker-side timeout on {reply.get('worker')}",
            result=partial,
        )
    return ToolFailed(f"step {ctx.step_id} was cancelled on worker {reply.get('worker')}")


def _shell_outcome(request: dict[str, Any], reply: dict[str, Any], ctx: ToolContext) -> Any:
    """The shell tool's result or failure, exactly as the local tool reports it."""
    from planrun.tools.shell import command_failed, launch_failed

    if reply.get("status") == "launch_error":
        why, argv0 = str(reply.get("strerror")), request["argv"][0]
        raise launch_failed(reply.get("error"), reply.get("filename"), why, argv0, request["cwd"])
    if reply.get("status") != "ok":
        raise _not_ok(reply, ctx)
    result = {"stdout": reply["stdout"], "stderr": reply["stderr"], "exit_code": reply["exit_code"]}
    if request["check"] and result["exit_code"] != 0:
        scripts, failed = request.get("run_list"), reply.get("failed_index")
        if scripts and isinstance(failed, int) and 0 <= failed < len(scripts):
            raise command_failed(scripts[failed], result, f"run[{failed}]")
        raise command_failed(request["command"], result)
    return result


def _python_outcome(reply: dict[str, Any], ctx: ToolContext) -> Any:
    """The python tool's return value or failure, as the local tool reports it."""
    if reply.get("status") != "ok":
        raise _not_ok(reply, ctx)
    answer = reply.get("reply")
    if not isinstance(answer, dict):  # the child died before answering (os._exit, a crash)
        tail = reply.get("stderr", "").splitlines()[-_STDERR_TAIL:]
        raise ToolFailed(
            f"python: the process running the function exited with code {reply.get('exit_code')}",
            detail="\n".join(tail) or None,
        )
    if "ok" in answer:
        return answer["ok"]
    raise ToolFailed(answer["failed"], detail=answer.get("detail"), result=answer.get("result"))
