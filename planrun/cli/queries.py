"""The commands that run nothing: `validate`, `graph`, `status`, `list`, `show`, `schema`, `tools`.

They read plans, state and tools; each imports its machinery when it runs.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: each command imports its own machinery when
# it runs.
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from planrun.cli.completion import complete_plan_files
from planrun.cli.edge import guard, parse_vars, print_diagnostics
from planrun.errors import ExitCode, PlanInvalid, PlanrunError, UsageError, one_line
from planrun.plan.discovery import (
    Found,
    enter_default_plan,
    plan_or_found,
    started_in,
    with_builtins,
)
from planrun.reporters.termsafe import echo_view
from planrun.text import counted

if TYPE_CHECKING:
    from planrun.plan.definition import Plan


def _given_vars(var: tuple[str, ...], vars_file: str | None) -> dict[str, Any]:
    """--vars-file's variables with --var's over them."""
    if not vars_file:
        return parse_vars(var)
    # Imported only when used: planrun.run.runner brings asyncio and the run path, which
    # `validate` of a plan without --vars-file does not need.
    from planrun.run.runner import load_vars_file

    return {**load_vars_file(vars_file, os.getcwd()), **parse_vars(var)}


def _vars_place(vars_file: str | None) -> Callable[[str], str] | None:
    """Where a --vars-file value is written, for a param's error about it (bind_params)."""
    if not vars_file:
        return None
    from planrun.run.runner import vars_file_place

    return vars_file_place(vars_file, os.getcwd())


def _echo_doc(output: str, doc: Any, render: Callable[[Any], str]) -> None:
    """`doc` as indented JSON for `--output json`, else as `render` words it."""
    if output == "json":
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    else:
        echo_view(render(doc))


@click.command()
@click.argument("plans", nargs=-1, shell_complete=complete_plan_files)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
)
@click.option("--var", "var", multiple=True, metavar="K=V", help="Variables the plan may read.")
@click.option("--vars-file", type=click.Path(dir_okay=False))
@click.option(
    "--check-tools", is_flag=True, help="Connect to MCP servers and check tools and arguments."
)
@click.option(
    "--mcp-config",
    type=click.Path(dir_okay=False),
    help="MCP servers from a Claude/Cursor/VS Code config file, as for `run`.",
)
@guard
def validate(
    plans: tuple[str, ...],
    fmt: str,
    var: tuple[str, ...],
    vars_file: str | None,
    check_tools: bool,
    mcp_config: str | None,
) -> None:
    """Check plan files: schema, references, expressions, tools, policy, cycles."""
    from planrun.plan.cache import check_plan_file

    extra, place = _given_vars(var, vars_file), _vars_place(vars_file)
    # without PLANS, the default plan, found here or above: its directory becomes the cwd
    here = Found(plans[0], started_in()) if plans else enter_default_plan()
    plans, extra = plans or (here.plan,), with_builtins(here, extra)
    mcp_config = here.given_path(mcp_config)
    servers: dict[str, Any] = {}
    if mcp_config:
        from planrun.mcp.client import parse_mcp_config

        servers = parse_mcp_config(mcp_config)
    missing = [p for p in plans if not os.path.exists(p)]
    if missing:
        raise UsageError(f"plan file not found: {missing[0]}")
    diags = []
    for path in plans:
        found = []
        try:
            checked = check_plan_file(path, extra, servers, cache=not check_tools)
            found.extend(checked.diagnostics)
            if checked.ok:
                from planrun.plan.dotenv import dotenv_problems
                from planrun.plan.params import bind_params
                from planrun.plan.unmatched import unmatched_sources

                if checked.plan is not None:  # a --var that its param refuses: exit 2
                    bind_params(checked.plan.params, extra, required=False, place=place)
                found.extend(dotenv_problems(checked, os.getcwd(), extra))
                found.extend(unmatched_sources(checked, os.getcwd()))
            if check_tools and checked.plan is not None:
                # Servers that exist are checked even when another one is unknown.
                from planrun.run.checktools import check_plan_tools

                found.extend(check_plan_tools(checked, os.getcwd(), extra))
        except PlanInvalid as exc:
            found.extend(exc.diagnostics)
        diags.extend(sorted(found, key=lambda d: (d.line, d.col)))  # by position, per file
    print_diagnostics(diags, fmt)
    if any(d.severity == "error" for d in diags):
        sys.exit(int(ExitCode.INVALID_PLAN))
    if fmt == "text" and not diags:
        click.echo(f"ok: {counted(len(plans), 'plan')} valid", err=True)


