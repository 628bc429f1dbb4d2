"""Replanning: ask an external planner for steps that replace every unfinished step.

planrun stays deterministic and model-free: the planner is a command (context JSON on stdin,
steps JSON on stdout) or an MCP tool (context as arguments). Every revision is validated
against the completed steps before anything runs. The answer is a value (a `Revision` or a
`ReplanStop`) that the scheduler applies, emits as `plan.diff`, and so stores.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the loader, the model and validation only
# when a planner answers.
import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from planrun import untrusted_json
from planrun.errors import quoted
from planrun.plan.definition import Plan, Step, planner_argv
from planrun.run.planner import Replanner, ReplanRequest, ReplanStop, Revision
from planrun.status import Reason

if TYPE_CHECKING:
    from planrun.run.request import RunRequest
    from planrun.tools.base import Services


class PlannerError(Exception):
    """The planner could not be asked, or its answer is not a list of steps."""


def step_dict(step: Step) -> dict[str, Any]:
    """A step as it would be written in a plan file."""
    return step.to_dict(exclude_defaults=True)


def make_replanner(
    plan: Plan,
    req: RunRequest,
    services: Services,
    mask: Callable[[Any], Any] | None = None,
) -> Replanner:
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
            pool = services.mcp
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

    async def replan(request: ReplanRequest) -> Revision | ReplanStop:
        return await _replan(request, ask, services.notice, mask)

    return replan


async def _run_command(
    command: list[str] | str, context: dict[str, Any], cwd: str, timeout: float
) -> Any:
    argv = planner_argv(command)  # (validation and the command line checked it)
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
            out, err = await _answer(proc, json.dumps(context, default=str).encode(), label)
    except (TimeoutError, asyncio.CancelledError, PlannerError) as exc:
        _kill(proc)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError | PlannerError):
            raise
        raise PlannerError(f"planner timed out after {timeout:g}s: {label}") from None
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        raise PlannerError(
            f"planner exited with code {proc.returncode}: {label}: {quoted(tail[0])}"
        )
    text = out.decode(errors="replace").strip()
    try:
        return untrusted_json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerError(
            f"planner printed something that is not JSON ({exc.msg} at line {exc.lineno} "
            f"column {exc.colno}): {text[:80]!r}"
        ) from None
    except ValueError as exc:  # NaN, a number too long or too large, nesting too deep
        raise PlannerError(
            f"planner printed JSON planrun cannot read ({str(exc)[:80]}): {text[:80]!r}"
        ) from None


# What is read of a planner: its answer up to the most a plan file may be (inputfiles.py), the
# end of its stderr for the message of a failure. It may print anything, for as long as it runs.
MAX_ANSWER_BYTES = 16 << 20
_STDERR_TAIL_BYTES = 4096


async def _answer(proc: asyncio.subprocess.Process, data: bytes, label: str) -> tuple[bytes, bytes]:
    """Feed `data` to the planner and read its stdout (PlannerError past MAX_ANSWER_BYTES) and
    the tail of its stderr until it exits."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr

    async def feed() -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(data)
            await stdin.drain()
            stdin.close()

    async def tail() -> bytes:
        kept = b""
        while chunk := await stderr.read(1 << 16):
            kept = (kept + chunk)[-_STDERR_TAIL_BYTES:]
        return kept

    feeding, reading = asyncio.create_task(feed()), asyncio.create_task(tail())
    try:
        parts: list[bytes] = []
        size = 0
        while chunk := await stdout.read(1 << 16):
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise PlannerError(
                    f"planner printed more than {MAX_ANSWER_BYTES >> 20} MiB: {label}"
                )
            parts.append(chunk)
        err = await reading
        await feeding
        await proc.wait()
    finally:
        feeding.cancel()
        reading.cancel()
    return b"".join(parts), err


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _steps_of(answer: Any) -> list[Any]:
    if isinstance(answer, dict) and "steps" in answer:
        answer = answer["steps"]
    if not isinstance(answer, list):
        raise PlannerError('planner output must be a list of steps or {"steps": [...]}')
    return answer


