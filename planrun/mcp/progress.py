"""MCP progress notifications for `plan_run` and `plan_resume`: steps done out of steps to run."""

from __future__ import annotations

import asyncio
import logging

from mcp.server.mcpserver import Context

from planrun.run.events import (
    PlanDiff,
    RunEvent,
    RunFinished,
    RunStarted,
    StepFailed,
    StepInterrupted,
    StepResumed,
    StepSkipped,
    StepSucceeded,
)


class ProgressReporter:
    """Turns the run's events into MCP progress notifications: steps done / steps to run.

    The event bus calls subscribers synchronously inside the scheduler, while sending a
    notification is async: events go through a queue that one task drains in order, so
    notifications never overtake each other and all are sent before the result.
    """

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

    def __call__(self, event: RunEvent) -> None:
        match event:
            case RunStarted(steps=steps):
                self.total = len(steps or [])
                self.queue.put_nowait((0, self.total, f"run {event.plan} started"))
            case PlanDiff(added=added, removed=removed) if event.step is None:  # the top plan's own
                change = len(added or []) - len(removed or [])
                self.total = max(len(self.done), self.total + change)
            case StepSucceeded() | StepFailed() | StepSkipped() | StepInterrupted() | StepResumed():
                self.done.add(event.step)
                self.total = max(self.total, len(self.done))
                message = f"{event.step} {event.status}"
                self.queue.put_nowait((len(self.done), self.total, message))
            case RunFinished(status=status):
                self.queue.put_nowait((len(self.done), self.total, f"run {status}"))
