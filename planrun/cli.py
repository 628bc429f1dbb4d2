"""The `planrun` command line: thin click commands over the library."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from planrun.cli_options import run_options
from planrun.completion import complete_plan_files
from planrun.defaultplan import plan_or_default, split_run_args
from planrun.errors import ExitCode, PlanInvalid, PlanrunError, UsageError, exception_leaves

if TYPE_CHECKING:
    from planrun.plan import Plan

EXIT_CODES_HELP = """\b
Exit codes:
  0    success (every step succeeded, was skipped by `when`, or was ignored)
  1    the run failed (a step failed, or a budget / replan limit was hit)
  2    usage error (bad option, missing plan file)
  3    invalid plan (parse, schema, graph or reference errors; nothing ran)
  4    state error (no state to resume, corrupt or foreign state, state locked)
  5    blocked (approval needed and not given)
  130  interrupted (SIGINT/SIGTERM); state saved, `planrun resume` continues
"""

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str, code: ExitCode) -> NoReturn:
    click.echo(f"planrun: error: {message}", err=True)
    if code == ExitCode.INTERRUPTED:
        from planrun.interrupts import exit_now

        exit_now(int(code))  # no waiting for a worker thread that an interrupted run left
    sys.exit(int(code))


def _guard(fn: F) -> F:
    """Turn every error into one line and its documented exit code; never a traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return fn(*args, **kwargs)
            except BaseExceptionGroup as group:  # from a TaskGroup: what is inside decides
                raise _telling_leaf(group) from None
        except PlanInvalid as exc:
            fmt = kwargs.get("output") or kwargs.get("fmt") or "text"
            _print_diagnostics(exc.diagnostics, "json" if fmt == "json" else "text")
            sys.exit(int(exc.exit_code))
        except PlanrunError as exc:
            _error_document(kwargs, str(exc), exc.exit_code)
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            from planrun.interrupts import exit_now

            exit_now(int(ExitCode.INTERRUPTED))
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:
            sys.exit(int(ExitCode.RUN_FAILED))
        except Exception as exc:  # a bug: one line and where to report it
            message = (
                f"internal error: {type(exc).__name__}: {exc} "
                "(this is a bug in planrun; please report it with the plan that caused it)"
            )
            _error_document(kwargs, message, ExitCode.RUN_FAILED)
            _fail(message, ExitCode.RUN_FAILED)

    return wrapper  # type: ignore[return-value]


def _telling_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    """The exception an ExceptionGroup stands for: planrun's own error (a state file that
    cannot be written, from inside a step task) before Ctrl-C, an OS error, or anything."""
    leaves = exception_leaves(group)
    for kind in (PlanrunError, KeyboardInterrupt, OSError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0] if leaves else group


def _error_document(options: dict[str, Any], message: str, code: ExitCode) -> None:
    """With JSON output asked for, an error found before a result exists (exit 2, 4...) is a
    JSON document on stdout too, `{"error", "exit_code"}`, as exit 3 gives its diagnostics:
    a consumer parsing stdout always gets one document."""
    if (options.get("output") or options.get("fmt")) == "json":
        click.echo(json.dumps({"error": message, "exit_code": int(code)}, indent=2))


def _print_diagnostics(diags: list[Any], fmt: str) -> None:
    if fmt == "json":
        valid = not any(d.severity == "error" for d in diags)
        click.echo(
            json.dumps({"valid": valid, "diagnostics": [d.to_json() for d in diags]}, indent=2)
        )
    elif fmt == "github":
        from planrun.reporters.github import annotation

        for d in diags:
            click.echo(annotation(d))
    else:
        for d in diags:
            click.echo(d.render())


def _parse_vars(pairs: tuple[str, ...]) -> dict[str, Any]:
    from planrun.expressions import parse_cli_value

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--var expects KEY=VALUE, got {pair!r}")
        out[key.strip()] = parse_cli_value(value)
    return out


