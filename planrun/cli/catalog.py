"""`planrun list` and `planrun tools`: what plans and tools there are."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: `list` reads plan files; the tool listing,
# the loader, validation and MCP servers are for `tools`.
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from planrun.errors import PlanInvalid, PlanrunError, one_line
from planrun.plan.definition import ServerEntry
from planrun.plan.discovery import PLAN_EXTENSIONS
from planrun.tools import builtin_registry


def list_plans(directory: str, cwd: str, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """[{path, name, title, steps, last_status}] for every plan file under `directory`.

    A file that parses but is not a plan is left out silently (a directory of plans may hold
    other YAML); one that cannot be read at all (a dangling symbolic link, a FIFO, no
    permission) is left out too, and one line saying so is appended to `skipped`.
    """
    from planrun.plan.loader import load_bytes
    from planrun.plan.validate import default_name
    from planrun.state import default_state_path, read_state

    rows = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for fname in sorted(files):
            if not fname.endswith(PLAN_EXTENSIONS):
                continue
            path = os.path.join(root, fname)
            raw, why = _read_listed(path)
            if raw is None:
                if why is not None and skipped is not None:
                    skipped.append(f"skipped {path}: {why}")
                continue
            try:
                data = load_bytes(raw, path).data
            except PlanInvalid:
                continue
            if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
                continue
            name = data.get("name") or data.get("id") or default_name(path)
            name = str(name)
            last = None
            try:
                st = read_state(Path(default_state_path(cwd, name)), name)
                last = st.status if st else None
            except PlanrunError:
                last = "unreadable"
            rows.append(
                {
                    "path": path,
                    "name": name,
                    "title": data.get("title"),
                    "steps": len(data["steps"]),
                    "last_status": last,
                }
            )
    return rows


def _read_listed(path: str) -> tuple[bytes | None, str | None]:
    """The bytes of a listed file, or None and why it cannot be read (None when it is simply
    gone: removed since the directory was read)."""
    from planrun.inputfiles import NotARegularFile, read_regular_file

    try:
        return read_regular_file(path), None
    except FileNotFoundError:
        return None, ("a symbolic link to a missing file" if os.path.islink(path) else None)
    except NotARegularFile as exc:
        return None, f"it is {exc.kind}, not a plan file"
    except OSError as exc:
        return None, f"cannot read plan file: {exc.strerror or exc}"


def render_list(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no plans found\n"
    width = max(len(r["path"]) for r in rows)
    lines = []
    for r in rows:
        title = r["title"] or ""
        lines.append(
            f"{r['path']:<{width}}  {r['steps']:>4} {'step ' if r['steps'] == 1 else 'steps'}"
            f"  {r['last_status'] or 'never run':<11}  {title}"
        )
    return "\n".join(lines) + "\n"


def list_tools(
    plan_path: str | None, cwd: str, mcp_config: str | None = None
) -> list[dict[str, Any]]:
    """[{name, source, description, input_schema}]: built-ins, then each server's tools."""
    rows: list[dict[str, Any]] = [  # by name, as the registry lists them
        {
            "name": s.name,
            "source": "builtin",
            "description": s.description,
            "input_schema": s.input_schema,
        }
        for s in builtin_registry().specs()
    ]
    if plan_path is None and mcp_config is None:
        return rows
    from planrun.mcp.client import parse_mcp_config

    extra = parse_mcp_config(mcp_config) if mcp_config else {}
    servers: dict[str, ServerEntry] = dict(extra)
    mask: Callable[[Any], Any] = _unmasked
    if plan_path is not None:
        from planrun.plan.expressions import ExpressionError
        from planrun.plan.validate import load_plan
        from planrun.plan.variables import evaluate_variables
        from planrun.run.checktools import server_entries

        # The config's servers are the plan's too (as for `run --mcp-config`): its
        # SERVER.TOOL steps are valid, and the plan's own entries win.
        plan = load_plan(plan_path, servers=extra)
        try:
            values = evaluate_variables(plan.variables, {}, os.environ)
        except ExpressionError:  # an unset env variable: list what can be listed
            values = dict(plan.variables)
        servers.update(server_entries(plan, values))
        if plan.secrets:  # a secret in an entry (a URL, a server's env) may come back in a
            from planrun.masking import Masker  # server's error or its tools' descriptions

            mask = Masker(plan.secrets, values, os.environ)
    if servers:
        import asyncio

        rows.extend(asyncio.run(_server_tools(servers, cwd, mask)))
    return rows


def _unmasked(value: Any) -> Any:
    return value


async def _server_tools(
    servers: dict[str, ServerEntry], cwd: str, mask: Callable[[Any], Any]
) -> list[dict[str, Any]]:
    """Every tool of `servers` (resolved plan entries, or expanded by parse_mcp_config), and a
    server's failure, with the plan's secrets masked (`mask`)."""
    import asyncio

    from planrun.mcp.client import ServerPool
    from planrun.tools.base import ToolFailed

    async with ServerPool(servers, cwd=cwd) as pool:
        lists = await asyncio.gather(*(pool.list_tools(n) for n in servers), return_exceptions=True)
    out = []
    for name, tools in zip(servers, lists, strict=True):
        # a server that cannot start or answers garbage: one line, exit 1
        if isinstance(tools, ToolFailed):
            raise PlanrunError(mask(tools.message))
        if isinstance(tools, BaseException):
            raise tools
        for t in tools:
            out.append(
                {
                    "name": f"{name}.{t['name']}",
                    "source": name,
                    "description": mask(t.get("description") or ""),
                    "input_schema": mask(t.get("input_schema") or {}),
                }
            )
    return out


def render_tools(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        props = (r["input_schema"] or {}).get("properties", {})
        required = set((r["input_schema"] or {}).get("required", []))
        args = ", ".join(f"{k}{'' if k in required else '?'}" for k in props)
        desc = (r["description"] or "").strip().splitlines()[0] if r["description"] else ""
        # An MCP server names and describes its tools: no escape sequence of its reaches the
        # terminal, and each tool stays one line.
        lines.append(one_line(f"{r['name']}({args})  [{r['source']}]  {desc}"))
    return "\n".join(lines) + "\n"
