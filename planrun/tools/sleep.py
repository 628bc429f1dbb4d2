"""The `sleep` tool: wait a number of seconds."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from planrun.text import type_name
from planrun.tools import check_args
from planrun.tools.base import ToolContext, ToolFailed


async def run_sleep(args: dict[str, Any], ctx: ToolContext) -> None:
    """Wait `seconds` (a number, 0 or more); result null."""
    check_args("sleep", args, ("seconds",))
    seconds = args["seconds"]
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ToolFailed(f"sleep: 'seconds' must be a number, got {type_name(seconds)}")
    if seconds < 0:
        raise ToolFailed(f"sleep: 'seconds' must be 0 or more, got {seconds}")
    # NaN would not sleep at all, infinity (or an int past float range) never wake up.
    try:
        finite = math.isfinite(seconds) and seconds <= _LONGEST
    except OverflowError:
        finite = False
    if not finite:
        shown = "NaN" if seconds != seconds else "a number too large"
        raise ToolFailed(f"sleep: 'seconds' must be a finite number, got {shown}")
    await asyncio.sleep(seconds)


_LONGEST = 1e300  # more than any run lasts; a larger int cannot be a float
