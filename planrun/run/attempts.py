"""One attempt at a step's tool call, bounded by its timeout; a failure becomes a value.

The scheduler decides what an attempt's failure means (retry, fail, ignore, replan); here
only the ways a tool call can go wrong are turned into one error line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, NamedTuple

from planrun.plan.definition import Step
from planrun.run.runtree import RunStopped
from planrun.run.settings import RunSettings
from planrun.tools.base import ToolCaller, ToolContext, ToolFailed


class AttemptFailed(NamedTuple):
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
    except UnicodeEncodeError as exc:
        if "surrogate" not in exc.reason:
            return None, AttemptFailed(f"{type(exc).__name__}: {exc}")
        # A lone surrogate (a python step's or an MCP tool's text) that a file name, a file or
        # a request cannot carry: said once here for every tool, as the shell tool says it.
        problem = "an argument contains text that is not valid Unicode (a lone surrogate)"
        return None, AttemptFailed(f"{step.tool}: {problem}")
    except Exception as exc:  # a tool's unexpected error still fails only its step
        return None, AttemptFailed(f"{type(exc).__name__}: {exc}")


def output_of(result: Any) -> str | None:
    """The text a shell-like result printed (stdout then stderr), else None."""
    if isinstance(result, dict) and ("stdout" in result or "stderr" in result):
        text = str(result.get("stdout") or "") + str(result.get("stderr") or "")
        return text or None
    return None


STDERR_TAIL_LINES = 5  # what a failed attempt keeps of its stderr: the lines that say why
STDERR_TAIL_CHARS = 2000


def stderr_tail(result: Any) -> str:
    """The last lines of what a failed attempt wrote to stderr ("" when it wrote nothing or
    its result has no stderr): what `command exited with code 1` leaves out."""
    text = result.get("stderr") if isinstance(result, dict) else None
    if not isinstance(text, str) or not text.strip():
        return ""
    lines = [line.rstrip() for line in text.rstrip().splitlines()]
    return "\n".join(lines[-STDERR_TAIL_LINES:])[-STDERR_TAIL_CHARS:]


def tool_context(
    sid: str,
    step: Step,
    default_timeout: float | None,
    settings: RunSettings,
    on_output: Callable[[str, str], None] | None,
) -> ToolContext:
    """What the step's tool may know of the run (its timeout: the step's, else the plan's)."""
    return ToolContext(
        step_id=sid,
        cwd=settings.parent.cwd,
        env=settings.env,
        timeout=step.timeout if step.timeout is not None else default_timeout,
        on_output=on_output,
        services=settings.services,
        resources=step.resources,
        parent=settings.parent,
    )
