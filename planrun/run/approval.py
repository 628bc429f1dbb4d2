"""The question a step that needs approval asks at the terminal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from planrun.plan.definition import Step
from planrun.plan.expressions import ExpressionError, resolve, to_text
from planrun.run.scope import rendered_title

SHELL_TOOLS = ("shell",)


def approval_question(
    sid: str,
    step: Step,
    args: Mapping[str, Any],
    scope: Callable[[], Mapping[str, Any]],
    mask: Callable[[Any], Any] | None,
) -> str:
    """`approval: "TEXT"`: TEXT rendered with the variables (as written when it cannot be).
    Otherwise the step's id and rendered title and, for a shell step, its command. Secrets
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
    command = args.get("cmd") if step.tool in SHELL_TOOLS else None
    if isinstance(command, str):
        lines += [f"  $ {line}" for line in str(shown(command)).splitlines()]
    return "\n".join([*lines, "Run it?"])