@click.group(epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", type=click.Path(file_okay=False), help="Run as if started in DIR.")
@click.version_option(package_name="planrun", prog_name="planrun")
def main(directory: str | None) -> None:
    """Run declarative plan files (YAML/JSON) as parallel, resumable tool-call graphs."""
    import gc

    # Loading and validating a large plan allocates many small objects that live for the
    # whole command; the default thresholds make the collector rescan them over and over.
    gc.set_threshold(100_000, 50, 100)
    if directory:
        try:
            os.chdir(directory)
        except OSError as exc:
            _fail(f"cannot change to directory {directory}: {exc.strerror}", ExitCode.USAGE)


def _report_write_failures(code: ExitCode) -> ExitCode:
    """`--events` / `--junit` files that could not be written: one line each; a run that
    succeeded exits 1, since what CI asked for is missing."""
    from planrun.reporters.failures import take_failures

    failures = take_failures()
    for failure in failures:
        click.echo(f"planrun: error: {failure}", err=True)
    return ExitCode.RUN_FAILED if failures and code == ExitCode.OK else code


def _plan_after_force(
    force: tuple[str, ...], args: tuple[str, ...]
) -> tuple[list[str], tuple[str, ...]]:
    """`run --force plan.yaml`: a plan file right after --force is the plan (and the --force is
    bare), when no plan was given otherwise; any other word after --force is a step id."""
    if args or not force or not force[0].endswith((".yaml", ".yml", ".json")):
        return list(force), args
    return ["*", *force[1:]], (force[0],)


def _do_run(force_resume: bool, **kw: Any) -> None:
    from planrun.runner import RunRequest, run_sync

    force, args = _plan_after_force(kw["force"], kw["args"])
    plan, targets = split_run_args(args, os.getcwd())
    reporter = None
    if kw["report"] and not kw["dry_run"]:
        from planrun.report import ReportOnExit, check_report_path

        if kw["no_state"]:
            raise UsageError("--report is built from the run's state: drop --no-state")
        check_report_path(kw["report"])
        reporter = ReportOnExit(kw["report"], kw["state"], os.getcwd())
    req = RunRequest(
        plan=plan,
        variables=_parse_vars(kw["var"]),
        vars_file=kw["vars_file"],
        jobs=kw["jobs"],
        state=kw["state"],
        no_state=kw["no_state"],
        resume=force_resume or kw["resume"],
        keep_going=kw["keep_going"],
        yes=kw["yes"],
        only=[*kw["only"], *targets],
        dry_run=kw["dry_run"],
        output=kw["output"],
        events=kw["events"],
        junit=kw["junit"],
        quiet=kw["quiet"],
        stream=kw["stream"],
        executor=kw["executor"],
        address=kw["address"],
        planner=kw["planner"],
        mcp_config=kw["mcp_config"],
        force=force,
        no_cache=kw["no_cache"],
        cache_dir=kw["cache_dir"],
        explain=kw["explain"],
        cwd=os.getcwd(),
        interactive=sys.stdin.isatty() and sys.stderr.isatty(),
        subscribers=[reporter.handle] if reporter else [],
    )
    try:
        doc, code = run_sync(req)
    finally:
        if reporter is not None:
            reporter.write()  # after a failure or Ctrl-C too
    code = _report_write_failures(code)
    if kw["output"] == "json":
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False, default=str))
    elif kw["dry_run"]:
        from planrun.dryrun import render_dry_run  # the dry run's own module, only for it

        click.echo(render_dry_run(doc, kw["explain"]), nl=False)
    elif code == ExitCode.BLOCKED and doc.get("reason") == "approval_required":
        click.echo(f"planrun: blocked: {doc['error']} (use --yes, or run at a terminal)", err=True)
    from planrun.interrupts import exit_now

    # The run is recorded: end now, whatever worker thread a stopped step left (a `python`
    # call or a prompt blocked in a read), so none of its effects lands after the record.
    exit_now(int(code))


