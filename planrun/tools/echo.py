"""The `echo` tool: return its `value` unchanged (handy to bind or reshape variables)."""

from __future__ import annotations

from typing import Any

from planrun.tools import check_args
from planrun.tools.base import ToolContext


async def run_echo(args: dict[str, Any], ctx: ToolContext) -> Any:
    """Return `value` as given (null when there is none: a step that only orders others)."""
    check_args("echo", args, (), ("value",))
    return args.get("value")
