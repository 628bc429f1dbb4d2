"""The question a step that needs approval asks at the terminal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planrun.plan.definition import Step
from planrun.plan.expressions import ExpressionError, resolve, to_text
from planrun.run.scope import rendered_title
from planrun.tools import tool_spec


def approval_question(
    sid: str,
    step: Step,
    args: Mapping[str, Any],
    scope: Callable[[], Mapping[str, Any]],
    mask: Callable[[Any], Any] | None,
) -> str:
    """`approval: "TEXT"`: TEXT rendered with the variables (as written when it cannot be).
    Otherwise the step's id and rendered title and, for a shell step, its command (a `run`
    step's script, or each of its scripts). Secrets
    masked: the question goes to the terminal, and from there into logs and recordings."""
    shown: Callable[[Any], Any] = mask if mask is not None else (lambda v: v)
    if isinstance(step.approval, str):
        try:
            text = to_text(resolve(step.approval, scope(), path=("approval",)))
        except ExpressionError:
            text = step.approval
        return str(shown(text))
    title = rendered_title(step, scope)
    head = f"step '{sid}'" + (f" ({shown(title)})" if title != step.id else "")
    lines = [f"{head} needs approval"]
    spec = tool_spec(step.tool)
    for name in spec.commands if spec is not None else ():
        command = args.get(name)  # a script, or a `run` step's list of scripts
        for script in command if isinstance(command, list) else [command]:
            if isinstance(script, str):
                lines += [f"  $ {line}" for line in str(shown(script)).splitlines()]
    return "\n".join([*lines, "Run it?"])
