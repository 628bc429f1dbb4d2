"""The `plan` tool: run another plan file as one step and return its final variables.

The sub-plan goes through the same run path as a top-level run (validate, gate, schedule),
inside its parent: see planrun.run.parent for what it inherits.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from planrun.errors import PlanInvalid, PlanrunError
from planrun.plan.discovery import INVOCATION_DIR
from planrun.run.context import child_context
from planrun.run.parent import RunStopped
from planrun.run.request import Finished, RunRequest
from planrun.status import Status
from planrun.text import type_name
from planrun.tools import check_args, path_arg
from planrun.tools.base import ToolContext, ToolFailed, env_text, resolve_path

MAX_NESTING = 32
"""Sub-plans deeper than this fail their step: a plan that writes a new copy of itself and
runs it is never "the same file", and would otherwise nest until memory runs out."""


def _environment(env: Any, ctx: ToolContext) -> dict[str, str]:
    """The environment the sub-plan starts in: the one this step has (the parent's dotenv under
    the process environment), with the step's `env` (the parent plan's `env` under the step's
    own, planrun.run.stepcall) over it, as the shell tool merges its `env`."""
    if env is None:
        return dict(ctx.env)
    if not isinstance(env, dict):
        raise ToolFailed(f"plan: 'env' must be a mapping, got {type_name(env)}")
    out = dict(ctx.env)
    for key, value in env.items():
        text = env_text(value)
        if text is None:
            out.pop(str(key), None)  # null unsets the name, as for a shell step
        else:
            out[str(key)] = text
    return out


async def run_plan_step(args: dict[str, Any], ctx: ToolContext) -> Any:
    """Run the sub-plan at `path` with `variables` through the run path of the run this step
    is part of (`ctx.parent.run_plan`); a plan that includes itself is an error."""
    # `cwd` is the step's own `cwd:` (planrun.run.stepcall): where the sub-plan runs; its `path`
    # stays relative to the working directory.
    check_args("plan", args, ("path",), ("variables", "cwd", "env"))
    path = path_arg("plan", args)
    variables = {} if args.get("variables") is None else args["variables"]
    if not isinstance(variables, dict):
        raise ToolFailed(f"plan: 'variables' must be a mapping, got {type_name(variables)}")
    environ = _environment(args.get("env"), ctx)
    parent = ctx.parent
    if parent is None or parent.run_plan is None:
        raise ToolFailed("plan: a sub-plan runs only as a step of a plan run")
    if parent.invocation_dir is not None:  # as on its own, started where the run was
        variables = {INVOCATION_DIR: parent.invocation_dir, **variables}
    full = os.path.realpath(resolve_path(path, ctx))
    if full in parent.plan_stack:
        chain = " -> ".join(os.path.basename(p) for p in (*parent.plan_stack, full))
        raise ToolFailed(f"plan: sub-plan includes itself: {chain}")
    if len(parent.plan_stack) >= MAX_NESTING:
        raise ToolFailed(f"plan: sub-plans nested more than {MAX_NESTING} deep: {path}")
    where = args.get("cwd")
    if where is not None and not isinstance(where, str):
        raise ToolFailed(f"plan: 'cwd' must be a string, got {type_name(where)}")
    req = RunRequest(
        environ=environ,
        plan=path if where is None else resolve_path(path, ctx),
        variables=dict(variables),
        cwd=ctx.cwd if where is None else os.path.join(ctx.cwd, where),
        console=False,
        no_state=True,  # its steps are recorded in the parent's state, as PARENT/CHILD
        mcp_config=parent.mcp_config,
    )
    try:
        finished: Finished = await parent.run_plan(child_context(parent, ctx.step_id, full, req))
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