async def _replan(
    request: ReplanRequest,
    ask: Callable[[dict[str, Any]], Awaitable[Any]],
    notice: Callable[[str], None] | None,
    mask: Callable[[Any], Any] | None = None,
) -> Revision | ReplanStop:
    """Ask until a revision validates or the budget is spent; the answer is a value the
    scheduler applies (this module changes nothing of the run itself)."""
    plan = request.plan
    steps = {s.id: s for s in plan.steps}
    first = request.failures[0]
    error = first.error
    history: list[dict[str, Any]] = [
        {"revision": r["revision"], "error": r["error"], "diff": r["diff"]}
        for r in request.revisions
    ]
    calls = 0
    while True:
        if calls >= request.calls_left:
            limit = request.limit or f"limits.max_replans is {plan.limits.max_replans}"
            text = f"replan budget exhausted: {limit} (last error: {error})"
            return ReplanStop(Reason.REPLAN_BUDGET, text, calls)
        calls += 1
        context = planner_context(request, steps, error, history)
        try:
            # The planner is outside the run: it sees secrets masked, as every output does.
            new_raw = _steps_of(await ask(mask(context) if mask is not None else context))
        except PlannerError as exc:
            history.append({"revision": None, "error": str(exc), "diff": None})
            error = str(exc)
            _say(notice, f"replan {len(request.revisions) + calls} failed: {exc}")
            continue
        if not new_raw:
            return ReplanStop(Reason.NO_PLAN, "the planner returned no steps", calls)
        new_plan, problem = _check_revision(request, steps, new_raw, calls)
        if new_plan is None:
            error = f"the planner's revision is invalid: {problem}"
            history.append({"revision": None, "error": error, "diff": None})
            _say(notice, f"replan {len(request.revisions) + calls} rejected: {problem}")
            continue
        new_steps = new_plan.steps[len(request.completed) :]
        record = {
            "revision": len(request.revisions) + 1,
            "diff": plan_diff(plan, request.completed, new_steps),
            "error": first.error,
            "failed_step": first.step_id,
            "steps": [step_dict(s) for s in new_plan.steps],
        }
        if len(request.failures) > 1:
            record["failed_steps"] = [f.step_id for f in request.failures]
        return Revision(new_plan, record, calls)


def planner_context(
    request: ReplanRequest, steps: dict[str, Step], error: str, history: list[dict[str, Any]]
) -> dict[str, Any]:
    """The planner's input: `failed_step` and `error` name the first failure, `failures`
    lists every step that failed with `on_failure: replan` before the planner was asked."""
    plan = request.plan
    return {
        "goal": plan.goal,
        "plan": plan.to_dict(exclude_defaults=True) | {"name": plan.name or ""},
        "failed_step": step_dict(steps[request.failures[0].step_id]),
        "error": error,
        "failures": [
            {"failed_step": step_dict(steps[f.step_id]), "error": f.error} for f in request.failures
        ],
        "completed": dict(request.results),
        "variables": dict(request.variables),
        "history": list(history),
    }


def _check_revision(
    request: ReplanRequest, steps: dict[str, Step], new_raw: list[Any], number: int
) -> tuple[Plan | None, str]:
    """The revised plan (the completed steps, then the new ones) if it validates, else
    (None, the problems in one line)."""
    from planrun.run.revision_check import revised_plan

    kept = [step_dict(steps[sid]) for sid in request.completed]
    label = f"<revision {len(request.revisions) + number}>"
    revised, errors = revised_plan(request.plan, kept + new_raw, label, request.variables)
    if revised is None:
        text = "; ".join(d.message + (f" ({d.hint})" if d.hint else "") for d in errors)
        return None, text or "invalid revision"
    return revised, ""


def plan_diff(plan: Plan, completed: list[str], new_steps: list[Step]) -> dict[str, list[str]]:
    """{removed, added, revised} by step id; revised = same id, different tool or args."""
    done = set(completed)
    old = {s.id: s for s in plan.steps if s.id not in done}
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


def _say(notice: Callable[[str], None] | None, text: str) -> None:
    if notice is not None:
        notice(text)
