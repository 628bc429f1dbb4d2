"""`validate --check-tools` and the check before a run's first step: do the MCP tools exist, and
do the literal arguments fit their input schemas?"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the MCP client (and its SDK) only when a plan
# names servers.
import asyncio
import os
from typing import TYPE_CHECKING, Any

from planrun.errors import Diagnostic
from planrun.plan.checked import CheckedPlan
from planrun.plan.definition import Plan, ServerEntry
from planrun.plan.expressions import has_template, resolve
from planrun.suggest import did_you_mean
from planrun.tools.base import ToolFailed

if TYPE_CHECKING:
    from planrun.mcp.client import ServerPool


async def check_tools(
    plan: Plan,
    doc: Any,
    pool: ServerPool,
    *,
    unreachable_is_error: bool,
    selected: set[str] | None = None,
) -> list[Diagnostic]:
    """Diagnostics for every `SERVER.TOOL` step; servers are asked concurrently."""
    used: dict[str, list[int]] = {}
    for i, step in enumerate(plan.steps):
        if "." in step.tool and (selected is None or step.id in selected):
            server = step.tool.split(".", 1)[0]
            if server in plan.servers:
                used.setdefault(server, []).append(i)
    names = list(used)

    async def tools_of(server: str) -> Any:
        # A server that is slow to answer must not hold the run longer than its steps' own
        # timeouts would: past that, skip the check and let the steps fail on their own.
        bounds = [plan.steps[i].timeout or plan.defaults.timeout for i in used[server]]
        bound = min((b for b in bounds if b), default=None)
        if bound is None:
            return await pool.list_tools(server)
        try:
            return await asyncio.wait_for(pool.list_tools(server), bound)
        except TimeoutError:
            return ToolFailed(f"no answer within {bound:g}s")

    listings = await asyncio.gather(*(tools_of(n) for n in names), return_exceptions=True)
    out: list[Diagnostic] = []

    def add(path: tuple[Any, ...], severity: str, message: str, hint: str | None = None) -> None:
        line, col = doc.pos(path)
        out.append(Diagnostic(doc.file, line, col, severity, message, hint))

    for server, listing in zip(names, listings, strict=True):
        if isinstance(listing, BaseException):
            if not isinstance(listing, ToolFailed | OSError):
                raise listing
            if unreachable_is_error:
                msg = listing.message if isinstance(listing, ToolFailed) else str(listing)
                add(
                    ("servers", server),
                    "error",
                    f"cannot check the tools of MCP server '{server}': {msg}",
                )
            continue
        tools = {t["name"]: t for t in listing}
        for i in used[server]:
            step = plan.steps[i]
            name = step.tool.split(".", 1)[1]
            tool = tools.get(name)
            if tool is None:
                add(
                    ("steps", i, "tool"),
                    "error",
                    f"step '{step.id}': MCP server '{server}' has no tool '{name}'",
                    did_you_mean(name, set(tools)),
                )
                continue
            from planrun.mcp.client import check_tool_args

            literal = {k: v for k, v in step.args.items() if not has_template(v)}
            templated = set(step.args) - set(literal)
            errors, warnings = check_tool_args(tool.get("input_schema") or {}, literal)
            for text in errors:
                if any(f"'{k}' is a required property" in text for k in templated):
                    continue
                key = text.split(":", 1)[0].split(".")[0]
                path = ("steps", i, "args", key) if key in step.args else ("steps", i, "args")
                add(path, "error", f"step '{step.id}': args for {step.tool}: {text}")
            for text in warnings:
                add(("steps", i, "args"), "warning", f"step '{step.id}': {step.tool}: {text}")
    return out


def server_entries(plan: Plan, variables: dict[str, Any]) -> dict[str, ServerEntry]:
    """The plan's server entries with `${...}` (e.g. `${env.TOKEN}`) resolved."""
    scope = {**variables, "env": dict(os.environ)}
    return {
        n: ServerEntry.from_dict(resolve(e.to_dict(), scope, path=("servers", n)))
        for n, e in plan.servers.items()
    }


def make_pool(plan: Plan, variables: dict[str, Any], cwd: str) -> ServerPool:
    """The run's MCP server pool (servers start when first used)."""
    from planrun.mcp.client import ServerPool

    timeouts = [e.connect_timeout for e in plan.servers.values() if e.connect_timeout]
    return ServerPool(
        server_entries(plan, variables), cwd=cwd, connect_timeout=max(timeouts, default=20.0)
    )


def check_plan_tools(
    checked: CheckedPlan, cwd: str, variables: dict[str, Any] | None = None
) -> list[Diagnostic]:
    """`validate --check-tools`: connect to the servers the plan uses and check its steps."""
    plan = checked.plan
    if plan is None or not any("." in s.tool for s in plan.steps):
        return []

    from planrun.plan.variables import start_variables

    values = start_variables(plan.variables, variables or {}, os.environ, checked.doc, plan.secrets)

    async def main() -> list[Diagnostic]:
        async with make_pool(plan, values, cwd) as pool:
            return await check_tools(plan, checked.doc, pool, unreachable_is_error=True)

    found = asyncio.run(main())
    if not plan.secrets:
        return found
    # A secret in a server's entry (a URL, its env) may come back in what the server or the
    # connection says: masked, as a run masks it.
    from dataclasses import replace

    from planrun.masking import Masker

    mask = Masker(plan.secrets, values, os.environ)
    return [replace(d, message=mask(d.message), hint=mask(d.hint)) for d in found]
