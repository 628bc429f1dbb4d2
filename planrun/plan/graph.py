"""The step graph: effective dependencies (depends_on ∪ data flow), cycles, waves and renderings."""

from __future__ import annotations

import graphlib
import heapq
import itertools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from planrun.plan.definition import Step
from planrun.plan.expressions import Expr, ExpressionError, parse_template, template_strings
from planrun.status import Status
from planrun.text import counted


def when_source(when: str) -> str:
    """The `${...}` form of a `when`: a string without `${` is one bare expression.

    Whitespace around the condition (a YAML block scalar's line break) is no part of it.
    (Here, where the graph and the scope read it: planrun.plan.conditions reads fan-outs, which
    read the scope, so the graph importing it would be an import cycle.)
    """
    text = when.strip()
    return text if "${" in text else "${" + text + "}"


def step_strings(step: Step) -> Iterable[tuple[tuple[str | int, ...], str]]:
    """(path, text) for every `${...}` string a step holds: foreach, args, run, env, cwd, when,
    title, description, approval, sources, outputs."""
    when = when_source(step.when) if isinstance(step.when, str) else None
    approval = step.approval if isinstance(step.approval, str) else None  # the question asked
    for key, value in (
        ("foreach", step.foreach),
        ("matrix", step.matrix),
        ("args", step.args),
        ("run", step.run),
        ("env", step.env),
        ("cwd", step.cwd),
        ("when", when),
        ("title", step.title),
        ("description", step.description),
        ("approval", approval),
        ("sources", step.sources),
        ("outputs", step.outputs),
    ):
        if value:  # an empty value holds no `${...}`
            # `args` and `env` are the call's: their keys are rendered too (render_value).
            yield from template_strings(value, (key,), keys=key in ("args", "env"))


def step_expressions(step: Step) -> Iterable[tuple[tuple[str | int, ...], Expr]]:
    """(path, expression) for every `${...}` of a step; a string that does not parse is
    skipped (validation reports it)."""
    for path, text in step_strings(step):
        try:
            tpl = parse_template(text)
        except ExpressionError:
            continue
        for expr in tpl.exprs if tpl is not None else ():
            yield path, expr


