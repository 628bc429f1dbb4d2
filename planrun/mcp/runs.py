"""The runs in flight in one `planrun mcp` server: each its own task, so a signal can stop them."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the runner only once a run is asked for.
import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planrun.errors import PlanrunError

if TYPE_CHECKING:
    from planrun.run.request import RunRequest


RunTask = asyncio.Task[tuple[dict[str, Any], Any]]


@dataclass
class Runs:
    """The runs in flight in one server, so that a signal can stop them."""

    tasks: set[RunTask] = field(default_factory=set)
    stoppers: set[asyncio.Task[None]] = field(default_factory=set)  # keeps them referenced
    closing: bool = False  # the server is stopping: no new run starts

    async def run(self, req: RunRequest) -> dict[str, Any]:
        """The run's document. The run is its own task, so that a signal can cancel it alone
        (the scheduler then returns an `interrupted` result), not the MCP session around it."""
        from planrun.run.runner import execute

        if self.closing:
            raise PlanrunError("planrun mcp is stopping (signalled): no new run starts")
        task = asyncio.ensure_future(execute(req))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        doc, _code = await task
        return doc

    async def interrupt(self, timeout_s: float = 10.0) -> None:
        """Stop every run in flight, as Ctrl-C stops `planrun run`: each cancelled run stops its
        steps (killing their processes), records them as `interrupted`, releases its state lock
        and answers its tool call with an `interrupted` document.
        """
        self.closing = True
        tasks = set(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    def interrupt_soon(self, loop: asyncio.AbstractEventLoop, then: Callable[[], None]) -> None:
        """From a signal handler: interrupt the runs in the event loop, then call `then`."""

        async def stop() -> None:
            await self.interrupt()
            then()

        loop.call_soon_threadsafe(lambda: self.stoppers.add(loop.create_task(stop())))
