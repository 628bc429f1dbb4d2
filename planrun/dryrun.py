"""`--dry-run`: what would start, in which waves, with which arguments (nothing runs)."""

from __future__ import annotations

import json
import os
from typing import Any

from planrun.expressions import Expr, ExpressionError, parse_template, shell_args, to_text
from planrun.graph import PlanGraph
from planrun.model import Plan


def dry_run_document(
    plan: Plan,
    graph: PlanGraph,
    selected: list[str],
    variables: dict[str, Any],
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The SPEC §8 dry-run document: start order in waves, resolved args with placeholders.

    `env` is what `env` reads (the process environment over the plan's dotenv values)."""
    keep = set(selected)
    sub = PlanGraph(
        order=[s for s in graph.order if s in keep],
        deps={s: [d for d in graph.deps[s] if d in keep] for s in graph.order if s in keep},
        kinds=graph.kinds,
        titles=graph.titles,
        tools=graph.tools,
    )
    waves = sub.waves()
    producers: dict[str, str] = {}
    for s in plan.steps:
        if s.result_variable:
            producers.setdefault(s.result_variable, s.id)
    scope = {**variables, "env": dict(os.environ) if env is None else env, "steps": {}}
    steps_out = []
    for wave in waves:
        for sid in wave:
            step = plan.step(sid)
            steps_out.append(
                {
                    "id": sid,
                    "title": _preview(step.title or sid, scope, producers),
                    "tool": step.tool,
                    "args": _preview_args(step.tool, step.args, scope, producers),
                    "depends_on": sub.deps[sid],
                    "when": step.when,
                    "approval": plan.needs_approval(step),
                }
            )
    return {"plan": plan.name, "waves": waves, "steps": steps_out}


def _preview(value: Any, scope: dict[str, Any], producers: dict[str, str]) -> Any:
    """Resolve what is known now; a value that needs a step's result becomes `<id result>`."""
    if isinstance(value, dict):
        return {k: _preview(v, scope, producers) for k, v in value.items()}
    if isinstance(value, list):
        return [_preview(v, scope, producers) for v in value]
    if not isinstance(value, str):
        return value
    try:
        tpl = parse_template(value)
    except ExpressionError as exc:
        return f"<error: {exc.message}>"
    if tpl is None:
        return value.replace("$${", "${")

    if tpl.whole is not None:
        return _one(tpl.whole, scope, producers)[0]
    return "".join(
        p if isinstance(p, str) else to_text(_one(p, scope, producers)[0]) for p in tpl.parts
    )


def _one(expr: Expr, scope: dict[str, Any], producers: dict[str, str]) -> tuple[Any, bool]:
    """The value of `expr` and True, or a `<placeholder>` and False when it is not known yet."""
    for name in sorted(expr.names):
        if name in producers:
            return f"<{producers[name]} result>", False
    if expr.step_refs:
        return f"<{sorted(expr.step_refs)[0]} result>", False
    try:
        return expr.evaluate(scope), True
    except ExpressionError as exc:
        return f"<error: {exc.message}>", False


def _preview_args(
    tool: str, args: dict[str, Any], scope: dict[str, Any], producers: dict[str, str]
) -> Any:
    """The args as they will run: a shell string cmd exactly as the shell gets it, with the
    values it reads from the environment (placeholders for values not known yet)."""
    cmd = args.get("cmd") if tool == "shell" else None
    try:
        tpl = parse_template(cmd) if isinstance(cmd, str) else None
    except ExpressionError:
        tpl = None
    if tpl is None or tpl.whole is not None:
        return _preview(args, scope, producers)
    rest = _preview({k: v for k, v in args.items() if k != "cmd"}, scope, producers)
    texts: list[str] = []
    unknown: set[int] = set()
    for n, expr in enumerate(tpl.exprs):
        value, known = _one(expr, scope, producers)
        texts.append(to_text(value))
        if not known:
            unknown.add(n)
    try:
        return shell_args(tpl, texts, rest, frozenset(unknown))
    except ExpressionError as exc:
        return {**rest, "cmd": f"<error: {exc.message}>"}


def render_dry_run(doc: dict[str, Any], explain: bool = False) -> str:
    """Dry-run text: waves in start order, each step with tool, args, dependencies, condition."""
    lines = [
        f"plan {doc['plan']}: {len(doc['steps'])} steps in {len(doc['waves'])} waves (dry run)"
    ]
    by_id = {s["id"]: s for s in doc["steps"]}
    for n, wave in enumerate(doc["waves"], 1):
        lines.append(f"wave {n}" + (f" ({len(wave)} in parallel)" if len(wave) > 1 else ""))
        for sid in wave:
            s = by_id[sid]
            head = f"  {'∥' if len(wave) > 1 else '•'} {sid}"
            if s["title"] != sid:
                head += f"  {s['title']}"
            head += f"  [{s['tool']}]"
            if s["approval"]:
                head += "  ⚠ needs approval"
            lines.append(head)
            if s["args"]:
                lines.append(f"      args: {json.dumps(s['args'], ensure_ascii=False)}")
            if s["depends_on"]:
                lines.append(f"      after: {', '.join(s['depends_on'])}")
            if s["when"] is not None:
                lines.append(f"      when: {s['when']}")
            cache = s.get("cache") or {}
            if cache.get("status") == "hit":
                lines.append("      cache: hit")
            elif cache.get("status") == "miss":
                lines.append(f"      cache: miss ({cache['reason']})")
            elif cache and explain:
                lines.append("      cache: off")
    return "\n".join(lines) + "\n"
