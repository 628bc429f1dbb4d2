"""Finding the default plan up the directory tree (as go-task and just find theirs), and the
directory planrun was started in (`${invocation_dir}`).

Without PLAN, a default-plan command looks for planrun.yaml, planrun.yml or planrun.json in the
working directory and then in each parent directory, up to the filesystem root, never through a
directory it may not read. The directory where one is found becomes the working directory, so
the plan's relative paths, its state and its stat records are where the plan is. Paths given on
the command line stay relative to where planrun was started (`Found.given_path`). In
`run [PLAN] [ID ...]` the first argument is PLAN when it looks like one (`looks_like_plan`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from planrun.errors import UsageError

DEFAULT_PLAN_NAMES = ("planrun.yaml", "planrun.yml", "planrun.json")
PLAN_EXTENSIONS = (".yaml", ".yml", ".json")
INVOCATION_DIR = "invocation_dir"

NOT_FOUND = (
    "no plan given and no planrun.yaml, planrun.yml or planrun.json in this directory or any "
    "parent directory (name a plan file, or create one with 'planrun init')"
)


def find_default_plan(cwd: str) -> str | None:
    """The first of planrun.yaml, planrun.yml, planrun.json that exists in `cwd`, or None."""
    for name in DEFAULT_PLAN_NAMES:
        if os.path.exists(os.path.join(cwd, name)):
            return name
    return None


def given_plan(plan: str, cwd: str) -> str:
    """PLAN as given; UsageError when it does not exist."""
    if not os.path.exists(os.path.join(cwd, plan)):
        raise UsageError(f"plan file not found: {plan}")
    return plan


def looks_like_plan(arg: str, cwd: str) -> bool:
    """True when `arg` names an existing file or ends in .yaml, .yml or .json (else: a step id)."""
    if arg.lower().endswith(PLAN_EXTENSIONS):
        return True
    path = os.path.join(cwd, arg)
    return os.path.exists(path) and not os.path.isdir(path)


class Found(NamedTuple):
    """The plan a command uses, and where planrun was started (the working directory before
    the move to the plan's directory, if any)."""

    plan: str
    invocation_dir: str
    moved: bool = False

    def given_path(self, path: str | None) -> str | None:
        """A path from the command line, as the user meant it: relative to `invocation_dir`."""
        if path is None or path == "-" or not self.moved or os.path.isabs(path):
            return path
        return os.path.join(self.invocation_dir, path)

    def variables(self) -> dict[str, Any]:
        """planrun's own variables: `invocation_dir`."""
        return {INVOCATION_DIR: self.invocation_dir}


def started_in() -> str:
    """The working directory (UsageError when it no longer exists)."""
    try:
        return os.getcwd()
    except OSError as exc:
        raise UsageError(f"cannot read the working directory: {exc.strerror or exc}") from None


def find_plan_upwards(start: str) -> tuple[str, str] | None:
    """(directory, file name) of the first default plan in `start` or one of its parents, or
    None. The search stops at the filesystem root and before a directory it cannot read."""
    if not os.path.isdir(start):
        return None
    directory = start
    while True:
        found = find_default_plan(directory)
        if found is not None:
            return directory, found
        parent = os.path.dirname(directory)
        if parent == directory or not os.access(parent, os.R_OK | os.X_OK):
            return None
        directory = parent


def enter_default_plan() -> Found:
    """The default plan, found here or above; its directory becomes the working directory."""
    start = started_in()
    found = find_plan_upwards(start)
    if found is None:
        raise UsageError(NOT_FOUND)
    directory, name = found
    if directory == start:
        return Found(name, start)
    try:
        os.chdir(directory)
    except OSError as exc:
        raise UsageError(f"cannot change to directory {directory}: {exc.strerror}") from None
    return Found(name, start, moved=True)


def plan_or_found(plan: str | None) -> Found:
    """PLAN as given (it must exist; nothing is looked up), else the default plan found."""
    if plan is None:
        return enter_default_plan()
    start = started_in()
    return Found(given_plan(plan, start), start)


def split_run_args(args: tuple[str, ...] | list[str]) -> tuple[Found, list[str]]:
    """(plan, targets) from `run [PLAN] [ID ...]`: the first argument is PLAN when it looks like
    one; otherwise every argument is a target of the default plan, found here or above."""
    start = started_in()
    if args and looks_like_plan(args[0], start):
        return Found(given_plan(args[0], start), start), list(args[1:])
    return enter_default_plan(), list(args)


def with_builtins(found: Found, variables: Mapping[str, Any]) -> dict[str, Any]:
    """`variables` (from --var) over planrun's own variables: `--var invocation_dir=...` wins."""
    return {**found.variables(), **variables}
