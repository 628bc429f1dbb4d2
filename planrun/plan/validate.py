"""Plan validation: every problem at once, each with file, line and column."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the loader (PyYAML) only when a file or text
# is loaded here; pydantic (planrun.plan.model) only for data planrun.plan.fastcheck leaves to it.
import fnmatch
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from planrun.errors import Diagnostic, PlanInvalid
from planrun.plan import fastcheck
from planrun.plan.builtin_args import check_builtin_args
from planrun.plan.checked import CheckedPlan
from planrun.plan.conditions import when_problem
from planrun.plan.definition import (
    EXPRESSION_NAMES,
    RESERVED_NAMES,
    SCOPE_NAMES,
    Plan,
    ServerEntry,
    Step,
    planner_argv,
    replace,
    reserved,
)
from planrun.plan.discovery import PLAN_EXTENSIONS
from planrun.plan.expressions import (
    ExpressionError,
    format_path,
    keys_read,
    parse_template,
    template_strings,
)
from planrun.plan.fanout import (
    EXCLUDE,
    INDEX_NAME,
    MATRIX_NAME,
    foreach_problem,
    loop_names,
    matrix_expression_problems,
    matrix_problems,
)
from planrun.plan.graph import PlanGraph, step_expressions, step_strings
from planrun.plan.params import CLI_ARGS, param_problems
from planrun.plan.schema_errors import Collector, schema_errors
from planrun.plan.targets import check_targets
from planrun.plan.validate_places import (
    check_before_any_step,
    check_plan_templates,
    check_run,
    run_or_tool,
)
from planrun.plan.variables import check_plan_variables
from planrun.run.stepcall import fold_plan_env
from planrun.suggest import did_you_mean
from planrun.tools import builtin_registry

BUILTIN_TOOLS = tuple(builtin_registry().names())

Path = tuple[str | int, ...]
Header = Plan  # the plan's keys but its steps, checked (its `steps` empty)


def default_name(file: str) -> str:
    if file.startswith("<"):
        return "inline"
    base = os.path.basename(file)
    for ext in PLAN_EXTENSIONS:
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def _check_secrets(header: Header | None, names: set[str], out: Collector) -> None:
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
    out = Collector(doc)
    data = doc.data
    raw_steps = data.get("steps", [])
    header_data = {k: v for k, v in data.items() if k != "steps"}
    header = fastcheck.load(Plan, header_data) or _validated_header(header_data, out)
    if not isinstance(raw_steps, list):
        out.add(("steps",), "'steps' must be a list of steps")
        raw_steps = []
    steps, step_paths = _parse_steps(raw_steps, out)
    if "steps" not in data:
        out.add((), "the plan has no 'steps' key (write 'steps: []' for a plan without steps)")
    elif not raw_steps and isinstance(data["steps"], list):
        out.add(("steps",), "the plan has no steps", severity="warning")

    plan_vars = dict(header.variables) if header else _raw_mapping(data, "variables")
    params = dict(header.params) if header else _raw_mapping(data, "params")
    given_names = frozenset({*(variables or {}), CLI_ARGS})  # --var, --vars-file, planrun's
    for at, message in param_problems(params, plan_vars, given_names):
        out.add(at, message, key=len(at) == 2)  # a name at fault: at the name
    given = set(variables or {})  # --var and --vars-file
    variables = {CLI_ARGS: [], **params, **(variables or {})}  # known in every run
    # A header error elsewhere (say a typo in `defaults`) must not make every variable
    # "undefined" and every server "unknown": fall back to the names as written.
    extra_servers = dict(servers or {})  # from --mcp-config; the plan's own entries win
    servers = {
        **extra_servers,
        **(dict(header.servers) if header else _raw_mapping(data, "servers")),
    }
    bound = {s.result_variable for s in steps if s.result_variable}
    known_names = set(plan_vars) | set(variables or {}) | bound | SCOPE_NAMES
    _check_names(header, plan_vars, set(variables or {}), given, bound, out)
    id_set = {s.id for s in steps}
    seen_ids: dict[str, int] = {}  # step id -> index of its first definition
    alias_of = {a: s.id for s in steps for a in s.aliases}
    for s, i in zip(steps, step_paths, strict=True):
        _check_id_and_deps(s, i, seen_ids, id_set, out, alias_of)
        _check_step_rules(s, i, servers, header, out)
        _check_foreach(s, i, out)
        check_run(s, i, out)
        _check_expressions(s, i, known_names, id_set, out)
    _check_server_templates(header, set(plan_vars) | set(variables or {}), bound, out)
    check_plan_templates(header, set(plan_vars) | set(variables or {}), out)
    _check_planner(header, servers, out)

    plan: Plan | None = None
    _check_graph(steps, step_paths, seen_ids, out)
    check_targets(header, steps, step_paths, out)  # aliases, default
    # Built even when something else is wrong (`ok` says whether it may run): `validate
    # --check-tools` still checks the tools of the servers that do exist.
    if header is not None and len(steps) == len(raw_steps):
        name = header.name or default_name(doc.file)
        merged = {**{n: _server(e) for n, e in extra_servers.items()}, **header.servers}
        steps = fold_plan_env(steps, header.env)  # plan `env` under each step's own
        plan = replace(header, name=name, steps=steps, servers=merged)
    return CheckedPlan(plan, sorted(out.items, key=lambda d: (d.line, d.col)), doc)


def _check_id_and_deps(
    s: Step,
    i: int,
    seen_ids: dict[str, int],
    id_set: set[str],
    out: Collector,
    alias_of: dict[str, str],
) -> None:
    """The step's id is its own (noted in `seen_ids`); each dependency is a step, not itself
    (an alias is named as one: `depends_on` takes ids)."""
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
                hint=(
                    f"did you mean '{alias_of[dep]}'? '{dep}' is its alias; depends_on takes ids"
                    if dep in alias_of
                    else did_you_mean(dep, id_set)
                ),
            )
        elif dep == s.id:
            out.add(("steps", i, "depends_on", j), f"dependency cycle: {s.id} -> {s.id}")


def _server(entry: Any) -> ServerEntry:
    """An outside server entry (`--mcp-config`) as the runtime's ServerEntry, validated."""
    if isinstance(entry, ServerEntry):
        return entry
    fast = fastcheck.load(ServerEntry, entry)
    if fast is not None:
        return fast
    from planrun.plan import model

    return model.runtime_server(model.ServerEntry.model_validate(entry))