class PlanGraph:
    """Steps in file order with their effective dependencies (in file order)."""

    __slots__ = ("order", "deps", "kinds", "titles", "tools", "instances", "matrices")

    def __init__(
        self,
        order: list[str],
        deps: dict[str, list[str]],
        kinds: dict[tuple[str, str], str] | None = None,
        titles: dict[str, str] | None = None,
        tools: dict[str, str] | None = None,
        instances: dict[str, list[str] | str] | None = None,
        matrices: frozenset[str] = frozenset(),
    ) -> None:
        self.order = order
        self.deps = deps
        self.kinds = {} if kinds is None else kinds  # (from, to) -> explicit|data
        self.titles = {} if titles is None else titles
        self.tools = {} if tools is None else tools
        # foreach steps: instance ids when known, else a placeholder (`<foreach over <a result>>`)
        self.instances = {} if instances is None else instances
        self.matrices = matrices  # the ids of matrix steps (the others with instances: foreach)

    def fan_key(self, sid: str) -> str:
        """How the step fans out, in its views' words: `matrix` or `foreach`."""
        return "matrix" if sid in self.matrices else "foreach"

    def foreach_note(self, sid: str) -> str | None:
        """`foreach: 3 instances` / `foreach over <a result>` for a foreach step (`matrix: ...`
        for a matrix step), else None."""
        found = self.instances.get(sid)
        if found is None:
            return None
        key = self.fan_key(sid)
        if isinstance(found, str):
            return found[1:-1] if found.startswith(f"<{key} over") else f"{key}: {found}"
        return f"{key}: {counted(len(found), 'instance')}"

    @classmethod
    def build(cls, steps: list[Step]) -> PlanGraph:
        """Graph of `steps`; unknown ids in depends_on and bad expressions are left to validation.

        A run builds it once, when it prepares the plan, and hands it to the scheduler."""
        order = [s.id for s in steps]
        known = set(order)
        binders: dict[str, list[str]] = {}
        for s in steps:
            if s.result_variable:
                binders.setdefault(s.result_variable, []).append(s.id)
        position = {sid: i for i, sid in enumerate(order)}
        deps: dict[str, list[str]] = {}
        kinds: dict[tuple[str, str], str] = {}
        for s in steps:
            mine: dict[str, None] = {}
            for d in s.depends_on:
                if d in known and d != s.id and d not in mine:
                    mine[d] = None
                    kinds[(d, s.id)] = "explicit"
            for _, ref in data_sources(s, binders, known):
                if ref != s.id and ref not in mine:
                    mine[ref] = None
                    kinds[(ref, s.id)] = "data"
            deps[s.id] = sorted(mine, key=position.__getitem__)
        return cls(
            order=order,
            deps=deps,
            kinds=kinds,
            titles={s.id: s.title or s.id for s in steps},
            tools={s.id: s.tool for s in steps},
            matrices=frozenset(s.id for s in steps if s.matrix is not None),
        )

    def copy(self) -> PlanGraph:
        """A copy whose lists and dicts can be changed without touching this one."""
        return PlanGraph(
            order=list(self.order),
            deps={sid: list(d) for sid, d in self.deps.items()},
            kinds=dict(self.kinds),
            titles=dict(self.titles),
            tools=dict(self.tools),
            instances={k: list(v) if isinstance(v, list) else v for k, v in self.instances.items()},
            matrices=self.matrices,
        )

    def find_cycle(self) -> list[str] | None:
        """A cycle as [a, b, ..., a] where each step depends on the next, or None."""
        try:
            graphlib.TopologicalSorter(self.deps).prepare()
        except graphlib.CycleError as exc:
            cycle = list(reversed(exc.args[1]))[:-1]  # graphlib lists it in run order
            position = {sid: i for i, sid in enumerate(self.order)}
            start = min(range(len(cycle)), key=lambda i: position.get(cycle[i], 0))
            cycle = cycle[start:] + cycle[:start]
            return [*cycle, cycle[0]]
        return None

    def waves(self) -> list[list[str]]:
        """Groups that could start together if every step took the same time (file order inside)."""
        level: dict[str, int] = {}
        for sid in self.topo_order():
            level[sid] = 1 + max((level[d] for d in self.deps[sid]), default=-1)
        out: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
        for sid in self.order:
            out[level[sid]].append(sid)
        return out

    def topo_order(self) -> list[str]:
        """A start order: ready steps in file order, each after all its dependencies."""
        position = {sid: i for i, sid in enumerate(self.order)}
        ts = graphlib.TopologicalSorter(self.deps)
        ts.prepare()
        out: list[str] = []

        heap: list[tuple[int, str]] = []
        while ts.is_active():
            for sid in ts.get_ready():
                heapq.heappush(heap, (position[sid], sid))
            _, sid = heapq.heappop(heap)
            out.append(sid)
            ts.done(sid)
        return out

    def upstream(self, targets: Iterable[str]) -> set[str]:
        """`targets` and everything they depend on, transitively."""
        seen: set[str] = set()
        stack = list(targets)
        while stack:
            sid = stack.pop()
            if sid not in seen:
                seen.add(sid)
                stack.extend(self.deps.get(sid, ()))
        return seen

    def edges(self) -> list[dict[str, str]]:
        return [
            {"from": d, "to": sid, "kind": self.kinds.get((d, sid), "explicit")}
            for sid in self.order
            for d in self.deps[sid]
        ]


def paced_waves(
    entries: Mapping[str, list[str]],
    deps: Mapping[str, list[str]],
    limits: Mapping[str, int | None],
) -> list[list[str]]:
    """The waves of a run whose entries all take the same time: each wave starts every entry
    (a step's id, or its instances' ids) whose step's dependencies are done (in the order of
    `entries`: start order), at most a step's `max_parallel` (`limits`) of its instances; a
    step is done after its last entry. The dry run's waves, and `graph`'s. Each wave looks
    only at the steps ready for it (a 2,000-step chain: linear, not quadratic)."""
    order = {sid: i for i, sid in enumerate(entries)}
    left = {sid: list(ids) for sid, ids in entries.items()}
    waiting = {sid: len(set(deps.get(sid, ()))) for sid in entries}
    dependents: dict[str, list[str]] = {}
    for sid in entries:
        for dep in set(deps.get(sid, ())):
            dependents.setdefault(dep, []).append(sid)
    ready = [sid for sid in entries if not waiting[sid]]
    out: list[list[str]] = []
    unfinished = len(entries)
    while unfinished:
        if not ready:  # a dependency outside `entries`: as the graph's waves, never stuck
            out.append([eid for ids in left.values() for eid in ids])
            break
        wave: list[str] = []
        going: list[str] = []
        newly: list[str] = []
        for sid in ready:
            ids = left[sid]
            n = limits.get(sid) or len(ids)
            wave.extend(ids[:n])
            left[sid] = ids[n:]
            if left[sid]:
                going.append(sid)
                continue
            unfinished -= 1
            for later in dependents.get(sid, ()):
                waiting[later] -= 1
                if not waiting[later]:
                    newly.append(later)
        if wave:
            out.append(wave)
        ready = sorted(going + newly, key=order.__getitem__) if newly else going
    return out


