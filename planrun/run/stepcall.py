"""The tool call a step makes: a `run` step's scripts as the shell tool's arguments, and a
step's `env` and `cwd` (SPEC 13) put where its tool reads them.

- `run` is `tool: shell`; its arguments are `{run: SCRIPT or [SCRIPTS]}` (the shell tool runs
  them: planrun.tools.shell).
- The plan's `env` is folded into each step's own `env` when the plan is loaded (fold_plan_env),
  so a step carries its whole environment: plan `env` < step `env` < a shell step's `args.env`.
- `cwd` is where a run or shell step runs (a shell step's `args.cwd` wins) and where a plan
  step's sub-plan runs. A step's `sources` and `outputs` are relative to that directory: they
  are rewritten relative to the working directory (under_cwd), so the cache keeps every path
  relative to the working directory, as before.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from planrun.plan.definition import Step, replace
from planrun.plan.expressions import resolve, resolve_args, to_text

ENV_TOOLS = frozenset({"shell", "python"})
"""The tools that get a step's `env` (in `args.env`; a python step's is set in `os.environ`
while its function runs, planrun.tools.environ)."""
CWD_TOOLS = frozenset({"shell", "plan"})
"""The tools that get a step's `cwd` (in `args.cwd`)."""


def call_template(step: Step) -> dict[str, Any]:
    """The step's arguments as written, before `${...}` are resolved: a `run` step's scripts
    under `run`."""
    return {"run": step.run} if step.run is not None else step.args


def call_args(step: Step, scope: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the step's tool gets: its args resolved (values in shell scripts quoted
    by context), with its `env` and `cwd`. ExpressionError when they cannot be resolved now."""
    args = resolve_args(step.tool, call_template(step), scope)
    env = resolve(step.env, scope, path=("env",)) if step.env else None
    cwd = to_text(resolve(step.cwd, scope, path=("cwd",))) if step.cwd is not None else None
    return placed(step.tool, args, env, cwd)


def placed(tool: str, args: dict[str, Any], env: Any, cwd: Any) -> dict[str, Any]:
    """`args` with the step's (resolved) `env` under its own `env` and its `cwd` unless it
    has one, for the tools that read them."""
    if env and tool in ENV_TOOLS:
        own = args.get("env")
        if own is None or isinstance(own, dict):
            args = {**args, "env": {**env, **(own or {})}}
    if cwd is not None and tool in CWD_TOOLS and args.get("cwd") is None:
        args = {**args, "cwd": cwd}
    return args


def step_place(step: Step, scope: Mapping[str, Any]) -> str | None:
    """The directory the step's `sources` and `outputs` are relative to (rendered): a shell
    step's `args.cwd`, else its `cwd`; None for the working directory."""
    place: Any = step.cwd
    if step.tool == "shell" and isinstance(step.args, dict) and step.args.get("cwd") is not None:
        place = step.args["cwd"]
        where: tuple[str | int, ...] = ("args", "cwd")
    else:
        where = ("cwd",)
    if place is None:
        return None
    return to_text(resolve(place, scope, path=where))


def under(place: str, pattern: str) -> str:
    """`pattern` (relative to `place`) as a pattern relative to the working directory; `!`
    stays in front."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    while body.startswith("./"):
        body = body[2:]
    joined = posixpath.normpath(posixpath.join(place, body)) if body else place
    return ("!" if negated else "") + joined


def fold_plan_env(steps: list[Step], env: Mapping[str, str]) -> list[Step]:
    """Each step with the plan's `env` under its own (the same steps when there is none;
    folding again changes nothing)."""
    if not env:
        return steps
    return [replace(s, env={**env, **(s.env or {})}) for s in steps]


__all__ = [
    "CWD_TOOLS",
    "ENV_TOOLS",
    "call_args",
    "call_template",
    "fold_plan_env",
    "placed",
    "step_place",
    "under",
]
