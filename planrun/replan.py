"""Replanning (SPEC §6): ask an external planner for steps that replace every unfinished step.

planrun stays deterministic and model-free: the planner is a command (context JSON on stdin,
steps JSON on stdout) or an MCP tool (context as arguments). Every revision is validated
against the completed steps before anything runs, emitted as `plan.diff`, and stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from planrun.errors import PlanInvalid
from planrun.events import Event
from planrun.model import Plan, Step

if TYPE_CHECKING:
    from planrun.runner import RunRequest
    from planrun.scheduler import ReplanRequested, Scheduler

COMPLETED = ("succeeded", "ignored", "skipped")


class PlannerError(Exception):
    """The planner could not be asked, or its answer is not a list of steps."""


def step_dict(step: Step) -> dict[str, Any]:
    """A step as it would be written in a plan file."""
    return step.model_dump(mode="json", exclude_defaults=True)


def apply_revisions(plan: Plan, revisions: list[dict[str, Any]]) -> Plan:
    """The plan as its last stored revision left it (each revision stores the full step list)."""
    if not revisions:
        return plan
    steps = [Step.model_validate(s) for s in revisions[-1]["steps"]]
    return plan.model_copy(update={"steps": steps})


def make_replanner(
    plan: Plan, req: RunRequest, services: dict[str, Any]
) -> Callable[[Scheduler, ReplanRequested], Awaitable[bool]]:
    """The scheduler's replan hook for this run's planner source."""
    if req.planner:
        source: dict[str, Any] = {"command": req.planner, "timeout": 60.0}
    else:
        assert plan.replan is not None
        source = {
            "command": plan.replan.command,
            "tool": plan.replan.tool,
            "timeout": plan.replan.timeout,
        }
    cwd = req.cwd

    async def ask(context: dict[str, Any]) -> Any:
        if source.get("tool"):
            pool = services.get("mcp")
            server, name = str(source["tool"]).split(".", 1)
            if pool is None:
                raise PlannerError(
                    f"planner tool {source['tool']}: MCP server '{server}' is not configured"
                )
            try:
                return await pool.call(server, name, context, timeout=source["timeout"])
            except Exception as exc:
                raise PlannerError(f"planner tool {source['tool']} failed: {exc}") from None
        return await _run_command(source["command"], context, cwd, float(source["timeout"]))

    async def replan(sched: Scheduler, request: ReplanRequested) -> bool:
        return await _replan(sched, request, ask)

    return replan


async def _run_command(
    command: list[str] | str, context: dict[str, Any], cwd: str, timeout: float
) -> Any:
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    label = " ".join(argv)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise PlannerError(
            f"planner command not found or not runnable: {label} ({exc.strerror})"
        ) from None
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate(json.dumps(context, default=str).encode())
    except (TimeoutError, asyncio.CancelledError) as exc:
        _kill(proc)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise PlannerError(f"planner timed out after {timeout:g}s: {label}") from None
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise PlannerError(f"planner exited with code {proc.returncode}: {label}: {tail[0]}")
    text = out.decode(errors="replace").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerError(
            f"planner printed something that is not JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno}): {text[:80]!r}"
        ) from None


def _kill(proc: asyncio.subprocess.Process) -> None:
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _steps_of(answer: Any) -> list[Any]:
    if isinstance(answer, dict) and "steps" in answer:
        answer = answer["steps"]
    if not isinstance(answer, list):
        raise PlannerError('planner output must be a list of steps or {"steps": [...]}')
    return answer


async def _replan(
    sched: Scheduler, request: ReplanRequested, ask: Callable[[dict[str, Any]], Awaitable[Any]]
) -> bool:
    """Ask until a revision validates or the budget is spent; True when a new pass should run."""
    from planrun.loader import load_text
    from planrun.validate import check_document

    plan = sched.plan
    name = plan.name or ""
    failed = sched.steps[request.step_id]
    error = request.error
    completed_ids = [sid for sid in sched.order if sched.records[sid].status in COMPLETED]
    history: list[dict[str, Any]] = [
        {"revision": r["revision"], "error": r["error"], "diff": r["diff"]} for r in sched.revisions
    ]
    while True:
        if sched.replans >= plan.limits.max_replans:
            sched.stop_reason = "replan_budget"
            sched.stop_error = (
                f"replan budget exhausted: limits.max_replans is {plan.limits.max_replans} "
                f"(last error: {error})"
            )
            return False
        sched.replans += 1
        context = {
            "goal": plan.goal,
            "plan": plan.model_dump(mode="json", exclude_defaults=True) | {"name": name},
            "failed_step": step_dict(failed),
            "error": error,
            "completed": {
                sid: sched.records[sid].result
                for sid in completed_ids
                if sched.records[sid].status != "skipped"
            },
            "variables": {k: v for k, v in sched.variables.items()},
            "history": history,
        }
        try:
            # The planner is outside the run: it sees secrets masked, as every output does.
            new_raw = _steps_of(await ask(sched.bus.mask(context)))
        except PlannerError as exc:
            history.append({"revision": None, "error": str(exc), "diff": None})
            error = str(exc)
            _notice(sched, f"replan {sched.replans} failed: {exc}")
            continue
        if not new_raw:
            sched.stop_reason = "no_plan"
            sched.stop_error = "the planner returned no steps"
            return False
        kept = [step_dict(sched.steps[sid]) for sid in completed_ids]
        candidate = plan.model_dump(mode="json", exclude_defaults=True)
        candidate.update({"name": name, "steps": kept + new_raw})
        candidate.pop("id", None)
        try:
            checked = check_document(
                load_text(json.dumps(candidate), f"<revision {sched.replans}>", "json"),
                {k: v for k, v in sched.variables.items()},
            )
            errors = [d for d in checked.diagnostics if d.severity == "error"]
        except PlanInvalid as exc:
            errors = exc.diagnostics
            checked = None
        if errors or checked is None or checked.plan is None:
            text = (
                "; ".join(d.message + (f" ({d.hint})" if d.hint else "") for d in errors)
                or "invalid revision"
            )
            error = f"the planner's revision is invalid: {text}"
            history.append({"revision": None, "error": error, "diff": None})
            _notice(sched, f"replan {sched.replans} rejected: {text}")
            continue
        new_plan = checked.plan
        new_steps = new_plan.steps[len(kept) :]
        diff = plan_diff(sched, completed_ids, new_steps)
        revision = {
            "revision": len(sched.revisions) + 1,
            "diff": diff,
            "error": request.error,
            "failed_step": request.step_id,
            "steps": [step_dict(s) for s in new_plan.steps],
        }
        sched.revisions.append(revision)
        sched.bus.emit(
            Event(
                "plan.diff",
                name,
                None,
                {
                    **diff,
                    "revision": revision["revision"],
                    "error": request.error,
                    "steps": revision["steps"],
                },
            )
        )
        for sid in list(sched.records):
            if sid not in completed_ids:
                del sched.records[sid]
        sched.plan = plan.model_copy(update={"steps": new_plan.steps})
        sched._set_steps(new_plan.steps, [s.id for s in new_plan.steps])
        sched.failed_any = any(r.status == "failed" for r in sched.records.values())
        return True


def plan_diff(
    sched: Scheduler, completed_ids: list[str], new_steps: list[Step]
) -> dict[str, list[str]]:
    """{removed, added, revised} by step id; revised = same id, different tool or args."""
    old = {sid: sched.steps[sid] for sid in sched.order if sid not in completed_ids}
    new = {s.id: s for s in new_steps}
    return {
        "removed": [sid for sid in old if sid not in new],
        "added": [sid for sid in new if sid not in old],
        "revised": [
            sid
            for sid in new
            if sid in old and (old[sid].tool, old[sid].args) != (new[sid].tool, new[sid].args)
        ],
    }


def _notice(sched: Scheduler, text: str) -> None:
    note = sched.settings.services.get("notice")
    if note is not None:
        note(text)
