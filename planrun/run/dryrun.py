"""`--dry-run`: what would start, in which waves, with which arguments (nothing runs)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from planrun.plan.definition import Plan, Step
from planrun.plan.expressions import Expr, ExpressionError, Unknown, parse_template, to_text
from planrun.plan.fanout import (
    FanOutError,
    bindings,
    combinations,
    elements,
    fan_source,
    fans_out,
    instance_id,
    loop_names,
)
from planrun.plan.graph import PlanGraph, paced_waves
from planrun.run.scope import known_scope, rendered_description, rendered_title
from planrun.run.stepcall import call_template, placed
from planrun.text import counted
from planrun.tools import renderer


def dry_run_document(
    plan: Plan,
    graph: PlanGraph,
    selected: list[str],
    variables: dict[str, Any],
    env: dict[str, str] | None = None,
    unknown: dict[str, str] | None = None,
    known: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dry-run document (docs/reference.md, Documents): start order in waves, resolved args with placeholders.

    `env` is what `env` reads (the process environment over the plan's dotenv values);
    `unknown` names variables with no value yet and the placeholder each reads as (`show`
    without a required param); `known`, result variables whose values are known before the
    run (`resume --dry-run`: those of the kept steps), shown as they are, not as placeholders."""
    keep = set(selected)
    sub = PlanGraph(
        order=[s for s in graph.order if s in keep],
        deps={s: [d for d in graph.deps[s] if d in keep] for s in graph.order if s in keep},
        kinds=graph.kinds,
        titles=graph.titles,
        tools=graph.tools,
    )
    waves = sub.waves()
    known = known or {}
    producers = {
        k: v for k, v in {**placeholders(plan), **(unknown or {})}.items() if k not in known
    }
    scope = known_scope({**variables, **known}, dict(os.environ) if env is None else env)
    entries: dict[str, list[dict[str, Any]]] = {}
    for sid in (sid for wave in waves for sid in wave):
        step = plan.step(sid)
        entry = {
            "id": sid,
            "title": step.title or sid,
            "description": step.description,
            "tool": step.tool,
            "args": step.args,
            "depends_on": sub.deps[sid],
            "when": step.when,
            "approval": plan.needs_approval(step),
            **({"always": True} if step.always else {}),
        }
        entries[sid] = _entries(step, entry, scope, producers)
    limits = {sid: plan.step(sid).max_parallel for sid in entries}
    ids = {sid: [one["id"] for one in ones] for sid, ones in entries.items()}
    out_waves = paced_waves(ids, sub.deps, limits)
    by_id = {one["id"]: one for ones in entries.values() for one in ones}
    steps_out = [by_id[eid] for wave in out_waves for eid in wave]
    return {"plan": plan.name, "waves": out_waves, "steps": steps_out}


def placeholders(plan: Plan) -> dict[str, str]:
    """Result variable -> `<ID result>`, naming the step that binds it first."""
    out: dict[str, str] = {}
    for s in plan.steps:
        if s.result_variable:
            out.setdefault(s.result_variable, f"<{s.id} result>")
    return out


def _entries(
    step: Step, entry: dict[str, Any], scope: dict[str, Any], producers: dict[str, str]
) -> list[dict[str, Any]]:
    """The dry-run entries of a step: itself, or one per foreach or matrix instance (`ID[*]`
    when the list is not known before the run), under the key its step fans out by (a matrix
    instance carries its combination there)."""
    if not fans_out(step):
        args = _preview_args(step, scope, producers)
        return [{**entry, **_texts(step, scope, producers), "args": args}]
    key = fan_source(step)[0]
    names = loop_names(step)
    mine = {k: v for k, v in producers.items() if k not in names}
    items = foreach_preview(step, scope, producers)
    if isinstance(items, str):  # the element reads as the placeholder of the whole list
        unknown = {**mine, **dict.fromkeys(names, items)}
        star = instance_id(step.id, "*")
        args = _preview_args(step, scope, unknown)
        return [
            {
                **entry,
                "id": star,
                **_texts(step, scope, unknown),
                "args": args,
                "instance_of": step.id,
                key: items,
            }
        ]
    if not items:
        return [{**entry, "args": {}, "instance_of": None, key: []}]
    out = []
    for n, item in enumerate(items):
        inner = {**scope, **bindings(step, item, n)}
        iid = instance_id(step.id, n)
        args = _preview_args(step, inner, mine)
        texts = _texts(step, inner, mine)
        one = {**entry, "id": iid, **texts, "args": args, "instance_of": step.id}
        out.append({**one, "matrix": item} if key == "matrix" else one)
    return out


