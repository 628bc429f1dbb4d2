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
from planrun.plan.expressions import Evaluate, evaluator, render_value, resolve, to_text
from planrun.tools import renderer, tool_spec


def call_template(step: Step) -> dict[str, Any]:
    """The step's arguments as written, before `${...}` are resolved: a `run` step's scripts
    under `run`."""
    return {"run": step.run} if step.run is not None else step.args


def call_args(step: Step, scope: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the step's tool gets: its args rendered by the tool (values in shell
    scripts quoted by context), with its `env` and `cwd`. ExpressionError when they cannot be
    resolved now."""
    return rendered_call(step, evaluator(scope))


def rendered_call(step: Step, evaluate: Evaluate) -> dict[str, Any]:
    """`call_args`, each expression's value given by `evaluate`."""
    args = renderer(step.tool)(call_template(step), evaluate)
    env = render_value(step.env, evaluate, ("env",), keys=True) if step.env else None
    cwd = to_text(render_value(step.cwd, evaluate, ("cwd",))) if step.cwd is not None else None
    return placed(step.tool, args, env, cwd)


def placed(tool: str, args: dict[str, Any], env: Any, cwd: Any) -> dict[str, Any]:
    """`args` with the step's (resolved) `env` under its own `env` and its `cwd` unless it
    has one, for the tools that take them (planrun.tools.base.ToolSpec)."""
    if env is None and cwd is None:
        return args
    spec = tool_spec(tool)
    if env and spec is not None and spec.step_env:
        own = args.get("env")
        if own is None or isinstance(own, dict):
            args = {**args, "env": {**env, **(own or {})}}
    if cwd is not None and spec is not None and spec.step_cwd and args.get("cwd") is None:
        args = {**args, "cwd": cwd}
    return args


def step_place(step: Step, scope: Mapping[str, Any]) -> str | None:
    """The directory the step's `sources` and `outputs` are relative to (rendered): a shell
    step's `args.cwd`, else its `cwd`; None for the working directory."""
    place: Any = step.cwd
    spec = tool_spec(step.tool)
    takes_cwd = spec is not None and spec.step_cwd and isinstance(step.args, dict)
    own = step.args.get("cwd") if takes_cwd else None
    if own is not None:
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
    """Each step whose tool gets an environment with the plan's `env` under its own (the same
    steps when there is none; folding again changes nothing). Other steps are left as written,
    so a step handed back by a planner is still valid (a step `env` there is an error)."""
    if not env:
        return steps
    return [replace(s, env={**env, **(s.env or {})}) if _gets_env(s) else s for s in steps]


def _gets_env(step: Step) -> bool:
    spec = tool_spec(step.tool)
    return spec is not None and spec.step_env


__all__ = [
    "call_args",
    "call_template",
    "fold_plan_env",
    "placed",
    "rendered_call",
    "step_place",
    "under",
]