@click.command()
@click.argument("plan", required=False, shell_complete=complete_plan_files)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["ascii", "mermaid", "dot", "json"]),
    default="ascii",
    show_default=True,
)
@click.option(
    "--state", type=click.Path(dir_okay=False), help="Show step statuses from this state file."
)
@click.option("--var", "var", multiple=True, metavar="K=V", help="Variables the plan may read.")
@click.option("--vars-file", type=click.Path(dir_okay=False))
@guard
def graph(
    plan: str | None, fmt: str, state: str | None, var: tuple[str, ...], vars_file: str | None
) -> None:
    """Show the step graph (explicit and data-flow edges, parallel waves)."""
    from planrun.cli.steplist import KnownTexts
    from planrun.plan import graph as g
    from planrun.plan.validate import load_plan

    # A plan that reads --var names checks only with them, as for `validate` and `run`.
    extra, place = _given_vars(var, vars_file), _vars_place(vars_file)
    found = plan_or_found(plan)  # the default plan's directory becomes the cwd
    given = with_builtins(found, extra)
    p = _revised_plan(load_plan(found.plan, given), found.given_path(state))
    texts = KnownTexts.of(p, given, place)  # titles rendered as `list` shows them
    pg = g.PlanGraph.build(p.steps)
    pg.titles = {s.id: texts.title(s) for s in p.steps}
    always = frozenset(s.id for s in p.steps if s.always)
    if any(s.foreach is not None or s.matrix is not None for s in p.steps):
        from planrun.run.dryrun import instances_preview

        pg.instances = instances_preview(p, dict(texts.scope))
    if fmt == "json":
        click.echo(json.dumps(g.render_json(p.name or "", pg, always), indent=2))
    elif fmt == "mermaid":
        echo_view(g.render_mermaid(pg))
    elif fmt == "dot":
        echo_view(g.render_dot(p.name or "", pg))
    else:
        statuses = _last_statuses(p.name or "", found.given_path(state))
        limits = {s.id: s.max_parallel for s in p.steps}
        echo_view(g.render_ascii(pg, statuses, always, limits))


def _state_path(name: str, state: str | None) -> str:
    from planrun.state import default_state_path

    return state or str(default_state_path(os.getcwd(), name))


def _read_state(name: str, state: str | None) -> Any:
    from planrun.state import read_state

    return read_state(_state_path(name, state), name)


def _last_statuses(name: str, state: str | None) -> dict[str, str]:
    st = _read_state(name, state)  # a corrupt state file is an error (exit 4), as for status
    return {sid: s.status for sid, s in st.steps.items()} if st else {}


def _revised_plan(plan: Plan, state: str | None) -> Plan:
    """The plan as last revised by the planner, if the state holds revisions."""
    st = _read_state(plan.name or "", state)  # a corrupt state file is an error (exit 4)
    if st is None or not getattr(st, "revisions", None):
        return plan
    from planrun.run.revision_check import checked_revision

    try:  # shown only when it passes the plan's checks, as resume would run it
        path = _state_path(plan.name or "", state)
        return checked_revision(plan, st.revisions, state_path=path, planner=True, variables={})
    except PlanrunError:
        return plan


