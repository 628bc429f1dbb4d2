"""A `python` step's environment (SPEC 13): its function runs inside planrun, so its `env` is
set in planrun's own `os.environ` for as long as the call runs, and child processes it starts
inherit it.

One process has one environment: python steps whose environments differ never run at the
same time (the ones with the same environment do). `EnvironGate` hands `os.environ` to one
environment at a time and puts back what it changed when the last call using it ends (a plain
function's thread may outlive its cancelled step: the gate waits for the thread, not the step).
Shell steps are not affected: they get their environment as a mapping (ToolContext.env), never
from `os.environ`. (What reads `os.environ` while such a call runs sees its environment: a
sub-plan or an MCP server starting just then.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from planrun.tools.base import ToolFailed, env_text

T = TypeVar("T")


def step_overlay(base: Mapping[str, str], extra: Any, tool: str) -> dict[str, str | None]:
    """What a python step's environment changes in planrun's: the names `base` (the steps'
    environment: dotenv values under the process environment) sets otherwise, then the step's
    `env` over them (each value as `env_text` reads it)."""
    overlay: dict[str, str | None] = {k: v for k, v in base.items() if os.environ.get(k) != v}
    if extra is None:
        return overlay
    if not isinstance(extra, dict):
        raise ToolFailed(f"{tool}: 'env' must be a mapping")
    for key, value in extra.items():
        name = str(key)
        if not name or "=" in name or "\0" in name:
            raise ToolFailed(f"{tool}: env name {name!r} is not a variable name")
        text = env_text(value)
        if text is not None and "\0" in text:
            raise ToolFailed(f"{tool}: env {name!r} contains a NUL byte")
        overlay[name] = text
    return overlay


class EnvironGate:
    """Lends `os.environ` to one environment at a time (any number of calls sharing it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: frozenset[tuple[str, str | None]] | None = None
        self._users = 0
        self._saved: dict[str, str | None] = {}
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    async def enter(self, overlay: Mapping[str, str | None]) -> Callable[[], None]:
        """Wait until `os.environ` can take `overlay` (None: unset), apply it; the function
        that gives it back (call it once; `retain` for a thread that may outlive the caller)."""
        key = frozenset(overlay.items())
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._users == 0 or self._current == key:
                    if self._users == 0:
                        self._current = key
                        self._saved = _apply(overlay)
                    self._users += 1
                    return self._releaser()
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            await waiter

    def retain(self) -> Callable[[], None]:
        """One more user of the environment now lent (a thread started under it)."""
        with self._lock:
            self._users += 1
        return self._releaser()

    def _releaser(self) -> Callable[[], None]:
        done = [False]

        def release() -> None:
            if not done[0]:
                done[0] = True
                self._leave()

        return release

    def _leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users:
                return
            _apply(self._saved)  # the values it replaced, back
            self._current, self._saved = None, {}
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits there
                loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _apply(overlay: Mapping[str, str | None]) -> dict[str, str | None]:
    """Set (or unset) the names of `overlay` in os.environ; their previous values."""
    saved: dict[str, str | None] = {}
    for name, value in overlay.items():
        saved[name] = os.environ.get(name)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    return saved


class _Lease:
    """One thread's share of the environment lent: given back when the thread's call ends,
    or at once when the call never starts (a cancelled step whose job was still queued)."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._state = "queued"
        self._release = release

    def run(self, fn: Callable[..., T], *args: Any) -> T | None:
        with self._lock:
            if self._state == "abandoned":
                return None  # nobody waits for it
            self._state = "running"
        try:
            return fn(*args)
        finally:
            self._release()

    def abandon(self) -> None:
        with self._lock:
            if self._state != "queued":
                return
            self._state = "abandoned"
        self._release()


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a worker thread under the environment the caller holds from GATE."""
    lease = _Lease(GATE.retain())
    try:
        value = await asyncio.to_thread(lease.run, fn, *args)
    except asyncio.CancelledError:
        lease.abandon()
        raise
    return value  # type: ignore[return-value]  # None only for a call that never ran


GATE = EnvironGate()
"""The process's one gate: every python step (of every run and sub-plan here) goes through it."""
