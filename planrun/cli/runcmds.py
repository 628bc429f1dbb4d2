"""`planrun run` and `planrun resume`: alone in their module, so a run builds no other command."""

from __future__ import annotations

from typing import Any

import click

from planrun.cli.edge import EXIT_CODES_HELP, do_run, guard
from planrun.cli.options import RunCommand, run_options
from planrun.plan.passthrough import given_cli_args


@click.command(cls=RunCommand, epilog=EXIT_CODES_HELP)
@run_options
@guard
def run(**kw: Any) -> None:
    """Run PLAN as a DAG of steps.

    Words after `--` are the list `cli_args` the plan's steps may read.
    """
    do_run(False, cli_args=given_cli_args(), **kw)


@click.command(cls=RunCommand, epilog=EXIT_CODES_HELP)
@run_options
@guard
def resume(**kw: Any) -> None:
    """Continue the last run of PLAN: succeeded, unchanged steps are not run again."""
    do_run(True, cli_args=given_cli_args(), **kw)