def _texts(step: Step, scope: dict[str, Any], producers: dict[str, str]) -> dict[str, Any]:
    """The step's title and description as the run will render them: a part that reads a
    result (or an element) not known yet leaves the text as written."""
    known = {k: v for k, v in scope.items() if k not in producers}
    title = rendered_title(step, lambda: known)
    return {"title": title, "description": rendered_description(step, lambda: known)}


def foreach_preview(
    step: Step, scope: dict[str, Any], producers: dict[str, str]
) -> list[Any] | str:
    """A foreach step's elements as far as known before the run, else a placeholder such as
    `<foreach over <files result>>` (or `<error: ...>`)."""
    key, source = fan_source(step)
    value = _preview(source, scope, producers)
    # A matrix is known when each of its lists is (one may be a `${...}` reading a result).
    parts = value.values() if key == "matrix" and isinstance(value, dict) else [value]
    for part in parts:
        if isinstance(part, str) and part.startswith("<") and part.endswith(">"):
            return part if part.startswith("<error") else f"<{key} over {part}>"
    try:
        return combinations(value) if key == "matrix" else elements(value)
    except FanOutError as exc:
        return f"<error: {exc}>"


def instances_preview(plan: Plan, variables: dict[str, Any]) -> dict[str, list[str] | str]:
    """Per foreach step: its instance ids when known before the run, else a placeholder."""
    scope = {**variables, "env": dict(os.environ), "steps": {}}
    producers = placeholders(plan)
    out: dict[str, list[str] | str] = {}
    for step in plan.steps:
        if fans_out(step):
            items = foreach_preview(step, scope, producers)
            out[step.id] = (
                items
                if isinstance(items, str)
                else [instance_id(step.id, n) for n in range(len(items))]
            )
    return out


def _preview(value: Any, scope: dict[str, Any], producers: dict[str, str]) -> Any:
    """Resolve what is known now; a value that reads a name in `producers` (a result not
    known yet) becomes that name's placeholder, `<id result>`."""
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
    if tpl is None:  # no `${` in it
        return value
    if tpl.whole is not None:
        return _one(tpl.whole, scope, producers)[0]
    return "".join(
        p if isinstance(p, str) else to_text(_one(p, scope, producers)[0]) for p in tpl.parts
    )


def _one(expr: Expr, scope: dict[str, Any], producers: dict[str, str]) -> tuple[Any, bool]:
    """The value of `expr` and True, or a `<placeholder>` and False when it is not known yet."""
    for name in sorted(expr.names):
        if name in producers:
            return producers[name], False
    if expr.step_refs:
        return f"<{min(expr.step_refs)} result>", False
    try:
        return expr.evaluate(scope), True
    except ExpressionError as exc:
        return f"<error: {exc.message}>", False


def _preview_args(step: Step, scope: dict[str, Any], producers: dict[str, str]) -> Any:
    """The args as they will run: a shell string cmd (or a `run` step's scripts) exactly as the
    shell gets them, with the values they read from the environment (placeholders for values
    not known yet), and the step's `env` and `cwd` where its tool gets them."""
    env = _preview(step.env, scope, producers) if step.env else None
    cwd = _preview(step.cwd, scope, producers) if step.cwd is not None else None
    return placed(step.tool, _tool_args(step, scope, producers), env, cwd)


