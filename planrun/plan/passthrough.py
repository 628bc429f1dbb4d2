"""Pass-through arguments: `planrun run [PLAN] [TARGET...] -- ARGS...` gives the plan the list
`cli_args` (the words after `--`; empty without it), read like any variable (`pytest
${cli_args}`: in a shell string each word is quoted by its context).
"""

from __future__ import annotations

from typing import Any

import click

from planrun.plan.params import CLI_ARGS


def split_pass_through(args: list[str]) -> tuple[list[str], list[str]]:
    """(the words before the first `--`, the words after it: [] without one)."""
    if "--" not in args:
        return list(args), []
    at = args.index("--")
    return list(args[:at]), list(args[at + 1 :])


class PassThroughCommand(click.Command):
    """A click command that keeps the words after `--` for the plan (`ctx.meta[CLI_ARGS]`)
    instead of reading them as its own positional arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        own, ctx.meta[CLI_ARGS] = split_pass_through(args)
        return super().parse_args(ctx, own)


def given_cli_args() -> list[str]:
    """The words after `--` of the command being run ([] outside one)."""
    ctx: Any = click.get_current_context(silent=True)
    return list(ctx.meta.get(CLI_ARGS, [])) if ctx is not None else []