def _check_names(
    header: Header | None,
    plan_vars: dict[str, Any],
    variables: set[str],
    given: set[str],
    bound: set[str],
    out: Collector,
) -> None:
    """Secrets name known variables; no variable is called `env` or `steps` (`given`: those
    from --var and --vars-file; a param's name is checked with the params); plan variables
    read only what is defined before them."""
    _check_secrets(header, set(plan_vars) | variables | bound, out)
    for name in sorted(given & RESERVED_NAMES):
        out.add((), f"variable '{name}' (from --var or --vars-file): {reserved(name)}")
    for name in plan_vars:
        if name in RESERVED_NAMES:
            out.add(("variables", name), f"variable '{name}': {reserved(name)}", key=True)
    for var_problem in check_plan_variables(plan_vars, variables, bound):
        out.add(var_problem.path, var_problem.message, hint=var_problem.hint)


def _parse_steps(raw_steps: list[Any], out: Collector) -> tuple[list[Step], list[int]]:
    """The steps that parse (leniently: a step with a bad key is still checked for the rest),
    as runtime steps, and the index in the document of each."""
    steps: list[Step] = []
    step_paths: list[int] = []
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            out.add(("steps", i), f"step #{i + 1} must be a mapping with at least 'id' and 'tool'")
            continue
        raw = run_or_tool(raw, i, out)
        step = fastcheck.load(Step, raw) or _validated_step(raw, i, raw_steps, out)
        if step is not None:
            steps.append(step)
            step_paths.append(i)
    return steps, step_paths


# Data planrun.plan.fastcheck does not find plainly valid goes to pydantic (imported only then), which
# decides and says what is wrong.


