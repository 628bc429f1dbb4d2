"""The options of `planrun run` and `planrun resume` as data, and a click-free reader for them.

`cli_options` builds the click options from RUN_OPTIONS, so click (help, completion, errors)
and `read_run_args` read the one table. `read_run_args` takes only what it can read exactly as
click does — long options (`--jobs 2`, `--jobs=2`), `-j N`, `-q`, `-y` and plain arguments,
with values click would accept — and answers None for anything else (an unknown or malformed
option, `--force`, `--`, a value click would refuse), which then goes to click, so its answers
and its error messages stay the only ones. A plain run then needs no click at all.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

__all__ = ["RUN_OPTIONS", "Opt", "read_run_args"]

FLAG, TEXT, JOBS, FILE, DIR, CHOICE, OPTIONAL = (
    "flag",
    "text",
    "jobs",
    "file",
    "dir",
    "choice",
    "optional",
)


class Opt(NamedTuple):
    """One option: its words, the parameter it sets, what it takes, and its help (a NamedTuple:
    a dataclass would cost ~0.5 ms more on every start-up, for plain data)."""

    decls: tuple[str, ...]  # as click declares it: "--yes", "-y" (and a name: "var")
    dest: str
    kind: str = TEXT  # flag | text | jobs (an int >= 1) | file | dir | choice | optional
    help: str | None = None
    multiple: bool = False
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    default: Any = None
    complete_steps: bool = False  # shell completion offers the plan's step ids


RUN_OPTIONS: tuple[Opt, ...] = (
    Opt(("--dry-run",), "dry_run", FLAG, "Validate and show what would run; run nothing."),
    Opt(
        ("--var", "var"),
        "var",
        TEXT,
        "Set a variable (value parsed as YAML).",
        multiple=True,
        metavar="K=V",
    ),
    Opt(("--vars-file",), "vars_file", FILE, "YAML/JSON mapping of variables."),
    Opt(("-j", "--jobs"), "jobs", JOBS, "Steps at once (default: CPUs)."),
    Opt(("--state",), "state", FILE, "State file (default .planrun/state/NAME.json)."),
    Opt(("--no-state",), "no_state", FLAG, "Keep no state (throw-away run)."),
    Opt(("--resume",), "resume", FLAG, "Continue the last run (same as `planrun resume`)."),
    Opt(("--keep-going",), "keep_going", FLAG, "Treat on_failure: abort as continue."),
    Opt(("--yes", "-y"), "yes", FLAG, "Approve every step that needs approval."),
    Opt(
        ("--only",),
        "only",
        TEXT,
        "Only these steps and what they depend on.",
        multiple=True,
        metavar="ID",
        complete_steps=True,
    ),
    Opt(("--output",), "output", CHOICE, choices=("text", "json"), default="text"),
    Opt(("--events",), "events", FILE, "Append JSON Lines events to FILE."),
    Opt(("--junit",), "junit", FILE, "Write a JUnit XML report to FILE."),
    Opt(("--report",), "report", FILE, "Write an HTML run report to FILE when the run ends."),
    Opt(("--quiet", "-q"), "quiet", FLAG, "Only failures and the summary."),
    Opt(("--stream",), "stream", FLAG, "Print output lines live, prefixed [step-id]."),
    Opt(("--executor",), "executor", CHOICE, "Where steps run.", choices=("local", "dask")),
    Opt(("--address",), "address", TEXT, "Dask scheduler address (tcp://HOST:8786)."),
    Opt(("--planner",), "planner", TEXT, "Replanning command (overrides the plan's replan:)."),
    Opt(("--mcp-config",), "mcp_config", FILE, "Load MCP servers from an mcpServers JSON file."),
    Opt(
        ("--force",),
        "force",
        OPTIONAL,  # `--force` alone means every step: its value is optional
        "Run steps even when the cache has them: all, or the step ID (repeatable).",
        multiple=True,
        metavar="[ID]",
        complete_steps=True,
    ),
    Opt(("--no-cache",), "no_cache", FLAG, "Neither read nor write the cache."),
    Opt(
        ("--cache-dir",),
        "cache_dir",
        DIR,
        "Cache directory (default $PLANRUN_CACHE_DIR, else .planrun/cache).",
    ),
    Opt(("--explain",), "explain", FLAG, "Say for every step why it runs or not."),
    Opt(
        ("--remote-cache",),
        "remote_cache",
        TEXT,
        "Remote cache URL (default $PLANRUN_REMOTE_CACHE).",
        metavar="URL",
    ),
    Opt(
        ("--remote-cache-read-only",),
        "remote_cache_read_only",
        FLAG,
        "Read the remote cache; never upload to it.",
    ),
    Opt(
        ("--remote-cache-timeout",),
        "remote_cache_timeout",
        TEXT,
        "Seconds a remote cache request may take (default 5).",
        metavar="SECONDS",
    ),
    Opt(
        ("--grace",),
        "grace",
        TEXT,
        "On Ctrl-C, how long running steps get to end before they are killed (default: the "
        "plan's grace, else 10s).",
        metavar="DURATION",
    ),
)

_BY_WORD = {d: opt for opt in RUN_OPTIONS for d in opt.decls if d.startswith("-")}


def read_run_args(args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments click would pass to `run`/`resume` for `args`, or None when
    they are not all plain (click then reads them, and reports any mistake)."""
    values: dict[str, Any] = {}
    positional: list[str] = []
    rest = iter(args)
    for word in rest:
        if not word.startswith("-") or word == "-":
            if word == "-":
                return None
            positional.append(word)
            continue
        name, eq, inline = word.partition("=")
        opt = _BY_WORD.get(name)
        if opt is None or opt.kind == OPTIONAL or (eq and not name.startswith("--")):
            return None  # unknown, `--force`, `-j=2`, `--`, `-qy`, `-j2`, `--help`...
        if opt.kind == FLAG:
            if eq:
                return None
            values[opt.dest] = True
            continue
        raw = inline if eq else next(rest, None)
        value = None if raw is None or (not eq and raw.startswith("-")) else _value(opt, raw)
        if value is None:
            return None
        if opt.multiple:
            values.setdefault(opt.dest, []).append(value)
        else:
            values[opt.dest] = value
    return _complete(values, positional)


def _value(opt: Opt, raw: str) -> Any:
    """`raw` converted as click's type for `opt` would, or None when click might refuse it."""
    if opt.kind == TEXT:
        return raw
    if opt.kind == JOBS:
        return int(raw) if raw.isascii() and raw.isdigit() and int(raw) >= 1 else None
    if opt.kind == CHOICE:
        return raw if raw in opt.choices else None
    # click.Path: a path that exists must be readable and of the right kind; else it is refused.
    if opt.kind == FILE and (os.path.isdir(raw) or (os.path.exists(raw) and not _readable(raw))):
        return None
    if opt.kind == DIR and os.path.exists(raw) and not (os.path.isdir(raw) and _readable(raw)):
        return None
    return raw


def _readable(path: str) -> bool:
    return os.access(path, os.R_OK)


def _complete(values: dict[str, Any], positional: list[str]) -> dict[str, Any]:
    """Every parameter as click hands it over: defaults, tuples for the repeatable ones."""
    params: dict[str, Any] = {}
    for opt in RUN_OPTIONS:
        if opt.multiple:
            params[opt.dest] = tuple(values.get(opt.dest, ()))
        elif opt.kind == FLAG:
            params[opt.dest] = values.get(opt.dest, False)
        else:
            params[opt.dest] = values.get(opt.dest, opt.default)
    params["args"] = tuple(positional)
    return params