def data_sources(
    step: Step, binders: dict[str, list[str]], known: set[str]
) -> Iterable[tuple[str, str]]:
    """(name, producing step) for every result variable or `steps.X` the step reads."""
    # A foreach step's element and index names hide variables of the same name in its args,
    # when and title (not in `foreach` itself, which is read before there is an element).
    hidden = (
        frozenset(("matrix" if step.matrix is not None else step.as_ or "item", "index"))
        if step.foreach is not None or step.matrix is not None
        else frozenset()
    )
    for path, expr in step_expressions(step):
        for name in expr.names:
            if path[0] not in ("foreach", "matrix") and name in hidden:
                continue
            for producer in binders.get(name, ()):
                yield name, producer
        for ref in expr.step_refs:
            if ref in known:
                yield f"steps.{ref}", ref


# ---- renderings -------------------------------------------------------------------------


def render_json(
    plan_name: str, graph: PlanGraph, always: frozenset[str] = frozenset()
) -> dict[str, Any]:
    return {
        "plan": plan_name,
        "nodes": [
            {**_node(graph, s), **({"always": True} if s in always else {})} for s in graph.order
        ],
        "edges": graph.edges(),
        "waves": graph.waves(),
    }


def _node(graph: PlanGraph, sid: str) -> dict[str, Any]:
    node: dict[str, Any] = {"id": sid, "title": graph.titles[sid], "tool": graph.tools[sid]}
    found = graph.instances.get(sid)
    if isinstance(found, list):
        node["instances"] = found
    elif found is not None:
        node["instances"] = [f"{sid}[*]"]
        node[graph.fan_key(sid)] = found
    return node


def render_mermaid(graph: PlanGraph) -> str:
    """A Mermaid flowchart; node ids are step ids (quoted ones get a safe alias)."""
    lines = ["flowchart TD"]
    alias = _mermaid_ids(graph.order)
    for sid in graph.order:
        label = f"{sid}: {graph.titles[sid]}" if graph.titles[sid] != sid else sid
        label = _mermaid_text(label)
        note = graph.foreach_note(sid)
        if note:
            label += "<br/>" + _mermaid_text(note)
        lines.append(f'    {alias[sid]}["{label}<br/>[{_mermaid_text(graph.tools[sid])}]"]')
    for e in graph.edges():
        arrow = "-->" if e["kind"] == "explicit" else "-.->|data|"
        lines.append(f"    {alias[e['from']]} {arrow} {alias[e['to']]}")
    return "\n".join(lines) + "\n"


# Label characters Mermaid would read as syntax, HTML or markdown, as its entity codes
# (`#name;` or `#decimal;`); one pass, so the `#` and `;` of a code are not escaped again.
_MERMAID_ENTITIES = str.maketrans(
    {
        "#": "#35;",
        ";": "#59;",
        '"': "#quot;",
        "<": "#lt;",
        ">": "#gt;",
        "&": "#amp;",
        "`": "#96;",
        "\n": " ",
        "\r": " ",
    }
)


def _mermaid_text(text: str) -> str:
    return text.translate(_MERMAID_ENTITIES)


# Words Mermaid's flowchart lexer takes as keywords when they start a node id (checked
# against mermaid 11): `end`, `end.x` and `graph-x` break a diagram, `End` and `endx` do not.
MERMAID_KEYWORDS = frozenset(
    [
        "end",
        "graph",
        "flowchart",
        "subgraph",
        "style",
        "class",
        "classDef",
        "linkStyle",
        "click",
        "call",
        "href",
        "interpolate",
        "_blank",
        "_self",
        "_parent",
        "_top",
    ]
)
_MERMAID_SAFE_ID = (
    r"^[A-Za-z0-9_]+(?:[.-][A-Za-z0-9_]+)*$"  # compiled on first use (re's cache), not at import
)


def _entries(graph: PlanGraph, sid: str, statuses: dict[str, str]) -> list[str]:
    """What a step starts as: its instances when they are known (those of the last run when it
    has them), else the step itself (also a fan-out whose list is not known, or is empty)."""
    found = graph.instances.get(sid)
    ran = [i for i in statuses if i.startswith(f"{sid}[")] if found is not None else []
    ids = ran or found
    return list(ids) if isinstance(ids, list) and ids else [sid]


