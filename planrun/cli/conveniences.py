"""The conveniences' commands: `completion`, `init`, `report` and `mcp` (thin, over their modules)."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the report (jinja2) and the starter plan only
# for `report` and `init`, the MCP server for `mcp`.
import os

import click

from planrun.cli.completion import complete_plan_files, completion_script
from planrun.cli.edge import guard
from planrun.errors import UsageError
from planrun.plan.discovery import find_default_plan, plan_or_found


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@guard
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL (see the README for where to put it)."""
    click.echo(completion_script(click.get_current_context().find_root().command, shell), nl=False)


@click.command()
@click.argument("file", required=False)
@guard
def init(file: str | None) -> None:
    """Write a commented starter plan to FILE (default planrun.yaml); never overwrites."""
    from planrun.cli.starter import write_starter

    if file is None:
        file = "planrun.yaml"
        # beside a planrun.yml or planrun.json, a new planrun.yaml would silently become
        # the default plan in its place
        found = find_default_plan(os.getcwd())
        if found is not None and found != file:
            raise UsageError(
                f"{found} is already the default plan here: not writing planrun.yaml, "
                "which would take its place (name another file: planrun init FILE)"
            )
    write_starter(file)
    wrote = f"{file}{_schema_beside(file)}"
    named = "" if file == "planrun.yaml" else f" {file}"
    click.echo(f"wrote {wrote}; next: planrun list{named}, planrun run{named}", err=True)


@click.command()
@click.argument("plan", required=False, shell_complete=complete_plan_files)
@click.option(
    "-o",
    "--output",
    "out",
    default="planrun-report.html",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The HTML file to write (- for stdout).",
)
@click.option("--state", type=click.Path(dir_okay=False), help="Read this state file.")
@guard
def report(plan: str | None, out: str, state: str | None) -> None:
    """Write an HTML report of the last run of PLAN: timeline, steps, errors and output."""
    from planrun.report import check_report_path, report_for_plan, write_report

    found = plan_or_found(plan)  # the default plan's directory becomes the cwd
    plan, state, out = found.plan, found.given_path(state), found.given_path(out) or out
    if out == "-":  # stdout, as `-` means to every command-line tool
        click.echo(report_for_plan(plan, state, os.getcwd()), nl=False)
        return
    check_report_path(out)
    write_report(out, report_for_plan(plan, state, os.getcwd(), out))
    click.echo(f"wrote {out}", err=True)


def _schema_beside(plan: str) -> str:
    """Write plan.schema.json beside a YAML plan (its first line names that file); what to add
    to the "wrote ..." line. A schema that cannot be written is a warning: the plan stands."""
    from planrun.plan.schemafile import schema_path, write_schema_beside

    if plan.lower().endswith(".json"):
        return ""  # no comment line in JSON, so no file to name
    path = schema_path(plan)
    try:
        written = write_schema_beside(plan)
    except OSError as exc:
        click.echo(
            f"planrun: warning: cannot write {path}: {exc.strerror or exc} "
            f"(editors check the plan with it; later: planrun schema > {path})",
            err=True,
        )
        return ""
    return f" and {path}" if written else f" (kept the {path} already there)"


@click.command()
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP instead of stdio.")
@guard
def mcp(http: str | None) -> None:
    """Serve planrun itself as an MCP server (stdio by default)."""
    from planrun.mcp.server import serve

    serve(http)
