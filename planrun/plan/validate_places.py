"""Validation of `run`, and of the plan's `env` and `dotenv` names (SPEC 13): each problem at
its position, as validate.py reports the rest."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from planrun.plan.definition import BLANK, Step
from planrun.plan.expressions import ExpressionError, format_path, parse_template, template_strings
from planrun.plan.schema_errors import Collector, Path, step_label
from planrun.suggest import did_you_mean


def run_or_tool(raw: dict[str, Any], i: int, out: Collector) -> dict[str, Any]:
    """The step as it is to be validated: one that has both `run` and `tool` is reported
    (at `run`) and checked as its `tool` says."""
    if "run" not in raw or "tool" not in raw:
        return raw
    who = step_label(raw.get("id", raw.get("index")), i)
    out.add(
        ("steps", i, "run"),
        f"{who} has both 'run' and 'tool': a step has one or the other ('run' is tool: shell)",
        key=True,
    )
    return {k: v for k, v in raw.items() if k != "run"}


def check_run(s: Step, i: int, out: Collector) -> None:
    """A `run` list has at least one command and no command is blank; a `run` step has no `args` (they would be
    ignored); a step's `env` names are names a command can receive."""
    if isinstance(s.run, list) and not s.run:
        out.add(("steps", i, "run"), f"step '{s.id}': run: an empty list runs nothing")
    if isinstance(s.run, str):
        blank: list[Path] = [("run",)] if re.match(BLANK, s.run) else []
    else:
        blank = [("run", n) for n, command in enumerate(s.run or ()) if re.match(BLANK, command)]
    for where in blank:
        out.add(
            ("steps", i, *where),
            f"step '{s.id}': {format_path(where)}: an empty command runs nothing",
        )
    if s.run is not None and s.args:
        out.add(
            ("steps", i, "args"),
            f"step '{s.id}': a 'run' step takes no 'args' (its environment and directory are "
            "'env' and 'cwd'; 'tool: shell' takes args)",
            key=True,
        )
    check_env_names(s.env or {}, ("steps", i, "env"), f"step '{s.id}': ", out)
    check_env_cwd(s, i, out)
    check_placed_patterns(s, i, out)


def check_placed_patterns(s: Step, i: int, out: Collector) -> None:
    """Each literal `sources`/`outputs` pattern where the step will read or write it: under
    its directory (`cwd`, or its tool's `args.cwd`) when it has a literal one, as the run
    places it. An output must stay inside the working directory (`cwd: pkg` with
    `../dist/*.whl` does; `cwd: ../other` with `o.txt` does not), and no pattern may end up
    absolute. A pattern or directory holding `${...}` is checked when the step runs."""
    if not s.sources and not s.outputs:
        return
    from planrun.cache.globs import check_pattern  # Lazy imports: only for cache globs
    from planrun.run.stepcall import under
    from planrun.tools import tool_spec

    place: Any = s.cwd
    spec = tool_spec(s.tool)
    own = s.args.get("cwd") if spec and spec.step_cwd and isinstance(s.args, dict) else None
    if own is not None:  # as planrun.run.stepcall.step_place places them
        place, where = own, "args.cwd"
    else:
        where = "cwd"
    if place is not None and (not isinstance(place, str) or "${" in place):
        return
    for field in ("sources", "outputs"):
        for n, pattern in enumerate(getattr(s, field) or []):
            if "${" in pattern:
                continue
            placed = pattern if place is None else under(place, pattern)
            problem = check_pattern(placed, output=field == "outputs")
            if problem is None:
                continue
            shown = f"{field}[{n}]"
            if placed != pattern:
                shown += f" {pattern!r} under {where} {place!r} is {placed!r}"
            out.add(("steps", i, field, n), f"step '{s.id}': {shown}: {problem}")


def check_env_cwd(s: Step, i: int, out: Collector) -> None:
    """A step's `env` and `cwd` reach only the tools that take them (run and shell steps; a
    python step's environment; a plan step's directory and environment): on another tool they
    would be ignored. A `cwd` that places the step's `sources` or `outputs` is used all the same."""
    from planrun.tools import tool_spec  # Lazy import: the registry, only for such a step

    if not s.env and s.cwd is None:
        return
    spec = tool_spec(s.tool)
    if spec is None and "." not in s.tool:
        return  # an unknown tool: said once, elsewhere
    takes = {
        "env": spec is not None and spec.step_env,
        "cwd": spec is not None and spec.step_cwd or bool(s.sources or s.outputs),
    }
    why = {
        "env": "only run, shell, python and plan steps get one",
        "cwd": "only run, shell and plan steps run in one, or it places sources and outputs",
    }
    for key, written in (("env", bool(s.env)), ("cwd", s.cwd is not None)):
        if written and not takes[key]:
            message = f"step '{s.id}': '{s.tool}' takes no {key} ({why[key]})"
            out.add(("steps", i, key), message, key=True)


def check_env_names(env: dict[str, Any], at: Path, who: str, out: Collector) -> None:
    """Each name of an `env` mapping is one a process can receive: not empty, no `=`, no NUL."""
    for name in env:
        if not name or "=" in name or "\0" in name:
            out.add(
                (*at, name), f"{who}env: {name!r} is not an environment variable name", key=True
            )


def check_plan_templates(header: Any, names: set[str], out: Collector) -> None:
    """`${...}` in the plan's `env` values and `dotenv` file names: read before any step runs
    (`dotenv`) or for every step (`env`), so they read variables and `env` only."""
    if header is None:
        return
    check_env_names(dict(header.env), ("env",), "", out)
    found = template_strings(dict(header.env), ("env",), keys=True)
    found += template_strings(list(header.dotenv), ("dotenv",))
    check_before_any_step(found, names, out, format_path, "read before any step")


def check_before_any_step(
    found: list[tuple[Path, str]],
    names: set[str],
    out: Collector,
    where: Callable[[Path], str],
    why: str,
    bound: Iterable[str] = (),
) -> None:
    """Templates evaluated before any step runs (plan `env`, `dotenv` names, server entries):
    each may read the variables `names` and `env`, nothing else. `where`: how a diagnostic
    names the place; `bound`: names that are results (said to be read too early)."""
    known, early = names | {"env"}, {"steps", *bound}
    for path, text in found:
        try:
            tpl = parse_template(text)
        except ExpressionError as exc:
            out.add(path, f"{where(path)}: {exc.message}")
            continue
        for expr in tpl.exprs if tpl else ():
            for name in sorted(expr.names - known):
                note = f" ({why}: use variables or env)" if name in early else ""
                out.add(
                    path,
                    f"{where(path)}: undefined name '{name}'{note}",
                    hint=did_you_mean(name, names),
                )


__all__ = ["check_before_any_step", "check_plan_templates", "check_run", "run_or_tool"]