def _instance_lines(
    graph: PlanGraph, sid: str, ids: list[str], statuses: dict[str, str]
) -> list[str]:
    """A foreach or matrix step's instances under it: `ids`, those that start in one wave."""
    found = graph.instances.get(sid)
    if found is None:
        return []
    if ids == [sid]:  # no instances to show
        if isinstance(found, str):
            return [f"      └ {sid}[*]  {found}"]
        empty = "no combination left" if sid in graph.matrices else "the list is empty"
        return [f"      └ (no instances: {empty})"]
    shown = ids[:20]
    lines = [
        f"      {'└' if k == len(ids) - 1 else '├'} {GLYPHS.get(statuses.get(i), '○')} {i}"
        for k, i in enumerate(shown)
    ]
    if len(ids) > len(shown):
        lines.append(f"      └ … and {len(ids) - len(shown)} more")
    return lines


def _mermaid_ids(order: list[str]) -> dict[str, str]:
    """Node id per step: the step id itself, or `step_...` for the few Mermaid cannot take.

    Mermaid has no quoting for node ids, so a keyword (`end`) or a link-like run (`a--b`,
    `a-.b`) gets an alias; the label still shows the real step id.
    """
    taken = set(order)
    out: dict[str, str] = {}
    for sid in order:
        if re.match(_MERMAID_SAFE_ID, sid) and re.split(r"[.-]", sid)[0] not in MERMAID_KEYWORDS:
            out[sid] = sid
            continue
        base = "step_" + re.sub(r"[^A-Za-z0-9_]", "_", sid)
        alias, n = base, 2
        while alias in taken:
            alias, n = f"{base}_{n}", n + 1
        taken.add(alias)
        out[sid] = alias
    return out


def render_dot(plan_name: str, graph: PlanGraph) -> str:
    """Graphviz DOT; node ids are the step ids, quoted."""

    def esc(s: str) -> str:
        # DOT strings escape only `"`; in labels a backslash starts an escape (\n, \l), so
        # titles and names written with `\` or line breaks are escaped, not passed through.
        return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    def q(s: str) -> str:
        return f'"{esc(s)}"'

    lines = [f"digraph {q(plan_name)} {{", "    rankdir=TB;", "    node [shape=box];"]
    for sid in graph.order:
        parts = [sid, graph.titles[sid]] if graph.titles[sid] != sid else [sid]
        note = graph.foreach_note(sid)
        if note:
            parts.append(note)
        label = "\\n".join([*map(esc, parts), esc(f"[{graph.tools[sid]}]")])
        lines.append(f'    {q(sid)} [label="{label}"];')
    for e in graph.edges():
        style = "" if e["kind"] == "explicit" else ' [style=dashed, label="data"]'
        lines.append(f"    {q(e['from'])} -> {q(e['to'])}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


GLYPHS: dict[str | None, str] = {
    None: "○",
    Status.PENDING: "○",
    Status.RUNNING: "◐",
    Status.SUCCEEDED: "✓",
    Status.CACHED: "✓",
    Status.FAILED: "✗",
    Status.SKIPPED: "⊘",
    Status.IGNORED: "!",
    Status.INTERRUPTED: "⏸",
}


def render_ascii(
    graph: PlanGraph,
    statuses: dict[str, str] | None = None,
    always: frozenset[str] = frozenset(),
    limits: Mapping[str, int | None] | None = None,
) -> str:
    """mcp-cli style: status glyph, id, title, [tool], `← after: a, b`, `∥` for parallel steps;
    `(always)` after the id of a step in `always`. The waves are the dry run's: a fan-out
    step's instances are paced by its `max_parallel` (`limits`), its line repeated
    `(continued: ...)` in each later wave that starts some of them."""
    statuses = statuses or {}
    limits = limits or {}
    entries = {sid: _entries(graph, sid, statuses) for wave in graph.waves() for sid in wave}
    owner = {eid: sid for sid, ids in entries.items() for eid in ids}
    shown: set[str] = set()
    lines = []
    for n, wave in enumerate(paced_waves(entries, graph.deps, limits), 1):
        parallel = len(wave) > 1
        lines.append(f"wave {n}" + (f"  ∥ {len(wave)} in parallel" if parallel else ""))
        for sid, group in itertools.groupby(wave, owner.__getitem__):
            glyph = GLYPHS.get(statuses.get(sid), "○")
            text = f"  {'∥ ' if parallel else '  '}{glyph} {sid}"
            if sid in shown:
                text += f"  (continued: max_parallel {limits.get(sid)})"
            else:
                shown.add(sid)
                text += " (always)" if sid in always else ""
                if graph.titles[sid] != sid:
                    text += f"  {graph.titles[sid]}"
                text += f"  [{graph.tools[sid]}]"
                if graph.deps[sid]:
                    text += f"  ← after: {', '.join(graph.deps[sid])}"
            lines.append(text)
            lines.extend(_instance_lines(graph, sid, list(group), statuses))
    return "\n".join(lines) + "\n"