def _validated_header(header_data: dict[str, Any], out: Collector) -> Header | None:
    from pydantic import ValidationError

    from planrun.plan import model

    try:
        header: Header = model.to_runtime(model.PlanHeader.model_validate(header_data))
    except ValidationError as exc:
        schema_errors(exc, (), header_data, out, model.PLAN_FIELDS, [])
        return None
    return header


# Stand-ins for a `foreach` / `matrix` that did not check: valid, and no instance.
_NO_NAMES = ""  # the stand-in matrix's one name (its reads are not checked)
_NO_INSTANCES: dict[str, Any] = {"foreach": [], "matrix": {_NO_NAMES: []}}


def _validated_step(
    raw: dict[str, Any], i: int, raw_steps: list[Any], out: Collector
) -> Step | None:
    from pydantic import ValidationError

    from planrun.plan import model

    try:
        return model.runtime_step(model.Step.model_validate(raw))
    except ValidationError as exc:
        schema_errors(exc, ("steps", i), raw, out, model.STEP_FIELDS, raw_steps)
        # Keep checking the rest of the step (ids, references, tools) without the bad keys.
        bad = {e["loc"][0] for e in exc.errors() if e["loc"]}
        keep = ("id", "index", "tool", "run")
        lenient = {k: v for k, v in raw.items() if k not in bad or k in keep}
        # A bad list still makes a fan-out step: its args read `matrix` / `item` and `index`,
        # which must not be reported undefined on top of the list's own error.
        lenient.update({k: _NO_INSTANCES[k] for k in _NO_INSTANCES if k in bad})
        try:
            return model.runtime_step(model.Step.model_validate(lenient))
        except ValidationError:
            return None


def _check_step_rules(
    s: Step, i: int, servers: dict[str, Any], header: Header | None, out: Collector
) -> None:
    """A step's own rules: reserved names, its condition, its tool and the tool's arguments."""
    if s.result_variable in RESERVED_NAMES:
        out.add(
            ("steps", i, "result_variable"),
            f"step '{s.id}': result_variable '{s.result_variable}': " + reserved(s.result_variable),
        )
    if isinstance(s.when, str) and (problem := when_problem(s.when)):
        out.add(("steps", i, "when"), f"step '{s.id}': when: {problem[0]}", hint=problem[1])
    _check_tool(s, i, servers, header, out)
    for arg_problem in () if s.run is not None else check_builtin_args(s.tool, s.args):
        out.add(
            ("steps", i, *arg_problem.path),
            f"step '{s.id}': {s.tool}: {arg_problem.message}",
            hint=arg_problem.hint,
            key=arg_problem.key,
        )
    if s.sources and s.outputs:  # (the cache's modules only for a step that needs them)
        from planrun.cache.overlap import overlapping_outputs

        for n in overlapping_outputs(s.sources, s.outputs):
            out.add(
                ("steps", i, "outputs", n),
                f"step '{s.id}': outputs[{n}] '{s.outputs[n]}' is also one of its sources: "
                "the step changes its own inputs, so it would never hit the cache",
                severity="warning",
            )
    if s.on_failure == "replan" and header is not None and header.replan is None:
        out.add(
            ("steps", i, "on_failure"),
            f"step '{s.id}' has on_failure: replan but the plan has no 'replan:' planner "
            "(without --planner it fails like abort)",
            severity="warning",
        )


def _check_graph(
    steps: list[Step], step_paths: list[int], seen_ids: dict[str, int], out: Collector
) -> None:
    """Cycles (printed as the path of real edges), else concurrent binders of one variable."""
    ids = [s.id for s in steps]
    unique = [s for k, s in enumerate(steps) if seen_ids.get(s.id) == step_paths[k]]
    graph = PlanGraph.build(unique)
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


