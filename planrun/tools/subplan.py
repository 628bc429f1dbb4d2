"""The `plan` tool: run another plan file as one step and return its final variables.

The sub-plan goes through the same run path as a top-level run (validate, gate, schedule),
inside its parent: see planrun.run.parent for what it inherits.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from planrun.errors import PlanInvalid, PlanrunError
from planrun.run.context import RunContext, child_context
from planrun.run.parent import RunStopped
from planrun.run.request import Finished, RunRequest
from planrun.status import Status
from planrun.tools.base import ToolContext, ToolFailed, ToolFn, resolve_path

MAX_NESTING = 32
"""Sub-plans deeper than this fail their step: a plan that writes a new copy of itself and
runs it is never "the same file", and would otherwise nest until memory runs out."""

RunFn = Callable[[RunContext], Awaitable[Finished]]
"""The one run path (planrun.run.runner.run_request), handed in so this module does not import it."""


def make_plan_tool(run: RunFn) -> ToolFn:
    """The `plan` tool, running sub-plans through `run`."""

    async def plan_tool(args: dict[str, Any], ctx: ToolContext) -> Any:
        return await run_subplan(args, ctx, run)

    return plan_tool


async def run_subplan(args: dict[str, Any], ctx: ToolContext, run_request: RunFn) -> Any:
    """Run the sub-plan at `path` with `variables`; a plan that includes itself is an error."""
    path = args.get("path")
    if not isinstance(path, str):
        raise ToolFailed("plan: missing argument 'path' (the sub-plan file)")
    variables = args.get("variables") or {}
    if not isinstance(variables, dict):
        raise ToolFailed("plan: 'variables' must be a mapping")
    # `cwd` is the step's own `cwd:` (planrun.run.stepcall): where the sub-plan runs; its `path`
    # stays relative to the working directory.
    unknown = sorted(set(args) - {"path", "variables", "cwd"})
    if unknown:
        raise ToolFailed(
            f"plan: unknown argument {', '.join(map(repr, unknown))} (allowed: path, variables)"
        )
    parent = ctx.parent
    if parent is None:
        raise ToolFailed("plan: a sub-plan runs only as a step of a plan run")
    full = os.path.realpath(resolve_path(path, ctx))
    if full in parent.plan_stack:
        chain = " -> ".join(os.path.basename(p) for p in (*parent.plan_stack, full))
        raise ToolFailed(f"plan: sub-plan includes itself: {chain}")
    if len(parent.plan_stack) >= MAX_NESTING:
        raise ToolFailed(f"plan: sub-plans nested more than {MAX_NESTING} deep: {path}")
    where = args.get("cwd")
    if where is not None and not isinstance(where, str):
        raise ToolFailed(f"plan: 'cwd' must be a string, got {where!r}")
    req = RunRequest(
        plan=path if where is None else resolve_path(path, ctx),
        variables=dict(variables),
        cwd=ctx.cwd if where is None else os.path.join(ctx.cwd, where),
        console=False,
        no_state=True,  # its steps are recorded in the parent's state, as PARENT/CHILD
        mcp_config=parent.mcp_config,
    )
    try:
        finished = await run_request(child_context(parent, ctx.step_id, full, req))
    except PlanInvalid as exc:
        raise ToolFailed(f"plan: sub-plan {path} is invalid: {exc}") from None
    except PlanrunError as exc:
        raise ToolFailed(f"plan: sub-plan {path}: {exc}") from None
    status, reason = finished.document["status"], finished.document["reason"]
    error = finished.document.get("error") or reason
    if status == Status.INTERRUPTED:
        raise asyncio.CancelledError()
    if reason in ("approval_required", "denied"):
        raise RunStopped(reason, error)
    if reason == "step_budget" and parent.budget.spent_here_or_above():
        raise RunStopped(reason, error)
    if status != Status.SUCCEEDED:
        raise ToolFailed(f"sub-plan {path} {status}: {error}")
    return finished.variables