@click.command()
@click.argument("plan", required=False, shell_complete=complete_plan_files)
@click.option("--state", type=click.Path(dir_okay=False))
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@guard
def status(plan: str | None, state: str | None, output: str) -> None:
    """Show the last run of PLAN: status, reason and every step."""
    from planrun.plan.validate import written_plan
    from planrun.state import no_state, render_status_text, status_document
    from planrun.text import command_shown

    found = plan_or_found(plan)  # the default plan's directory becomes the cwd
    plan, state = found.plan, found.given_path(state)
    written = written_plan(plan)
    st = _read_state(written.name, state)
    if st is None:
        path = _state_path(written.name, state)
        first = command_shown("planrun", "run", plan)
        raise no_state(written.name, path, plan, first, written.unreadable)
    if output == "json":
        click.echo(json.dumps(status_document(st), indent=2, ensure_ascii=False, default=str))
    else:
        from planrun.run.stepcounts import matrix_steps_of

        echo_view(render_status_text(st, matrix_steps_of(written.steps)))


@click.command(name="list")
@click.argument("target", required=False, shell_complete=complete_plan_files)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--var", "var", multiple=True, metavar="K=V", help="Variables the plan may read.")
@click.option("--vars-file", type=click.Path(dir_okay=False))
@click.option("--all", "every", is_flag=True, help="Internal steps too.")
@guard
def list_(
    target: str | None, output: str, var: tuple[str, ...], vars_file: str | None, every: bool
) -> None:
    """List the plans in a directory (default ./plans) with their last run status, or the
    steps of a plan file (default: ./planrun.yaml when there is no ./plans)."""
    from planrun.cli.catalog import list_plans, render_list
    from planrun.cli.steplist import list_target

    directory = list_target(target, os.getcwd())
    if directory.plan is not None:
        from planrun.cli.steplist import render_steps, step_rows

        # A plan that reads --var names checks only with them, as for `graph` and `run`.
        extra, place = _given_vars(var, vars_file), _vars_place(vars_file)
        variables = with_builtins(Found(directory.plan, started_in()), extra)
        _echo_doc(output, step_rows(directory.plan, variables, every, place), render_steps)
        return
    skipped: list[str] = []
    rows = list_plans(directory.directory, os.getcwd(), skipped)
    for note in skipped:  # on stderr: the listing (and its JSON) stays what it was
        click.echo(one_line(f"planrun: warning: {note}"), err=True)
    _echo_doc(output, rows, render_list)


@click.command()
@click.argument("words", nargs=-1, metavar="[PLAN] ID", shell_complete=complete_plan_files)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--var", "var", multiple=True, metavar="K=V", help="Variables the plan may read.")
@click.option("--vars-file", type=click.Path(dir_okay=False))
@guard
def show(words: tuple[str, ...], output: str, var: tuple[str, ...], vars_file: str | None) -> None:
    """Show one step in full, as the dry run would run it.

    Its title and description, tool, resolved args, dependencies, sources, outputs, cache
    status with its reason, approval and condition."""
    from planrun.cli.show import render_show, show_document, show_target

    found, step_id = show_target(words)  # the default plan's directory becomes the cwd
    if not os.path.exists(found.plan):
        raise UsageError(f"plan file not found: {found.plan}")
    variables, vars_file = with_builtins(found, parse_vars(var)), found.given_path(vars_file)
    doc = show_document(found.plan, step_id, variables, vars_file, os.getcwd())
    _echo_doc(output, doc, render_show)


@click.command()
@guard
def schema() -> None:
    """Print the JSON Schema of the plan format."""
    from planrun.plan.model import plan_json_schema

    click.echo(json.dumps(plan_json_schema(), indent=2))


@click.command()
@click.argument("plan", required=False)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--mcp-config", type=click.Path(dir_okay=False))
@guard
def tools(plan: str | None, output: str, mcp_config: str | None) -> None:
    """List built-in tools and the tools of PLAN's MCP servers, with input schemas."""
    from planrun.cli.catalog import list_tools, render_tools

    if plan is not None and not os.path.exists(plan):
        raise UsageError(f"plan file not found: {plan}")
    _echo_doc(output, list_tools(plan, os.getcwd(), mcp_config), render_tools)
