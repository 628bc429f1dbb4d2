"""Ctrl-C, SIGTERM and SIGHUP for the `planrun` command: never a hang, never a traceback.

The contract: a first signal during a run stops it gracefully — the signal is passed on to
every running command's process group, which gets the run's grace period to end before it is
killed (planrun.run.procgroups, the shell tool), and the run saves its state (exit 130); a second
signal ends that wait at once (the groups are killed, the state is still saved); should the run
not finish soon after that (its thread stuck writing to a full pipe), or a third signal come,
the process exits 130 at once. A signal at any other moment (start-up imports, loading,
printing the result) exits 130 at once. Nothing waits for a worker thread (a `python` step or an
approval prompt blocked in a call): once the run is recorded, the process ends, so no side
effect of an interrupted step lands after it.
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

    from planrun.run.procgroups import ProcessGroups

__all__ = ["exit_now", "install_quiet_exit", "run_interruptibly", "signalled_in_last_run"]

T = TypeVar("T")
INTERRUPTED = 130
STUCK_AFTER_S = 3.0
"""After a second signal, how long the run may take to record itself before the process exits
anyway (its groups are killed by then: only a thread stuck in a write can take that long)."""
# The signals that stop a run. SIGINT and SIGTERM always do, even when planrun was started
# ignoring them (a background job of a script ignores SIGINT): whoever sends one to planrun
# means it. SIGHUP ignored at start (`nohup`) stays ignored.
_SIGNALS = (signal.SIGINT, signal.SIGTERM) + (
    () if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else (signal.SIGHUP,)
)


_signalled = threading.Event()  # set by a signal during the last run_interruptibly


def signalled_in_last_run() -> bool:
    """Whether a signal came during the last `run_interruptibly`, also one that came when the
    run was past its last step, stopped nothing and left the run's result as it was: the
    signal still asks the process to end (`run --watch` ends then, not waiting again)."""
    return _signalled.is_set()


def _leave(groups: ProcessGroups | None) -> NoReturn:
    # No flush here: the signal may have arrived while the main thread holds a stream's lock.
    if groups is not None:
        with contextlib.suppress(Exception):
            groups.kill_all()
    os._exit(INTERRUPTED)


def install_quiet_exit(groups: ProcessGroups | None = None) -> None:
    """From now until a run takes over: SIGINT/SIGTERM exit 130 at once, without a traceback
    (first killing the process groups of `groups`, the run that just ended, if any are left)."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers (a library caller's thread: leave them)

    def quiet_exit(signum: int, frame: Any) -> None:
        _leave(groups)

    for sig in _SIGNALS:
        signal.signal(sig, quiet_exit)


def exit_now(code: int) -> NoReturn:
    """Flush stdout and stderr and end the process with `code`, not waiting for worker threads
    (a blocked `python` step or prompt would otherwise keep it alive at interpreter exit)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def run_interruptibly(coro: Coroutine[Any, Any, T], groups: ProcessGroups | None = None) -> T:
    """Run `coro` in a fresh event loop: the first SIGINT/SIGTERM is passed on to the process
    groups in `groups` (the run's commands) and cancels the run (which turns that into an
    interruption, waits for its commands and saves its state); a second kills the groups.

    Unlike `asyncio.run`, closing the loop does not wait for the default executor's threads.
    The signal handlers found at the start are put back at the end: the process's own
    (planrun.__main__ exits at once on a signal) or its caller's.
    """
    import asyncio

    watchdog: list[threading.Timer] = []
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    _signalled.clear()

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        hits = 0

        def cancel() -> None:
            if task is not None:
                task.cancel()

        def on_signal(signum: int, frame: Any) -> None:
            # A Python handler, not the loop's: it runs even while the loop's thread is stuck
            # in a system call (a write to a full stderr pipe no one reads), so the commands
            # always get the signal, and a second signal always ends the process in the end.
            nonlocal hits
            hits += 1
            _signalled.set()
            if hits == 1:
                if groups is not None:
                    groups.interrupt(signum)  # now, whatever the loop is doing
                loop.call_soon_threadsafe(cancel)
            elif hits == 2:  # the grace period ends now; the run still records itself
                if groups is not None:
                    groups.kill_all()
                timer = threading.Timer(STUCK_AFTER_S, _leave, (groups,))
                timer.daemon = True
                timer.start()
                watchdog.append(timer)
            else:  # the journal is valid at every instant: leave now, and no process
                _leave(groups)

        for sig in _SIGNALS:
            signal.signal(sig, on_signal)
        try:
            return await coro
        finally:
            install_quiet_exit(groups)

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the default executor down without waiting for its threads
            for timer in watchdog:
                timer.cancel()
            for sig, handler in previous.items():
                if handler is not None:
                    signal.signal(sig, handler)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    import asyncio

    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
