"""The options of `planrun run` and `planrun resume` (click), built from planrun.runargs's table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from planrun.completion import complete_run_args, complete_step_ids
from planrun.runargs import CHOICE, DIR, FILE, FLAG, JOBS, OPTIONAL, RUN_OPTIONS, Opt

F = TypeVar("F", bound=Callable[..., Any])


def _click_option(opt: Opt) -> Callable[[F], F]:
    kw: dict[str, Any] = {"help": opt.help, "multiple": opt.multiple, "metavar": opt.metavar}
    if opt.kind == FLAG:
        kw["is_flag"] = True
    elif opt.kind == OPTIONAL:
        kw.update(is_flag=False, flag_value="*")
    elif opt.kind == JOBS:
        kw["type"] = click.IntRange(min=1)
    elif opt.kind == FILE:
        kw["type"] = click.Path(dir_okay=False)
    elif opt.kind == DIR:
        kw["type"] = click.Path(file_okay=False)
    elif opt.kind == CHOICE:
        kw["type"] = click.Choice(list(opt.choices))
    if opt.default is not None:
        kw.update(default=opt.default, show_default=True)
    if opt.complete_steps:
        kw["shell_complete"] = complete_step_ids
    return click.option(*opt.decls, **kw)


RUN_OPTIONS_CLICK = [
    click.argument("args", nargs=-1, metavar="[PLAN] [ID]...", shell_complete=complete_run_args),
    *(_click_option(opt) for opt in RUN_OPTIONS),
]


def run_options(fn: F) -> F:
    """`fn` with every option of a run, in help order."""
    for option in reversed(RUN_OPTIONS_CLICK):
        fn = option(fn)
    return fn
