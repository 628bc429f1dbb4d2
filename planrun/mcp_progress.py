"""MCP progress notifications for `plan_run` and `plan_resume`: steps done out of steps to run."""

from __future__ import annotations

import asyncio
import logging

from mcp.server.mcpserver import Context

from planrun.events import Event


class ProgressReporter:
    """Turns the run's events into MCP progress notifications: steps done / steps to run.

    The event bus calls subscribers synchronously inside the scheduler, while sending a
    notification is async: events go through a queue that one task drains in order, so
    notifications never overtake each other and all are sent before the result.
    """

    FINAL = frozenset(
        {"step.succeeded", "step.failed", "step.skipped", "step.interrupted", "step.resumed"}
    )

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.total = 0
        self.done: set[str] = set()
        self.queue: asyncio.Queue[tuple[float, float, str] | None] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._drain())

    async def finish(self) -> None:
        """Wait until every queued notification is sent."""
        self.queue.put_nowait(None)
        if self.task is not None:
            await self.task

    async def _drain(self) -> None:
        while (item := await self.queue.get()) is not None:
            progress, total, message = item
            try:
                await self.ctx.report_progress(progress, total, message)
            except Exception:  # a client gone away must not fail the run itself
                logging.getLogger(__name__).debug("progress notification failed", exc_info=True)

    def __call__(self, event: Event) -> None:
        if event.event == "run.started":
            self.total = len(event.data.get("steps") or [])
            self.queue.put_nowait((0, self.total, f"run {event.plan} started"))
        elif event.event == "plan.diff" and event.step is None:  # the top plan's own
            added = len(event.data.get("added") or [])
            removed = len(event.data.get("removed") or [])
            self.total = max(len(self.done), self.total + added - removed)
        elif event.event in self.FINAL and event.step is not None:
            self.done.add(event.step)
            self.total = max(self.total, len(self.done))
            status = event.data.get("status") or event.event.removeprefix("step.")
            self.queue.put_nowait((len(self.done), self.total, f"{event.step} {status}"))
        elif event.event == "run.finished":
            status = event.data.get("status")
            self.queue.put_nowait((len(self.done), self.total, f"run {status}"))
