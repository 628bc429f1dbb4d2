"""The `planrun` group: a table of its commands, each imported from its module only when used."""

from __future__ import annotations

# A command's module is imported by `get_command` (click's lazy group): `planrun run` builds the
# options of `run` and `resume` and no other command's, and `planrun --help` none at all.
import importlib
import os

import click

from planrun.cli.completion import COMPLETE_VAR
from planrun.cli.edge import EXIT_CODES_HELP, fail
from planrun.errors import ExitCode

# name: (the click command, as `module.attribute` in planrun.cli; its one line in `planrun
# --help` and in shell completion). The one place of each short help: a command's docstring is
# its own `--help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "cache": ("cache.cache", "Inspect, empty or trim the cache of step results and outputs."),
    "completion": ("conveniences.completion", "Print the shell completion script for SHELL."),
    "graph": ("queries.graph", "Show the step graph and its parallel waves."),
    "init": ("conveniences.init", "Write a commented starter plan; never overwrites a file."),
    "list": ("queries.list_", "List the plans in a directory, or the steps of a plan."),
    "mcp": ("conveniences.mcp", "Serve planrun itself as an MCP server (stdio by default)."),
    "report": ("conveniences.report", "Write an HTML report of the last run of PLAN."),
    "resume": ("runcmds.resume", "Continue the last run of PLAN where it stopped."),
    "run": ("runcmds.run", "Run PLAN as a DAG of steps."),
    "schema": ("queries.schema", "Print the JSON Schema of the plan format."),
    "show": ("queries.show", "Show one step in full, as the dry run would run it."),
    "status": ("queries.status", "Show the last run of PLAN: status, reason and every step."),
    "tools": ("queries.tools", "List built-in tools and the tools of PLAN's MCP servers."),
    "validate": ("queries.validate", "Check plan files without running anything."),
}


class LazyGroup(click.Group):
    """A group whose commands are the table's, each loaded from its module when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        where, short_help = COMMANDS[cmd_name]
        module, _, name = where.rpartition(".")
        command: click.Command = getattr(importlib.import_module(f"planrun.cli.{module}"), name)
        command.short_help = short_help
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help, read from the table: no module is imported."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:  # "did you mean" from the table
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


if COMPLETE_VAR in os.environ:  # answering the shell: planrun's own bash and fish protocols
    from planrun.cli.completion_shells import register

    register()


@click.group(
    cls=LazyGroup,
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "-C",
    "directories",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Run as if started in DIR (each -C relative to the one before, as with make and git).",
)
@click.version_option(package_name="planrun", prog_name="planrun")
def main(directories: tuple[str, ...]) -> None:
    """Run declarative plan files (YAML/JSON) as parallel, resumable tool-call graphs."""
    for directory in directories:
        try:
            os.chdir(directory)
        except OSError as exc:
            fail(f"cannot change to directory {directory}: {exc.strerror}", ExitCode.USAGE)
