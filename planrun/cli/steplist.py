"""`planrun list PLAN_FILE`: a plan's steps (id, title, tool, dependencies), like `task --list`."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the graph and validation only when steps are
# listed.
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from planrun.errors import UsageError
from planrun.plan.discovery import find_plan_upwards
from planrun.text import counted

if TYPE_CHECKING:
    from planrun.plan.definition import Plan, Step


@dataclass(frozen=True)
class ListTarget:
    """What `planrun list` lists: the plans in a directory, or the steps of one plan."""

    directory: str = "plans"
    plan: str | None = None


def list_target(target: str | None, cwd: str) -> ListTarget:
    """A directory or plan file as given; without one, ./plans, else the default plan."""
    if target is not None:
        full = os.path.join(cwd, target)
        if os.path.isdir(full):
            return ListTarget(directory=target)
        if os.path.exists(full):
            return ListTarget(plan=target)
        raise UsageError(f"no such plan file or directory: {target}")
    if os.path.isdir(os.path.join(cwd, "plans")):
        return ListTarget(directory="plans")
    found = find_plan_upwards(cwd)  # the default plan, here or in a parent directory
    if found is not None:
        directory, name = found
        return ListTarget(plan=name if directory == cwd else os.path.join(directory, name))
    raise UsageError(
        "nothing to list: no ./plans directory and no planrun.yaml, planrun.yml or planrun.json "
        "here or in a parent directory (give a directory of plans or a plan file)"
    )


@dataclass(frozen=True)
class KnownTexts:
    """A plan's titles and descriptions as the views outside a run show them (`list`,
    `graph`): rendered with what is known before a run, secrets masked."""

    scope: Mapping[str, Any]
    mask: Callable[[Any], Any]

    @classmethod
    def of(
        cls,
        plan: Plan,
        variables: Mapping[str, Any],
        place: Callable[[str], str] | None = None,
    ) -> KnownTexts:
        """The params bound from `variables` (UsageError, exit 2, for a value its param
        refuses, said at its `place` in a vars file; a missing required param is no error
        here) and the plan's variables over them."""
        from planrun.masking import Masker
        from planrun.plan.expressions import Words
        from planrun.plan.params import CLI_ARGS, bind_params
        from planrun.run.scope import plan_scope

        given = {
            CLI_ARGS: Words(),
            **bind_params(plan.params, variables, required=False, env=os.environ, place=place),
        }
        scope = plan_scope(plan, given, dict(os.environ))  # params' defaults known, as in `show`
        return cls(scope, Masker(plan.secrets, scope))

    def title(self, step: Step) -> str:
        from planrun.run.scope import rendered_title

        return str(self.mask(rendered_title(step, lambda: self.scope)))

    def description(self, step: Step) -> str | None:
        from planrun.run.scope import rendered_description

        return self.mask(rendered_description(step, lambda: self.scope))


def step_rows(
    plan_path: str,
    variables: Mapping[str, Any] | None = None,
    every: bool = False,
    place: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """{plan, file, title, steps: [{id, title, description, tool, depends_on, aliases?,
    internal?, always?}]} of a valid plan (PlanInvalid if not).

    `depends_on` holds the effective dependencies: explicit and data-flow (an internal step
    among them too). `variables`: those given on the command line, which the plan's
    expressions (and titles) may read. Titles and descriptions are rendered with what is known
    before a run; the others stay as written. Secrets are masked. `every`: internal steps too
    (`list --all`); `place`: where a --vars-file value is written, for an error about it.
    """
    from planrun.plan.graph import PlanGraph
    from planrun.plan.params import param_rows
    from planrun.plan.validate import default_name, load_plan

    plan = load_plan(plan_path, variables)
    graph = PlanGraph.build(plan.steps)
    texts = KnownTexts.of(plan, variables or {}, place)
    doc: dict[str, Any] = {
        "plan": plan.name or default_name(plan_path),
        "file": plan_path,
        "title": plan.title,
        "steps": [
            {
                "id": sid,
                "title": texts.title(plan.step(sid)),
                "description": texts.description(plan.step(sid)),
                "tool": graph.tools[sid],
                "depends_on": list(graph.deps[sid]),
                **({"aliases": list(aliases)} if (aliases := plan.step(sid).aliases) else {}),
                **({"internal": True} if plan.step(sid).internal else {}),
                **({"always": True} if plan.step(sid).always else {}),
            }
            for sid in graph.order
            if every or not plan.step(sid).internal
        ],
    }
    if plan.params:  # a plan without params lists as it always did
        doc["params"] = param_rows(plan.params)
    return doc


def render_steps(doc: dict[str, Any]) -> str:
    """One aligned line per step: id, title, [tool], `after: deps`; its description under it."""
    steps = doc["steps"]
    head = f"{doc['plan']}" + (f" — {doc['title']}" if doc.get("title") else "")
    lines = [f"{head} ({counted(len(steps), 'step')}, {doc['file']})"]
    id_w = max((len(s["id"]) for s in steps), default=0)
    title_w = min(48, max((len(s["title"]) for s in steps if s["title"] != s["id"]), default=0))
    for s in steps:
        title = s["title"] if s["title"] != s["id"] else ""
        line = f"  {s['id']:<{id_w}}  {title:<{title_w}}  [{s['tool']}]"
        if s["depends_on"]:
            line += f"  after: {', '.join(s['depends_on'])}"
        if s.get("aliases"):
            line += f"  aliases: {', '.join(s['aliases'])}"
        if s.get("internal"):
            line += "  (internal)"
        if s.get("always"):
            line += "  (always)"
        lines.append(line.rstrip())
        if s.get("description"):
            lines.extend(f"  {' ' * id_w}  {part}" for part in s["description"].splitlines())
    from planrun.plan.params import render_params

    lines.extend(render_params(doc.get("params") or {}))
    return "\n".join(lines) + "\n"
