"""Ctrl-C, SIGTERM and SIGHUP for the `planrun` command: never a hang, never a traceback.

The contract: a first signal during a run stops it (running steps are interrupted, the state
is saved) and the command exits 130; a second one exits at once, after killing the process
groups of the commands still running; a signal at any other moment (start-up imports,
loading, printing the result) exits 130 at once. Nothing waits for a worker thread (a
`python` step or an approval prompt blocked in a call): once the run is recorded, the
process ends, so no side effect of an interrupted step lands after it.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: asyncio only once a run starts (`--help` and
# validate import this module).
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

if TYPE_CHECKING:  # asyncio is imported when a run starts, not on the start-up path
    import asyncio

__all__ = ["exit_now", "install_quiet_exit", "run_interruptibly"]

T = TypeVar("T")
INTERRUPTED = 130
# The signals that stop a run. SIGINT and SIGTERM always do, even when planrun was started
# ignoring them (a background job of a script ignores SIGINT): whoever sends one to planrun
# means it. SIGHUP ignored at start (`nohup`) stays ignored.
_SIGNALS = (signal.SIGINT, signal.SIGTERM) + (
    () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
)


def _kill_step_groups() -> None:
    """SIGKILL the process groups of the shell commands still running (if any were started)."""
    shell = sys.modules.get("planrun.tools.shell")
    kill = getattr(shell, "kill_live_groups", None)
    if kill is not None:
        with contextlib.suppress(Exception):
            kill()


def _quiet_exit(signum: int, frame: Any) -> None:
    # No flush here: the signal may have arrived while the main thread holds a stream's lock.
    _kill_step_groups()
    os._exit(INTERRUPTED)


def install_quiet_exit() -> None:
    """From now until a run takes over: SIGINT/SIGTERM exit 130 at once, without a traceback."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers (a library caller's thread: leave them)
    for sig in _SIGNALS:
        signal.signal(sig, _quiet_exit)


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr and end the process with `code`, not waiting for worker threads
    (a blocked `python` step or prompt would otherwise keep it alive at interpreter exit)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def run_interruptibly(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` in a fresh event loop: the first SIGINT/SIGTERM cancels it (the run turns that
    into an interruption and saves its state), a second exits 130 at once.

    Unlike `asyncio.run`, closing the loop does not wait for the default executor's threads.
    """
    import asyncio

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        hits = 0

        def cancel() -> None:
            if task is not None:
                task.cancel()

        def on_signal(signum: int, frame: Any) -> None:
            # A Python handler, not the loop's: it runs even while the loop's thread is stuck
            # in a system call (a write to a full stderr pipe no one reads), so a second
            # signal always ends the process; the first asks the loop to cancel the run.
            nonlocal hits
            hits += 1
            if hits > 1:  # the journal is valid at every instant: leave now, and no process
                _kill_step_groups()
                os._exit(INTERRUPTED)
            loop.call_soon_threadsafe(cancel)

        for sig in _SIGNALS:
            signal.signal(sig, on_signal)
        try:
            return await coro
        finally:
            install_quiet_exit()

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the default executor down without waiting for its threads


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    import asyncio

    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