@main.command(epilog=EXIT_CODES_HELP)
@run_options
@_guard
def run(**kw: Any) -> None:
    """Run PLAN as a DAG of steps."""
    _do_run(False, **kw)


@main.command(epilog=EXIT_CODES_HELP)
@run_options
@_guard
def resume(**kw: Any) -> None:
    """Continue the last run of PLAN: succeeded, unchanged steps are not run again."""
    _do_run(True, **kw)


def _vars_file(path: str) -> dict[str, Any]:
    # Imported only when used: planrun.runner brings asyncio and the run path, which
    # `validate` of a plan without --vars-file does not need.
    from planrun.runner import load_vars_file

    return load_vars_file(path, os.getcwd())


@main.command()
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
@_guard
def validate(
    plans: tuple[str, ...],
    fmt: str,
    var: tuple[str, ...],
    vars_file: str | None,
    check_tools: bool,
    mcp_config: str | None,
) -> None:
    """Check plan files: schema, references, expressions, tools, policy, cycles."""
    from planrun.validate import load_and_check

    plans = plans or (plan_or_default(None, os.getcwd()),)
    extra = {**(_vars_file(vars_file) if vars_file else {}), **_parse_vars(var)}
    servers: dict[str, Any] = {}
    if mcp_config:
        from planrun.mcp_client import parse_mcp_config

        servers = parse_mcp_config(mcp_config)
    missing = [p for p in plans if not os.path.exists(p)]
    if missing:
        raise UsageError(f"plan file not found: {missing[0]}")
    diags = []
    for path in plans:
        found = []
        try:
            checked = load_and_check(path, extra, servers=servers)
            found.extend(checked.diagnostics)
            if checked.ok:
                from planrun.dotenv import dotenv_problems

                found.extend(dotenv_problems(checked, os.getcwd()))
            if check_tools and checked.plan is not None:
                # Servers that exist are checked even when another one is unknown.
                from planrun.checktools import check_plan_tools

                found.extend(check_plan_tools(checked, os.getcwd(), extra))
        except PlanInvalid as exc:
            found.extend(exc.diagnostics)
        diags.extend(sorted(found, key=lambda d: (d.line, d.col)))  # by position, per file
    _print_diagnostics(diags, fmt)
    if any(d.severity == "error" for d in diags):
        sys.exit(int(ExitCode.INVALID_PLAN))
    if fmt == "text" and not diags:
        click.echo(f"ok: {len(plans)} plan{'s' if len(plans) != 1 else ''} valid", err=True)


@main.command()
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
@_guard
def graph(plan: str | None, fmt: str, state: str | None) -> None:
    """Show the step graph (explicit and data-flow edges, parallel waves)."""
    from planrun import graph as g
    from planrun.validate import load_plan

    p = load_plan(plan_or_default(plan, os.getcwd()))
    p = _revised_plan(p, state)
    pg = g.PlanGraph.build(p.steps)
    if any(s.foreach is not None for s in p.steps):
        from planrun.dryrun import instances_preview

        pg.instances = instances_preview(p, dict(p.variables))
    if fmt == "json":
        click.echo(json.dumps(g.render_json(p.name or "", pg), indent=2))
    elif fmt == "mermaid":
        click.echo(g.render_mermaid(pg), nl=False)
    elif fmt == "dot":
        click.echo(g.render_dot(p.name or "", pg), nl=False)
    else:
        statuses = _last_statuses(p.name or "", state)
        click.echo(g.render_ascii(pg, statuses), nl=False)


def _state_path(name: str, state: str | None) -> str:
    from planrun.state import default_state_path

    return state if state else str(default_state_path(os.getcwd(), name))


def _read_state(name: str, state: str | None) -> Any:
    from pathlib import Path

    from planrun.state import read_state

    return read_state(Path(_state_path(name, state)), name)


