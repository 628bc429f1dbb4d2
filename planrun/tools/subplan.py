"""The `plan` tool: run another plan file as one step and return its final variables."""

from __future__ import annotations

import os
from typing import Any

from planrun.tools.base import ToolContext, ToolFailed, resolve_path


async def run_subplan(args: dict[str, Any], ctx: ToolContext) -> Any:
    """Run the sub-plan at `path` with `variables`; a plan that includes itself is an error."""
    from planrun.errors import PlanrunError
    from planrun.events import EventBus
    from planrun.executors.local import LocalExecutor
    from planrun.runner import RunRequest, prepare
    from planrun.scheduler import RunSettings, Scheduler

    path = args.get("path")
    if not isinstance(path, str):
        raise ToolFailed("plan: missing argument 'path' (the sub-plan file)")
    variables = args.get("variables") or {}
    if not isinstance(variables, dict):
        raise ToolFailed("plan: 'variables' must be a mapping")
    unknown = sorted(set(args) - {"path", "variables"})
    if unknown:
        raise ToolFailed(
            f"plan: unknown argument {', '.join(map(repr, unknown))} (allowed: path, variables)"
        )
    full = os.path.realpath(resolve_path(path, ctx))
    stack: tuple[str, ...] = ctx.services.get("plan_stack", ())
    if full in stack:
        chain = " -> ".join(os.path.basename(p) for p in (*stack, full))
        raise ToolFailed(f"plan: sub-plan includes itself: {chain}")
    try:
        prep = prepare(RunRequest(plan=path, variables=dict(variables), cwd=ctx.cwd, console=False))
    except PlanrunError as exc:
        raise ToolFailed(f"plan: sub-plan {path} is invalid: {exc}") from None
    services: dict[str, Any] = {**ctx.services, "plan_stack": (*stack, full)}
    pool = None
    if prep.plan.servers:
        from planrun.expressions import resolve
        from planrun.mcp_client import ServerPool

        scope = {**prep.variables, "env": dict(ctx.env)}
        entries = {
            n: resolve(e.model_dump(exclude_none=True), scope) for n, e in prep.plan.servers.items()
        }
        pool = ServerPool(entries, cwd=ctx.cwd)
        services["mcp"] = pool
    from planrun.secrets import Masker

    bus = EventBus(mask=Masker(prep.plan.secrets, prep.variables) if prep.plan.secrets else None)
    for report in ctx.services.get("reporters", ()):
        bus.subscribe(report)
    settings = RunSettings(
        jobs=prep.plan.limits.max_concurrency or os.cpu_count() or 1,
        cwd=ctx.cwd,
        env=ctx.env,
        yes=True,
        services=services,
    )
    sched = Scheduler(prep.plan, prep.selected, prep.variables, LocalExecutor(), bus, settings)
    try:
        outcome = await sched.run()
    finally:
        if pool is not None:
            await pool.aclose()
    if outcome.status == "interrupted":
        import asyncio

        raise asyncio.CancelledError()
    if outcome.status != "succeeded":
        raise ToolFailed(f"sub-plan {path} {outcome.status}: {outcome.error or outcome.reason}")
    return sched.variables
