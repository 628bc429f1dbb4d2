"""`planrun show [PLAN] ID`: one step in full (title, description, tool, resolved arguments,
dependencies, sources, outputs, cache status, approval, condition), as the dry run sees it."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the run path's preparation and the cache
# preview only when a step is shown.
import json
from typing import Any

from planrun.errors import UsageError
from planrun.plan.discovery import Found, plan_or_found
from planrun.plan.fanout import fans_out


def show_target(words: tuple[str, ...]) -> tuple[Found, str]:
    """(plan, step id) from `[PLAN] ID`: without PLAN, the default plan, found here or above
    (its directory becomes the working directory, as for `run`)."""
    if len(words) == 2:
        return plan_or_found(words[0]), words[1]
    if len(words) == 1:
        return plan_or_found(None), words[0]
    raise UsageError("show takes [PLAN] ID: the id of one step (see 'planrun list')")


def show_document(
    plan_path: str, step_id: str, variables: dict[str, Any], vars_file: str | None, cwd: str
) -> dict[str, Any]:
    """{plan, id, title, description, tool, args, depends_on, sources, outputs, always, cache,
    approval, when[, instances]}: the step's dry-run entry with what the plan says of it, secrets masked.

    An unknown id is a UsageError with a did-you-mean hint; a value not known before the run
    stays a placeholder (`<id result>`), a text that cannot be rendered yet as written.
    """
    from planrun.cache.wiring import preview_dry_run
    from planrun.masking import mask_keeping_names
    from planrun.run.context import root_context
    from planrun.run.dryrun import dry_run_document
    from planrun.run.request import RunRequest
    from planrun.run.runner import prepare

    req = RunRequest(
        plan_path,
        variables=variables,
        vars_file=vars_file,
        only=[step_id],
        dry_run=True,
        cwd=cwd,
        params_required=False,  # SPEC 13: no error for `show`; what reads one stays as written
        internal_targets=True,  # an internal step is no target, but `show` runs nothing
    )
    prep = prepare(root_context(req))  # the plan checked; an unknown id named, with a hint
    step_id = (prep.targets or [step_id])[0]  # an alias shows the step under its id
    unset = {n: f"<--var {n}>" for n in prep.plan.params if n not in prep.variables}
    doc = dry_run_document(
        prep.plan, prep.graph, prep.selected, prep.variables, prep.environment(), unset
    )
    preview_dry_run(req.cache_request, req.cwd, prep, doc)
    entries = [e for e in doc["steps"] if step_id in (e["id"], e.get("instance_of"))]
    step = prep.plan.step(step_id)
    scope = _known(prep)
    shown = {
        "plan": prep.plan.name,
        "id": step_id,
        **_own_entry(step, entries, scope),
        "sources": list(step.sources or []),
        "outputs": list(step.outputs or []),
        "always": bool(step.always),
    }
    _render_patterns(shown, step, scope)
    if fans_out(step):
        shown["instances"] = [
            {k: e.get(k) for k in ("id", "title", "description", "args", "cache")} for e in entries
        ]
    return mask_keeping_names(prep.masker(prep.variables), shown)


def _known(prep: Any) -> dict[str, Any]:
    """What the step's texts and paths may read before the run: no result variable yet."""
    from planrun.run.scope import known_scope

    bound = {s.result_variable for s in prep.plan.steps if s.result_variable}
    variables = {k: v for k, v in prep.variables.items() if k not in bound}
    return known_scope(variables, prep.environment())


def _own_entry(step: Any, entries: list[dict[str, Any]], scope: dict[str, Any]) -> dict[str, Any]:
    """The step's own fields: its dry-run entry, or for a foreach or matrix step its fields as written
    with the title and description rendered, a placeholder where they read the element."""
    keys = ("title", "description", "tool", "args", "depends_on", "cache", "approval", "when")
    if not fans_out(step):
        return {k: entries[0].get(k) for k in keys}
    from planrun.run.scope import rendered_description, rendered_title
    from planrun.run.stepcall import call_template

    first = entries[0] if entries else {}
    return {
        # no element bound: what reads it is shown as a placeholder, `<matrix.py>`
        "title": rendered_title(step, lambda: scope),
        "description": rendered_description(step, lambda: scope),
        "tool": step.tool,
        "args": call_template(step),  # as written (a `run` step's script under `run`)
        "depends_on": first.get("depends_on", []),
        "cache": None,  # per instance
        "approval": first.get("approval", False),
        "when": step.when,
        **({"foreach": step.foreach} if step.matrix is None else {"matrix": step.matrix}),
    }


def _render_patterns(shown: dict[str, Any], step: Any, scope: dict[str, Any]) -> None:
    """`sources` and `outputs` with their `${...}` rendered, as written when they cannot be."""
    from planrun.plan.expressions import ExpressionError
    from planrun.run.scope import with_patterns

    try:
        rendered = with_patterns(step, scope)
    except ExpressionError:
        return
    shown["sources"], shown["outputs"] = list(rendered.sources or []), list(rendered.outputs or [])


def render_show(doc: dict[str, Any]) -> str:
    """The step as text: `ID — title`, its description, then one labelled line per field."""
    from planrun.reporters.termsafe import terminal_safe

    head = doc["id"] if doc["title"] == doc["id"] else f"{doc['id']} — {doc['title']}"
    lines = [head]
    lines += [f"  {line}" for line in (doc.get("description") or "").splitlines()]
    fields: list[tuple[str, Any]] = [
        ("tool", doc["tool"]),
        ("args", json.dumps(doc["args"], ensure_ascii=False) if doc["args"] else None),
        ("after", ", ".join(doc["depends_on"])),
        ("foreach", _text(doc.get("foreach"))),
        ("matrix", _text(doc.get("matrix"))),
        ("sources", ", ".join(doc["sources"])),
        ("outputs", ", ".join(doc["outputs"])),
        ("cache", _cache(doc.get("cache"))),
        ("approval", "needed" if doc["approval"] else None),
        ("always", "runs whatever its dependencies come to" if doc.get("always") else None),
        ("when", _text(doc["when"])),
    ]
    lines += [f"  {label + ':':<10}{value}" for label, value in fields if value]
    for inst in doc.get("instances") or []:
        lines.append(f"  {inst['id']}" + (f"  {inst['title']}" if inst["title"] else ""))
        if inst.get("args"):
            lines.append(f"      args: {json.dumps(inst['args'], ensure_ascii=False)}")
        if _cache(inst.get("cache")):
            lines.append(f"      cache: {_cache(inst.get('cache'))}")
    return terminal_safe("\n".join(lines)) + "\n"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _cache(cache: Any) -> str | None:
    """`hit`, `off`, or `miss (reason)`."""
    if not isinstance(cache, dict) or not cache.get("status"):
        return None
    status, reason = cache["status"], cache.get("reason")
    return f"{status} ({reason})" if status == "miss" and reason else str(status)