def _last_statuses(name: str, state: str | None) -> dict[str, str]:
    st = _read_state(name, state)  # a corrupt state file is an error (exit 4), as for status
    return {sid: s.status for sid, s in st.steps.items()} if st else {}


def _revised_plan(plan: Plan, state: str | None) -> Plan:
    """The plan as last revised by the planner, if the state holds revisions."""
    st = _read_state(plan.name or "", state)  # a corrupt state file is an error (exit 4)
    if st is None or not getattr(st, "revisions", None):
        return plan
    from planrun.revision_check import checked_revision

    try:  # shown only when it passes the plan's checks, as resume would run it
        path = _state_path(plan.name or "", state)
        return checked_revision(plan, st.revisions, state_path=path, planner=True, variables={})
    except PlanrunError:
        return plan


@main.command()
@click.argument("plan", required=False, shell_complete=complete_plan_files)
@click.option("--state", type=click.Path(dir_okay=False))
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_guard
def status(plan: str | None, state: str | None, output: str) -> None:
    """Show the last run of PLAN: status, reason and every step."""
    from planrun.state import render_status_text, status_document
    from planrun.validate import default_name, load_plan

    plan = plan_or_default(plan, os.getcwd())
    try:
        name = load_plan(plan).name or default_name(plan)
    except PlanInvalid:
        name = default_name(plan)
    st = _read_state(name, state)
    if st is None:
        from planrun.errors import StateError

        raise StateError(
            f"no state for plan '{name}' at {_state_path(name, state)}: run it first with 'planrun run {plan}'"
        )
    if output == "json":
        click.echo(json.dumps(status_document(st), indent=2, ensure_ascii=False, default=str))
    else:
        click.echo(render_status_text(st), nl=False)


@main.command(name="list")
@click.argument("target", required=False, shell_complete=complete_plan_files)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_guard
def list_(target: str | None, output: str) -> None:
    """List the plans in a directory (default ./plans) with their last run status, or the
    steps of a plan file (default: ./planrun.yaml when there is no ./plans)."""
    from planrun.catalog import list_plans, render_list
    from planrun.steplist import list_target

    directory = list_target(target, os.getcwd())
    if directory.plan is not None:
        from planrun.steplist import render_steps, step_rows

        doc = step_rows(directory.plan)
        if output == "json":
            click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            click.echo(render_steps(doc), nl=False)
        return
    rows = list_plans(directory.directory, os.getcwd())
    if output == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        click.echo(render_list(rows), nl=False)


def _cache_group() -> None:
    from planrun.cli_cache import make_cache_group

    main.add_command(make_cache_group(_guard), name="cache")


_cache_group()


@main.command()
@_guard
def schema() -> None:
    """Print the JSON Schema of the plan format."""
    from planrun.model import plan_json_schema

    click.echo(json.dumps(plan_json_schema(), indent=2))


@main.command()
@click.argument("plan", required=False)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--mcp-config", type=click.Path(dir_okay=False))
@_guard
def tools(plan: str | None, output: str, mcp_config: str | None) -> None:
    """List built-in tools and the tools of PLAN's MCP servers, with input schemas."""
    from planrun.catalog import list_tools, render_tools

    if plan is not None and not os.path.exists(plan):
        raise UsageError(f"plan file not found: {plan}")
    rows = list_tools(plan, os.getcwd(), mcp_config)
    if output == "json":
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
    else:
        click.echo(render_tools(rows), nl=False)


@main.command()
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP instead of stdio.")
@_guard
def mcp(http: str | None) -> None:
    """Serve planrun itself as an MCP server (stdio by default)."""
    from planrun.mcp_server import serve

    serve(http)


# completion, init and report: the conveniences' commands live in a module of their own
from planrun.cli_conveniences import add_commands  # noqa: E402 - needs main and _guard above

add_commands(main, _guard)

if __name__ == "__main__":
    main()
