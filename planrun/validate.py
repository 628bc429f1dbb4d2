"""Plan validation (SPEC §3): every problem at once, each with file, line and column."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from planrun.builtin_args import check_builtin_args
from planrun.checked import CheckedPlan
from planrun.conditions import when_problem
from planrun.errors import Diagnostic, PlanInvalid
from planrun.expressions import ExpressionError, format_path, parse_template, template_strings
from planrun.fanout import INDEX_NAME, foreach_problem, loop_names
from planrun.graph import PlanGraph, step_strings
from planrun.model import PLAN_FIELDS, STEP_FIELDS, Plan, PlanHeader, ServerEntry, Step
from planrun.plan_variables import check_plan_variables
from planrun.suggest import did_you_mean
from planrun.tools import builtin_registry

BUILTIN_TOOLS = (*builtin_registry().names(), "plan")  # `plan` runs in the executor itself
SCOPE_NAMES = frozenset({"env", "steps"})

Path = tuple[str | int, ...]


def reserved(name: str) -> str:
    """Why a variable cannot be called `env` or `steps`."""
    what = "the process environment" if name == "env" else "the steps' status, result and error"
    return f"the name '{name}' is reserved ({what})"


class _Collector:
    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.items: list[Diagnostic] = []

    def add(
        self,
        path: Path,
        message: str,
        *,
        hint: str | None = None,
        key: bool = False,
        severity: str = "error",
    ) -> None:
        line, col = self.doc.pos(_doc_path(self.doc.data, path), key=key)
        self.items.append(Diagnostic(self.doc.file, line, col, severity, message, hint))


def _doc_path(data: Any, path: Path) -> Path:
    """Map model paths onto the document (the `id` of an mcp-cli step is written `index`)."""
    if len(path) >= 3 and path[0] == "steps" and path[2] == "id":
        try:
            step = data["steps"][path[1]]
            if isinstance(step, dict) and "id" not in step and "index" in step:
                return ("steps", path[1], "index", *path[3:])
        except (KeyError, IndexError, TypeError):
            pass
    if len(path) == 1 and path[0] == "name" and isinstance(data, dict) and "name" not in data:
        return ("id",)
    return path


def _label(path: Path, steps: list[Any]) -> str:
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        raw = steps[path[1]] if path[1] < len(steps) else None
        sid = raw.get("id", raw.get("index")) if isinstance(raw, dict) else None
        who = f"step '{sid}'" if sid is not None else f"step #{path[1] + 1}"
        rest = format_path(path[2:])
        return f"{who}: {rest}" if rest else who
    return format_path(path)


def _schema_errors(
    exc: ValidationError,
    base: Path,
    data: Any,
    out: _Collector,
    fields: list[str],
    steps: list[Any],
) -> None:
    seen: set[Path] = set()
    for err in exc.errors():
        loc: list[str | int] = []
        node = data
        for part in err["loc"]:  # drop pydantic's union-member tags, which are not in the data
            if (
                isinstance(node, dict)
                and part in node
                or (isinstance(node, list) and isinstance(part, int) and part < len(node))
            ):
                loc.append(part)
                node = node[part]  # type: ignore[index]
            elif err["type"] in ("extra_forbidden", "missing") and part == err["loc"][-1]:
                loc.append(part)
            else:
                break
        path = (*base, *loc)
        if path in seen:
            continue
        seen.add(path)
        kind = err["type"]
        msg = str(err["msg"]).removeprefix("Value error, ")
        if kind == "extra_forbidden":
            key = str(loc[-1])
            parent = _label(path[:-1], steps) if len(path) > 1 else "the plan"
            in_step = len(loc) == 1
            choices = fields if in_step else _fields_at(err["loc"][:-1])
            # `index` (step) and `id` (plan) are aliases: they are only "unknown" when the
            # real key is there too.
            alias_of = {"index": "id"} if "index" in fields else {"id": "name"}
            if in_step and alias_of.get(key) in data:
                out.add(
                    path,
                    f"{parent}: '{key}' is an alias of '{alias_of[key]}': give only one of them",
                    key=True,
                )
                continue
            out.add(
                path,
                f"unknown key '{key}' in {parent}",
                hint=did_you_mean(key, [c for c in choices if c != key]),
                key=True,
            )
        elif kind == "missing":
            out.add(
                path[:-1],
                f"{_label(path[:-1], steps) or 'the plan'}: missing required key '{loc[-1]}'",
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "id":
            out.add(
                path,
                f"{_label(path[:-1], steps)}: bad step id {node!r}: use letters, digits, '_', '.', '-'",
            )
        elif kind == "string_pattern_mismatch" and loc and loc[-1] == "result_variable":
            out.add(
                path,
                f"{_label(path[:-1], steps)}: bad result_variable {node!r}: use a name like 'my_var'",
            )
        elif kind in _EXPECTED or kind in ("enum", "literal_error", "greater_than_equal"):
            where = _label(path, steps) or "plan"
            got = json.dumps(node, ensure_ascii=False, default=str)[:80]
            ctx = err.get("ctx") or {}
            if kind == "greater_than_equal":
                out.add(path, f"{where}: expected {ctx.get('ge')} or more, got {got}")
            else:
                expected = _EXPECTED.get(kind) or ctx.get("expected", "another value")
                out.add(path, f"{where}: expected {expected}, got {got}")
        else:
            where = _label(path, steps) or "plan"
            out.add(path, f"{where}: {msg}")


# Type errors (strict: nothing is converted) in the words of the plan's JSON types.
_EXPECTED = {
    "bool_type": "true or false",
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "dict_type": "a mapping",
    "list_type": "a list",
}


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """Known keys of the nested model at a pydantic location (for did-you-mean)."""
    from planrun import model

    names: dict[str, type[BaseModel]] = {
        "defaults": model.Defaults,
        "limits": model.Limits,
        "policy": model.Policy,
        "replan": model.Replan,
        "executor": model.ExecutorConfig,
    }
    if loc and loc[0] in names:
        return list(names[loc[0]].model_fields)
    if loc and loc[0] == "servers":
        return list(model.ServerEntry.model_fields)
    return PLAN_FIELDS


def default_name(file: str) -> str:
    if file.startswith("<"):
        return "inline"
    base = os.path.basename(file)
    for ext in (".yaml", ".yml", ".json"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def _check_secrets(header: PlanHeader | None, names: set[str], out: _Collector) -> None:
    """Each name in `secrets:` is a variable (declared, given or bound by a step): a typo would
    otherwise leave the real secret in clear. With `dotenv:` files it may name one of their keys,
    which are read only at run time."""
    if header is None or header.dotenv:
        return
    for i, name in enumerate(header.secrets):
        if name not in names:
            out.add(
                ("secrets", i),
                f"secrets: unknown variable '{name}' (not declared, given or bound by a step)",
                hint=did_you_mean(name, names),
            )


def check_document(
    doc: Any, variables: Mapping[str, Any] | None = None, servers: Mapping[str, Any] | None = None
) -> CheckedPlan:
    """Schema, reference, expression, tool, policy and graph checks over a loaded document.

    `servers` are MCP servers from outside the plan (`--mcp-config`), merged under its own.
    """
    out = _Collector(doc)
    data = doc.data
    raw_steps = data.get("steps", [])
    header_data = {k: v for k, v in data.items() if k != "steps"}
    header: PlanHeader | None = None
    try:
        header = PlanHeader.model_validate(header_data)
    except ValidationError as exc:
        _schema_errors(exc, (), header_data, out, PLAN_FIELDS, [])
    if not isinstance(raw_steps, list):
        out.add(("steps",), "'steps' must be a list of steps")
        raw_steps = []
    steps: list[Step] = []
    step_paths: list[int] = []
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            out.add(("steps", i), f"step #{i + 1} must be a mapping with at least 'id' and 'tool'")
            continue
        try:
            steps.append(Step.model_validate(raw))
            step_paths.append(i)
        except ValidationError as exc:
            _schema_errors(exc, ("steps", i), raw, out, STEP_FIELDS, raw_steps)
            # Keep checking the rest of the step (ids, references, tools) without the bad keys.
            bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
            lenient = {k: v for k, v in raw.items() if k not in bad or k in ("id", "index", "tool")}
            try:
                steps.append(Step.model_validate(lenient))
                step_paths.append(i)
            except ValidationError:
                pass
    if "steps" not in data:
        out.add((), "the plan has no 'steps' key (write 'steps: []' for a plan without steps)")
    elif not raw_steps and isinstance(data["steps"], list):
        out.add(("steps",), "the plan has no steps", severity="warning")

    plan_vars = dict(header.variables) if header else _raw_mapping(data, "variables")
    # A header error elsewhere (say a typo in `defaults`) must not make every variable
    # "undefined" and every server "unknown": fall back to the names as written.
    extra_servers = dict(servers or {})  # from --mcp-config; the plan's own entries win
    servers = {
        **extra_servers,
        **(dict(header.servers) if header else _raw_mapping(data, "servers")),
    }
    bound = {s.result_variable for s in steps if s.result_variable}
    known_names = set(plan_vars) | set(variables or {}) | bound | SCOPE_NAMES
    _check_secrets(header, set(plan_vars) | set(variables or {}) | bound, out)
    for name in sorted(set(variables or {}) & SCOPE_NAMES):
        out.add((), f"variable '{name}' (from --var or --vars-file): {reserved(name)}")
    for name in plan_vars:
        if name in SCOPE_NAMES:
            out.add(("variables", name), f"variable '{name}': {reserved(name)}", key=True)
    for var_problem in check_plan_variables(plan_vars, set(variables or {}), bound):
        out.add(var_problem.path, var_problem.message, hint=var_problem.hint)
    ids = [s.id for s in steps]
    id_set = set(ids)
    seen_ids: dict[str, int] = {}
    for s, i in zip(steps, step_paths, strict=True):
        if s.id in seen_ids:
            out.add(
                ("steps", i, "id"),
                f"duplicate step id '{s.id}' (first defined in step #{seen_ids[s.id] + 1})",
            )
        else:
            seen_ids[s.id] = i
        for j, dep in enumerate(s.depends_on):
            if dep not in id_set:
                out.add(
                    ("steps", i, "depends_on", j),
                    f"step '{s.id}' depends on unknown step '{dep}'",
                    hint=did_you_mean(dep, id_set),
                )
            elif dep == s.id:
                out.add(("steps", i, "depends_on", j), f"dependency cycle: {s.id} -> {s.id}")
        if s.result_variable in SCOPE_NAMES:
            out.add(
                ("steps", i, "result_variable"),
                f"step '{s.id}': result_variable '{s.result_variable}': "
                + reserved(s.result_variable),
            )
        if isinstance(s.when, str) and (problem := when_problem(s.when)):
            out.add(("steps", i, "when"), f"step '{s.id}': when: {problem[0]}", hint=problem[1])
        _check_tool(s, i, servers, header, out)
        for arg_problem in check_builtin_args(s.tool, s.args):
            out.add(
                ("steps", i, *arg_problem.path),
                f"step '{s.id}': {s.tool}: {arg_problem.message}",
                hint=arg_problem.hint,
                key=arg_problem.key,
            )
        if s.on_failure == "replan" and header is not None and header.replan is None:
            out.add(
                ("steps", i, "on_failure"),
                f"step '{s.id}' has on_failure: replan but the plan has no 'replan:' planner "
                "(without --planner it fails like abort)",
                severity="warning",
            )
        _check_foreach(s, i, out)
        for path, text in step_strings(s):
            try:
                tpl = parse_template(text)
            except ExpressionError as exc:
                out.add(("steps", i, *path), f"step '{s.id}': {format_path(path)}: {exc.message}")
                continue
            if tpl is None:
                continue
            # `as`/`index` are in scope for the step's args, when and title, not its foreach.
            names_here = known_names if path[0] == "foreach" else known_names | loop_names(s)
            for expr in tpl.exprs:
                if (
                    s.result_variable in expr.names - (names_here - known_names)
                    or s.id in expr.step_refs
                ):
                    out.add(("steps", i, *path), f"dependency cycle: {s.id} -> {s.id}")
                if expr.steps_dynamic:
                    out.add(
                        ("steps", i, *path),
                        f"step '{s.id}': {format_path(path)}: read a step as steps.ID or "
                        "steps['ID'], with a literal step id",
                    )
                for name in sorted(expr.names - names_here):
                    out.add(
                        ("steps", i, *path),
                        f"step '{s.id}': {format_path(path)}: undefined name '{name}'",
                        hint=did_you_mean(name, names_here - SCOPE_NAMES),
                    )
                for ref in sorted(expr.step_refs - id_set):
                    out.add(
                        ("steps", i, *path),
                        f"step '{s.id}': {format_path(path)}: unknown step 'steps.{ref}'",
                        hint=did_you_mean(ref, id_set),
                    )
    # Server entries are resolved before any step runs: only variables and `env` are known.
    server_names = set(plan_vars) | set(variables or {}) | {"env"}
    for name, entry in (header.servers if header else {}).items():
        for path, text in template_strings(entry.model_dump(exclude_none=True), ("servers", name)):
            try:
                tpl = parse_template(text)
            except ExpressionError as exc:
                out.add(path, f"server '{name}': {format_path(path[2:])}: {exc.message}")
                continue
            for expr in tpl.exprs if tpl else ():
                for var in sorted(expr.names - server_names):
                    out.add(
                        path,
                        f"server '{name}': {format_path(path[2:])}: undefined name '{var}'"
                        + (
                            " (a server starts before any step: use variables or env)"
                            if var in bound or var == "steps"
                            else ""
                        ),
                        hint=did_you_mean(var, server_names - {"env"}),
                    )

    plan: Plan | None = None
    unique = [s for k, s in enumerate(steps) if seen_ids.get(s.id) == step_paths[k]]
    graph = PlanGraph.build(unique)
    if graph is not None:
        cycle = graph.find_cycle()
        if cycle:
            first = cycle[0]
            i = step_paths[ids.index(first)]
            s = steps[ids.index(first)]
            where: Path = (
                ("steps", i, "depends_on", s.depends_on.index(cycle[1]))
                if cycle[1] in s.depends_on
                else ("steps", i, *_data_edge_path(s, cycle[1], unique))
            )
            out.add(where, f"dependency cycle: {' -> '.join(cycle)}")
        else:
            _concurrent_binders(steps, step_paths, graph, out)
    # Built even when something else is wrong (`ok` says whether it may run): `validate
    # --check-tools` still checks the tools of the servers that do exist.
    if header is not None and len(steps) == len(raw_steps):
        name = header.name or default_name(doc.file)
        merged = {
            **{n: ServerEntry.model_validate(e) for n, e in extra_servers.items()},
            **header.servers,
        }
        plan = Plan.model_construct(
            **{**dict(header), "name": name, "steps": steps, "servers": merged}
        )
    return CheckedPlan(plan, sorted(out.items, key=lambda d: (d.line, d.col)), doc)


def _data_edge_path(s: Step, producer: str, steps: list[Step]) -> Path:
    """Where step `s` reads a result of `producer` (the string that makes the data-flow edge)."""
    bound = {t.result_variable for t in steps if t.id == producer and t.result_variable}
    for path, text in step_strings(s):
        try:
            tpl = parse_template(text)
        except ExpressionError:
            continue
        for expr in tpl.exprs if tpl else ():
            if expr.names & bound or producer in expr.step_refs:
                return path
    return ()


def _raw_mapping(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _check_foreach(s: Step, i: int, out: _Collector) -> None:
    """`foreach` gives a list or mapping; `as` needs a foreach and a name of its own."""
    if s.foreach is None:
        if s.as_ is not None:
            out.add(
                ("steps", i, "as"),
                f"step '{s.id}': 'as' names the element of a foreach, but the step has no 'foreach'",
                key=True,
            )
        return
    problem = foreach_problem(s)
    if problem:
        out.add(("steps", i, "foreach"), f"step '{s.id}': foreach: {problem}")
    if s.as_ in SCOPE_NAMES or s.as_ == INDEX_NAME:
        out.add(
            ("steps", i, "as"),
            f"step '{s.id}': as: '{s.as_}' is taken (env, steps and index are always defined)",
        )


def _check_tool(
    s: Step, i: int, servers: dict[str, Any], header: PlanHeader | None, out: _Collector
) -> None:
    tool = s.tool
    if tool not in BUILTIN_TOOLS:
        if "." in tool:
            server = tool.split(".", 1)[0]
            if server not in servers:
                out.add(
                    ("steps", i, "tool"),
                    f"step '{s.id}': unknown MCP server '{server}' in tool '{tool}'",
                    hint=did_you_mean(server, set(servers)),
                )
        else:
            out.add(
                ("steps", i, "tool"),
                f"step '{s.id}': unknown tool '{tool}'",
                hint=did_you_mean(tool, set(BUILTIN_TOOLS)),
            )
    if header is not None:
        for pattern in header.policy.deny:
            if fnmatch.fnmatchcase(tool, pattern):
                out.add(
                    ("steps", i, "tool"),
                    f"step '{s.id}': tool '{tool}' is denied by policy (deny: '{pattern}')",
                )
                break


def _concurrent_binders(
    steps: list[Step], step_paths: list[int], graph: PlanGraph, out: _Collector
) -> None:
    binders: dict[str, list[int]] = {}
    for k, s in enumerate(steps):
        if s.result_variable:
            binders.setdefault(s.result_variable, []).append(k)
    for var, ks in binders.items():
        if len(ks) < 2:
            continue
        for a_pos, a in enumerate(ks):
            up = graph.upstream([steps[a].id])
            for b in ks[:a_pos]:
                if steps[b].id not in up and steps[a].id not in graph.upstream([steps[b].id]):
                    out.add(
                        ("steps", step_paths[a], "result_variable"),
                        f"result variable '{var}' is bound by steps '{steps[b].id}' and '{steps[a].id}', "
                        "which may run concurrently",
                        severity="warning",
                    )
                    break


def load_and_check(
    source: str,
    variables: Mapping[str, Any] | None = None,
    *,
    text: str | None = None,
    servers: Mapping[str, Any] | None = None,
) -> CheckedPlan:
    """Load a plan file (or inline text) and check it. Parse errors raise PlanInvalid.

    `servers`: MCP servers from outside the plan (`--mcp-config`), under the plan's own."""
    from planrun.loader import load_document, load_text

    doc = load_text(text, source) if text is not None else load_document(source)
    return check_document(doc, variables, servers)


def load_plan(
    path: str,
    variables: Mapping[str, Any] | None = None,
    servers: Mapping[str, Any] | None = None,
) -> Plan:
    """The plan in `path`, validated; raises PlanInvalid with every diagnostic."""
    checked = load_and_check(path, variables, servers=servers)
    if not checked.ok or checked.plan is None:
        raise PlanInvalid([d for d in checked.diagnostics if d.severity == "error"])
    return checked.plan


def validate_plan(source: str, variables: Mapping[str, Any] | None = None) -> list[Diagnostic]:
    """Every diagnostic for the plan file `source` (parse errors included)."""
    try:
        return load_and_check(source, variables).diagnostics
    except PlanInvalid as exc:
        return exc.diagnostics