def _check_expressions(
    s: Step, i: int, known_names: set[str], id_set: set[str], out: Collector
) -> None:
    """Every `${...}` of a step: syntax, names, step references, reads of itself."""
    for path, text in step_strings(s):
        try:
            tpl = parse_template(text)
        except ExpressionError as exc:
            out.add(("steps", i, *path), f"step '{s.id}': {format_path(path)}: {exc.message}")
            continue
        if tpl is None:
            continue
        # `as`/`index` are in scope for the step's args, when and title, not its foreach or
        # matrix (read before there is an element). Kept
        # apart from `known_names` (every plan variable and result variable): a union per
        # string made validating N steps O(N^2).
        loop = frozenset() if path[0] in ("foreach", "matrix") else loop_names(s)
        loop_only = loop - known_names
        for expr in tpl.exprs:
            if (
                s.result_variable in expr.names and s.result_variable not in loop_only
            ) or s.id in expr.step_refs:
                out.add(("steps", i, *path), f"dependency cycle: {s.id} -> {s.id}")
            if expr.steps_dynamic:
                out.add(
                    ("steps", i, *path),
                    f"step '{s.id}': {format_path(path)}: read a step as steps.ID or "
                    "steps['ID'], with a literal step id",
                )
            undefined = [n for n in expr.names if n not in known_names and n not in loop]
            for name in sorted(undefined):
                out.add(
                    ("steps", i, *path),
                    f"step '{s.id}': {format_path(path)}: undefined name '{name}'",
                    hint=did_you_mean(name, (known_names | loop) - SCOPE_NAMES),
                )
            if MATRIX_NAME in expr.names and path[0] != "matrix":
                _check_matrix_reads(s, i, path, expr.source, out)
            for ref in sorted(expr.step_refs - id_set):
                out.add(
                    ("steps", i, *path),
                    f"step '{s.id}': {format_path(path)}: unknown step 'steps.{ref}'",
                    hint=did_you_mean(ref, id_set),
                )


def _check_matrix_reads(s: Step, i: int, path: Path, source: str, out: Collector) -> None:
    """`${matrix.X}` in a matrix step whose matrix has no name X: its names are written in the
    plan, so the read could only fail every instance."""
    if s.matrix is None or _NO_NAMES in s.matrix:  # not a matrix step, or its matrix is bad
        return
    names = [n for n in s.matrix if n != EXCLUDE]
    for key in sorted(keys_read(source, MATRIX_NAME) - set(names)):
        out.add(
            ("steps", i, *path),
            f"step '{s.id}': {format_path(path)}: undefined name '{MATRIX_NAME}.{key}'",
            hint=did_you_mean(key, names),
        )


def _check_server_templates(
    header: Header | None, variables: set[str], bound: set[str], out: Collector
) -> None:
    """`${...}` in server entries: they start before any step, so only variables and `env`."""
    for name, entry in (header.servers if header else {}).items():
        written = {k: v for k, v in entry.to_dict().items() if v is not None}
        found = template_strings(written, ("servers", name))
        check_before_any_step(
            found,
            variables,
            out,
            lambda path, name=name: f"server '{name}': {format_path(path[2:])}",  # type: ignore[misc]
            "a server starts before any step",
            bound,
        )


def _data_edge_path(s: Step, producer: str, steps: list[Step]) -> Path:
    """Where step `s` reads a result of `producer` (the string that makes the data-flow edge)."""
    bound = {t.result_variable for t in steps if t.id == producer and t.result_variable}
    return next(
        (p for p, e in step_expressions(s) if e.names & bound or producer in e.step_refs), ()
    )


