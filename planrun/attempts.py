"""One attempt at a step's tool call, bounded by its timeout; a failure becomes a value.

The scheduler decides what an attempt's failure means (retry, fail, ignore, replan); here
only the ways a tool call can go wrong are turned into one error line.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from planrun.model import Step
from planrun.parent import RunStopped
from planrun.tools.base import ToolCaller, ToolContext, ToolFailed


@dataclass(frozen=True)
class AttemptFailed:
    """How an attempt failed: one line, extra text for people, and any partial result."""

    error: str
    detail: str | None = None
    partial: Any = None


async def attempt(
    executor: ToolCaller, step: Step, args: dict[str, Any], ctx: ToolContext, timeout: float | None
) -> tuple[Any, AttemptFailed | None]:
    """(result, None) when the call succeeds, (None, failure) when it does not.

    Cancellation, KeyboardInterrupt and RunStopped (a sub-plan stopping the whole run) go
    through: they stop the run, not just this step.
    """
    if step.resources:
        ctx.services = {**ctx.services, "resources": step.resources}
    try:
        if timeout:
            async with asyncio.timeout(timeout):
                return await executor.call(step.tool, args, ctx), None
        return await executor.call(step.tool, args, ctx), None
    except TimeoutError:
        error = f"timed out after {timeout or 0:g}s"
        if "." in step.tool:  # name the MCP server and tool that did not answer
            server, _, tool = step.tool.partition(".")
            error = f"MCP server '{server}' tool '{tool}': {error}"
        return None, AttemptFailed(error)
    except ToolFailed as exc:
        return None, AttemptFailed(exc.message, exc.detail, exc.result)
    except (asyncio.CancelledError, KeyboardInterrupt, RunStopped):
        raise
    except Exception as exc:  # a tool's unexpected error still fails only its step
        return None, AttemptFailed(f"{type(exc).__name__}: {exc}")
