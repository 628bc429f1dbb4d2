"""The options of `planrun run` and `planrun resume`: click options, in help order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from planrun.cli.completion import complete_run_args, complete_step_ids
from planrun.plan.passthrough import PassThroughCommand
from planrun.plan.targets import ALL_FORCED

F = TypeVar("F", bound=Callable[..., Any])

_FILE = click.Path(dir_okay=False)

RUN_OPTIONS = [
    click.argument("args", nargs=-1, metavar="[PLAN] [ID]...", shell_complete=complete_run_args),
    click.option("--dry-run", is_flag=True, help="Validate and show what would run; run nothing."),
    click.option(
        "--var", "var", multiple=True, metavar="K=V", help="Set a variable (value parsed as YAML)."
    ),
    click.option("--vars-file", type=_FILE, help="YAML/JSON mapping of variables."),
    click.option("-j", "--jobs", type=click.IntRange(min=1), help="Steps at once (default: CPUs)."),
    click.option("--state", type=_FILE, help="State file (default .planrun/state/NAME.json)."),
    click.option("--no-state", is_flag=True, help="Keep no state (throw-away run)."),
    click.option(
        "--resume", is_flag=True, help="Continue the last run (same as `planrun resume`)."
    ),
    click.option("--keep-going", is_flag=True, help="Treat on_failure: abort as continue."),
    click.option("--yes", "-y", is_flag=True, help="Approve every step that needs approval."),
    click.option(
        "--only",
        multiple=True,
        metavar="ID",
        shell_complete=complete_step_ids,
        help="Only these steps and what they depend on.",
    ),
    click.option(
        "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
    ),
    click.option("--events", type=_FILE, help="Append JSON Lines events to FILE."),
    click.option("--junit", type=_FILE, help="Write a JUnit XML report to FILE."),
    click.option(
        "--report", type=_FILE, help="Write an HTML run report to FILE when the run ends."
    ),
    click.option("--quiet", "-q", is_flag=True, help="Only failures and the summary."),
    click.option("--stream", is_flag=True, help="Print output lines live, prefixed [step-id]."),
    click.option("--executor", type=click.Choice(["local", "dask"]), help="Where steps run."),
    click.option("--address", help="Dask scheduler address (tcp://HOST:8786)."),
    click.option("--planner", help="Replanning command (overrides the plan's replan:)."),
    click.option("--mcp-config", type=_FILE, help="Load MCP servers from an mcpServers JSON file."),
    click.option(
        "--force",
        multiple=True,
        is_flag=False,
        flag_value=ALL_FORCED,  # never taken: RunCommand makes a bare --force `--force=*`
        metavar="[=ID]",
        shell_complete=complete_step_ids,
        help="Run the selected steps even when the cache has them; --force=ID: that step, "
        "when selected (repeatable).",
    ),
    click.option("--no-cache", is_flag=True, help="Neither read nor write the cache."),
    click.option(
        "--cache-dir",
        type=click.Path(file_okay=False),
        help="Cache directory (default $PLANRUN_CACHE_DIR, else .planrun/cache).",
    ),
    click.option("--explain", is_flag=True, help="Say for every step why it runs or not."),
    click.option(
        "--grace",
        metavar="DURATION",
        help="On Ctrl-C, how long running steps get to end before they are killed (default: "
        "the plan's grace, else 10s).",
    ),
    click.option(
        "--watch",
        is_flag=True,
        help="After the run, run again when a source, the plan or a dotenv file changes.",
    ),
    click.option(
        "--remote-cache", metavar="URL", help="Remote cache URL (default $PLANRUN_REMOTE_CACHE)."
    ),
    click.option(
        "--remote-cache-read-only", is_flag=True, help="Read the remote cache; never upload to it."
    ),
    click.option(
        "--remote-cache-timeout",
        metavar="SECONDS",
        help="Seconds a remote cache request may take (default 5).",
    ),
]


def run_options(fn: F) -> F:
    """`fn` with every option of a run, in help order."""
    for option in reversed(RUN_OPTIONS):
        fn = option(fn)
    return fn


class RunCommand(PassThroughCommand):
    """`run` and `resume`: `--force` is a flag, and only `--force=ID` takes a value, so that
    `run --force test` forces the target `test` (the word after a bare --force is never its
    value). A bare --force is given to click as `--force=*` (ALL_FORCED). The words after
    `--` are the plan's `cli_args` (planrun.plan.passthrough)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, bare_force_marked(args, self._value_options(ctx)))

    def _value_options(self, ctx: click.Context) -> set[str]:
        """The option names whose value is the next word (`--var K=V`, `--state PATH`)."""
        names: set[str] = set()
        for param in self.get_params(ctx):
            if isinstance(param, click.Option) and not param.is_flag and param.nargs == 1:
                names.update(param.opts)
        return names


def bare_force_marked(args: list[str], value_options: set[str]) -> list[str]:
    """`args` with each bare `--force` written `--force=*` (not a value of another option,
    nor a word after `--`)."""
    out: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--":
            out.append(word)
            out.extend(words)
            break
        if word == "--force":
            out.append(f"--force={ALL_FORCED}")
            continue
        out.append(word)
        if word in value_options:
            value = next(words, None)  # its value, as it is (`--var --force` sets a variable)
            if value is not None:
                out.append(value)
    return out