def _raw_mapping(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


_INCLUDE = "include"


def _check_foreach(s: Step, i: int, out: Collector) -> None:
    """`foreach` gives a list or mapping; `as` needs a foreach and a name of its own."""
    if s.matrix is not None or s.max_parallel is not None:
        for at, message in matrix_problems(s):
            out.add(("steps", i, *at), f"step '{s.id}': {message}", key=True)
        for at, message in matrix_expression_problems(s):
            out.add(("steps", i, *at), f"step '{s.id}': {message}")
    if s.matrix is not None and _INCLUDE in s.matrix:
        # GitHub Actions' `include` adds combinations; here it is one more name to combine.
        out.add(
            ("steps", i, "matrix", _INCLUDE),
            f"step '{s.id}': matrix: '{_INCLUDE}' is a name to combine, not GitHub Actions' "
            "include (only 'exclude' is special): add the values to the lists instead",
            severity="warning",
            key=True,
        )
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
    elif s.as_ in EXPRESSION_NAMES:
        out.add(
            ("steps", i, "as"),
            f"step '{s.id}': as: '{s.as_}' is a name expressions cannot read"
            " (true, false, none, self, range and dict are the expression language's own)",
        )


def _check_tool(
    s: Step, i: int, servers: dict[str, Any], header: Header | None, out: Collector
) -> None:
    tool = s.tool
    if tool not in BUILTIN_TOOLS:
        if "." in tool:
            server = tool.split(".", 1)[0]
            if server not in servers:
                # A declared name holding a dot can never be called: SERVER.TOOL splits at the
                # first dot (some client configs name servers `github.com`).
                dotted = [n for n in servers if "." in n and tool.startswith(f"{n}.")]
                out.add(
                    ("steps", i, "tool"),
                    f"step '{s.id}': unknown MCP server '{server}' in tool '{tool}'",
                    hint=f"server '{dotted[0]}' cannot be called: SERVER.TOOL splits at the "
                    "first '.', so rename it without a dot"
                    if dotted
                    else did_you_mean(server, set(servers)),
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


def _check_planner(header: Header | None, servers: dict[str, Any], out: Collector) -> None:
    """The planner (`replan:`) must be callable: a command names a program, and a tool is
    SERVER.TOOL of a configured server, a tool call like a step's (`policy.deny` covers it)."""
    if header is None or header.replan is None:
        return
    command, tool = header.replan.command, header.replan.tool
    if command is not None:
        try:
            planner_argv(command)
        except ValueError as exc:
            out.add(("replan", "command"), f"replan: {exc}")
    if tool is None:
        return
    server, dot, name = tool.partition(".")
    if not (server and dot and name):
        out.add(("replan", "tool"), f"replan: planner tool '{tool}' is not SERVER.TOOL")
        return
    if server not in servers:
        out.add(
            ("replan", "tool"),
            f"replan: unknown MCP server '{server}' in planner tool '{tool}'",
            hint=did_you_mean(server, set(servers)),
        )
    for pattern in header.policy.deny:
        if fnmatch.fnmatchcase(tool, pattern):
            out.add(
                ("replan", "tool"),
                f"replan: planner tool '{tool}' is denied by policy (deny: '{pattern}')",
            )
            break


def _concurrent_binders(
    steps: list[Step], step_paths: list[int], graph: PlanGraph, out: Collector
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
    from planrun.plan.loader import load_document, load_text

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


class WrittenPlan(NamedTuple):
    """What `status` and `report` read of a plan file without running it."""

    name: str  # the name its runs keep their state under
    steps: Any  # its `steps` as written (None when it does not parse)
    unreadable: str | None  # why it does not parse (its first error, rendered), else None


def written_plan(source: str, *, text: str | None = None, label: str | None = None) -> WrittenPlan:
    """The plan as `planrun status` reads it: without the run's variables (a plan whose
    expressions read a `--var` name does not check without them, and still has its name), and
    from an invalid plan too: its state, from an earlier valid version, is kept under that name.
    A file that does not parse gives no name: its stem stands in. `label` names inline `text`.
    """
    label = label or source
    try:
        checked = load_and_check(source, text=text)
    except PlanInvalid as exc:
        return WrittenPlan(default_name(label), None, str(exc))
    data = getattr(checked.doc, "data", None)
    steps = data.get("steps") if isinstance(data, dict) else None
    if checked.plan is not None and checked.plan.name:
        return WrittenPlan(checked.plan.name, steps, None)
    if isinstance(data, dict):
        raw = data.get("name", data.get("id"))
        if isinstance(raw, str | int) and not isinstance(raw, bool) and str(raw):
            return WrittenPlan(str(raw), steps, None)
    return WrittenPlan(default_name(label), steps, None)


def validate_plan(source: str, variables: Mapping[str, Any] | None = None) -> list[Diagnostic]:
    """Every diagnostic for the plan file `source` (parse errors included)."""
    try:
        return load_and_check(source, variables).diagnostics
    except PlanInvalid as exc:
        return exc.diagnostics
