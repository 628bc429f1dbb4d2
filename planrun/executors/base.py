"""The executor seam: how a ready step's tool call is carried out (locally, on a cluster)."""

from __future__ import annotations

from typing import Any, Protocol

from planrun.tools.base import ToolCaller, ToolContext


class Executor(ToolCaller, Protocol):
    """Carries out one tool call. The scheduler knows nothing else about it.

    `call` raises `ToolFailed` for an expected failure; cancellation (asyncio.CancelledError)
    must stop the underlying work (kill the process group, cancel the remote task).
    """

    async def start(self) -> None: ...

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any: ...

    async def aclose(self) -> None: ...