def _tool_args(step: Step, scope: dict[str, Any], producers: dict[str, str]) -> Any:
    """The tool's own rendering of its arguments, with placeholders for values not known yet;
    an argument that cannot be rendered shows its error."""

    def value(expr: Expr) -> Any:
        found, known = _one(expr, scope, producers)
        return found if known else Unknown(found)

    template = call_template(step)
    try:
        return renderer(step.tool)(template, value)
    except ExpressionError as exc:
        shown = _preview(template, scope, producers)
        if exc.at is not None:
            shown = {**shown, exc.at: f"<error: {exc.message}>"}
        return shown


def mark_resume(doc: dict[str, Any], kept: Mapping[str, Any], reasons: Mapping[str, str]) -> None:
    """`resume --dry-run`: each step says whether the resume keeps it or why it runs again."""
    for entry in doc["steps"]:
        sid = entry.get("instance_of") or entry["id"]
        if sid in kept:
            entry["resume"] = "kept"
        elif sid in reasons:
            entry["resume"] = reasons[sid]


def _counted(entries: list[dict[str, Any]]) -> str:
    """`5 steps`, or `3 steps (4 foreach instances, 2 matrix instances)` when instance entries
    stand for steps."""
    instances = [e for e in entries if e.get("instance_of")]
    steps = len(entries) - len(instances) + len({e["instance_of"] for e in instances})
    text = counted(steps, "step")
    known = [e for e in instances if not e["id"].endswith("[*]")]
    kinds = {
        kind: sum(1 for e in known if ("matrix" in e) == (kind == "matrix"))
        for kind in ("foreach", "matrix")
    }
    shown = [counted(n, f"{kind} instance") for kind, n in kinds.items() if n]
    if shown:
        text += f" ({', '.join(shown)})"
    return text


def render_dry_run(doc: dict[str, Any], explain: bool = False) -> str:
    """Dry-run text: waves in start order, each step with tool, args, dependencies, condition."""
    waves = counted(len(doc["waves"]), "wave")
    lines = [f"plan {doc['plan']}: {_counted(doc['steps'])} in {waves} (dry run)"]
    by_id = {s["id"]: s for s in doc["steps"]}
    for n, wave in enumerate(doc["waves"], 1):
        lines.append(f"wave {n}" + (f" ({len(wave)} in parallel)" if len(wave) > 1 else ""))
        for sid in wave:
            s = by_id[sid]
            head = f"  {'∥' if len(wave) > 1 else '•'} {sid}"
            if s["title"] != sid:
                head += f"  {s['title']}"
            head += f"  [{s['tool']}]"
            if s.get("always"):
                head += "  (always: runs whatever its dependencies come to)"
            if s["approval"]:
                head += "  ⚠ needs approval"
            lines.append(head)
            if s.get("description"):
                lines.append(f"      {s['description']}")
            if s["args"]:
                lines.append(f"      args: {json.dumps(s['args'], ensure_ascii=False)}")
            if s["depends_on"]:
                lines.append(f"      after: {', '.join(s['depends_on'])}")
            if s["when"] is not None:
                lines.append(f"      when: {s['when']}")
            if "resume" in s:
                kept = s["resume"] == "kept"
                lines.append(f"      resume: {'kept' if kept else 'runs again: ' + s['resume']}")
            if "foreach" in s:
                over = s["foreach"] or "an empty list: runs nothing, result []"
                lines.append(f"      foreach: {over}")
            elif isinstance(s.get("matrix"), list | str):  # the step's, not an instance's
                over = s["matrix"] or "no combination left: runs nothing, result []"
                lines.append(f"      matrix: {over}")
            cache = s.get("cache") or {}
            if cache.get("status") == "hit":
                lines.append("      cache: hit")
            elif cache.get("status") == "unknown":
                lines.append(f"      cache: unknown ({cache['reason'].removeprefix('unknown: ')})")
            elif cache.get("status") == "miss" or (cache and explain):
                # off: said (`cache off`) only under --explain or --no-cache
                lines.append(f"      cache: miss ({cache['reason']})")
    return "\n".join(lines) + "\n"
