"""The local executor: built-in tools in this process, MCP tools through the run's server pool."""

from __future__ import annotations

from typing import Any

from planrun.tools import builtin_registry
from planrun.tools.base import ToolContext, ToolFailed


class LocalExecutor:
    """Looks a tool up by name and awaits it; cancellation reaches the tool itself."""

    def __init__(self) -> None:
        self.registry = builtin_registry()

    async def start(self) -> None:
        return None

    async def call(self, tool: str, args: dict[str, Any], ctx: ToolContext) -> Any:
        spec = self.registry.get(tool)
        if spec is not None:
            return await spec.fn(args, ctx)
        if "." in tool:
            pool = ctx.services.mcp
            server, name = tool.split(".", 1)
            if pool is None:
                raise ToolFailed(f"MCP server '{server}' is not configured")
            return await pool.call(server, name, args, timeout=ctx.timeout)
        raise ToolFailed(f"unknown tool '{tool}'")

    async def aclose(self) -> None:
        return None
