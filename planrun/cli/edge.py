"""What the `planrun` command does around a command: one line and its exit code for every
error (`guard`), the exit codes' help, and `run`/`resume` themselves (`do_run`), for the click commands
of planrun.cli.
"""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the runner, the dry run, the report and the
# GitHub reporter only for the command that uses them.
import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any, NoReturn, TypeVar

import click

from planrun.errors import (
    ExitCode,
    ExitNow,
    PlanInvalid,
    PlanrunError,
    UsageError,
    exception_leaves,
    one_line,
)

__all__ = ["EXIT_CODES_HELP", "do_run", "fail", "guard", "parse_vars", "print_diagnostics"]

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = """\b
Exit codes:
  0    success (every step succeeded, was skipped by `when`, or was ignored)
  1    the run failed (a step failed, or a budget / replan limit was hit)
  2    usage error (bad option, missing plan file)
  3    invalid plan (parse, schema, graph or reference errors; nothing ran)
  4    state error (no state to resume, corrupt or foreign state, state locked)
  5    blocked (approval needed and not given)
  130  interrupted (SIGINT/SIGTERM/SIGHUP); state saved, `resume` continues
"""


def fail(message: str, code: ExitCode) -> NoReturn:
    click.echo(one_line(f"planrun: error: {message}"), err=True)  # input it quotes stays one line
    if code == ExitCode.INTERRUPTED:
        raise ExitNow(code)  # no waiting for a worker thread that an interrupted run left
    sys.exit(int(code))


def guard(fn: F) -> F:
    """Turn every error into one line and its documented exit code; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return fn(*args, **kwargs)
            except BaseExceptionGroup as group:  # from a TaskGroup: what is inside decides
                raise _telling_leaf(group) from None
        except PlanInvalid as exc:
            fmt = kwargs.get("output") or kwargs.get("fmt") or "text"
            try:
                print_diagnostics(exc.diagnostics, "json" if fmt == "json" else "text")
            except OSError as lost:
                if not _stdout_lost(lost):
                    raise
                fail(f"cannot write to standard output: {lost.strerror or lost}", exc.exit_code)
            sys.exit(int(exc.exit_code))
        except PlanrunError as exc:
            _error_document(kwargs, str(exc), exc.exit_code)
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            raise ExitNow(ExitCode.INTERRUPTED) from None
        except SystemExit:
            raise
        except BrokenPipeError:
            sys.exit(int(ExitCode.RUN_FAILED))
        except Exception as exc:  # a bug: one line and where to report it
            if isinstance(exc, click.exceptions.Exit | click.ClickException):
                raise  # its exit, a usage error: click itself handles them
            if isinstance(exc, OSError) and _stdout_lost(exc):  # a full disk, not a bug
                fail(f"cannot write to standard output: {exc.strerror or exc}", ExitCode.RUN_FAILED)
            message = (
                f"internal error: {type(exc).__name__}: {exc} "
                "(this is a bug in planrun; please report it with the plan that caused it)"
            )
            _error_document(kwargs, message, ExitCode.RUN_FAILED)
            fail(message, ExitCode.RUN_FAILED)

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
        try:
            click.echo(json.dumps({"error": message, "exit_code": int(code)}, indent=2))
        except OSError as exc:
            if not _stdout_lost(exc):
                raise  # the error's line on stderr and its exit code say it all the same


def _stdout_lost(exc: OSError) -> bool:
    """Whether `exc` is a write to standard output that failed (a full disk: what it held is
    lost); if so, standard output is pointed at /dev/null, so nothing fails again at exit.
    Every write to it goes through click.echo, whose frame says which stream it wrote."""
    tb, stream = exc.__traceback__, None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "echo" and frame.f_globals.get("__name__") == "click.utils":
            stream = frame.f_locals.get("file")
        tb = tb.tb_next
    try:
        if stream is None or stream.fileno() != sys.stdout.fileno():
            return False
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # a stream without a descriptor
        return False
    return True


def print_diagnostics(diags: list[Any], fmt: str) -> None:
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


def parse_vars(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`--var K=V` pairs: each V as typed (planrun.plan.params reads it once the plan is known: a
    param's type, else YAML)."""
    from planrun.plan.params import GivenText

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            # Not echoed: `--var "$TOKEN"` (the name forgotten) would print a secret to a log.
            what = "no '='" if not sep else "no name before '='"
            raise UsageError(f"--var expects KEY=VALUE: an argument has {what}")
        out[key.strip()] = GivenText(value)
    return out


def _report_write_failures(failures: list[str], code: ExitCode) -> ExitCode:
    """`--events` / `--junit` files that could not be written: one line each; a run that
    succeeded exits 1, since what CI asked for is missing."""
    for failure in failures:
        click.echo(f"planrun: error: {failure}", err=True)
    return ExitCode.RUN_FAILED if failures and code == ExitCode.OK else code


_GIVEN_PATHS = ("vars_file", "state", "events", "junit", "report", "mcp_config", "cache_dir")


def _grace(text: str | None) -> float | None:
    """`--grace DURATION`, read as the plan's durations are; a bad one is a usage error."""
    if text is None:
        return None
    from planrun.plan.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--grace: {exc}") from None


def _planner(command: str | None) -> str | None:
    """`--planner COMMAND`: a command that names no program is a usage error."""
    if command is None:
        return None
    from planrun.plan.definition import planner_argv

    try:
        planner_argv(command)
    except ValueError as exc:
        raise UsageError(f"--planner: {exc}") from None
    return command


def do_run(force_resume: bool, **kw: Any) -> None:
    """`planrun run` (`force_resume`: `planrun resume`) with click's keyword arguments."""
    from planrun.plan.discovery import split_run_args

    force = list(kw["force"])  # `*`: a bare --force (cli_options.RunCommand)
    found, targets = split_run_args(kw["args"])  # the default plan's directory becomes the cwd
    kw = {**kw, **{name: found.given_path(kw[name]) for name in _GIVEN_PATHS}}
    if kw.get("watch"):  # watched from before the first run: a change during it counts
        from planrun.run.watch import watch_runs, watch_scope

        scope = watch_scope(found, [*kw["only"], *targets], parse_vars(kw["var"]), kw["vars_file"])
        first = lambda: _run_once(force_resume, found, targets, force, kw)  # noqa: E731
        code = watch_runs(scope, first, lambda: _rerun(found, targets, force, kw))
    else:
        code = _run_once(force_resume, found, targets, force, kw)
    # The run is recorded: the process ends now (planrun.__main__), whatever worker thread a
    # stopped step left (a `python` call or a prompt blocked in a read), so none of its effects
    # lands after the record.
    raise ExitNow(code)


def _rerun(found: Any, targets: list[str], force: list[str], kw: dict[str, Any]) -> ExitCode:
    """A run of `--watch` after the first: an error (the plan was saved half-edited) is told as
    `guard` tells it, and is that run's exit code; the watch goes on."""
    try:
        return _run_once(False, found, targets, force, kw)
    except PlanInvalid as exc:
        print_diagnostics(exc.diagnostics, "json" if kw["output"] == "json" else "text")
        return exc.exit_code
    except PlanrunError as exc:
        _error_document(kw, str(exc), exc.exit_code)
        click.echo(one_line(f"planrun: error: {exc}"), err=True)
        return exc.exit_code


def _pass_through(kw: dict[str, Any]) -> dict[str, Any]:
    """`cli_args` when words were given after `--` (else the run's default, [])."""
    from planrun.plan.expressions import Words
    from planrun.plan.params import CLI_ARGS

    words = kw.get(CLI_ARGS) or []
    return {CLI_ARGS: Words(words)} if words else {}


def _directories() -> tuple[str, ...]:
    """The `-C DIR`s planrun was given, as typed (the resume hint starts where they led)."""
    context = click.get_current_context(silent=True)
    given = context.find_root().params.get("directories") if context is not None else None
    return tuple(given or ())


def _run_once(
    force_resume: bool, found: Any, targets: list[str], force: list[str], kw: dict[str, Any]
) -> ExitCode:
    """One run through the run path, its result printed: the exit code."""
    from planrun.plan.discovery import with_builtins
    from planrun.run.runner import RunRequest, run_sync

    reporter = None
    if kw["report"] and not kw["dry_run"]:
        from planrun.report import ReportOnExit, check_report_path

        if kw["no_state"]:
            raise UsageError("--report is built from the run's state: drop --no-state")
        check_report_path(kw["report"])
        reporter = ReportOnExit(kw["report"], kw["state"], os.getcwd(), found.plan)
    # An option named as a request field goes in as given; the rest is worked out here.
    given = {f.name: kw[f.name] for f in fields(RunRequest) if f.name in kw}
    req = RunRequest(
        **{
            **given,
            "plan": found.plan,
            "variables": {**with_builtins(found, parse_vars(kw["var"])), **_pass_through(kw)},
            "resume": force_resume or kw["resume"],
            "only": [*kw["only"], *targets],
            "plan_found": found.moved,  # `resume with: planrun resume ...` finds it again
            "directories": _directories(),
            "force": force,
            "grace": _grace(kw.get("grace")),
            "planner": _planner(kw.get("planner")),
            "cwd": os.getcwd(),
            "interactive": sys.stdin.isatty() and sys.stderr.isatty(),
            "subscribers": [reporter.handle] if reporter else [],
        }
    )
    try:
        doc, code = run_sync(req)
    finally:
        if reporter is not None:
            reporter.write()  # after a failure or Ctrl-C too
    code = _report_write_failures(req.report_failures.take(), code)
    if kw["output"] == "json":
        text = json.dumps(doc, indent=2, ensure_ascii=False, default=str)
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in a value: JSON escapes it
                text = json.dumps(doc, indent=2, default=str)
        click.echo(text)
    elif kw["dry_run"]:
        from planrun.reporters.termsafe import echo_view
        from planrun.run.dryrun import render_dry_run  # the dry run's own module, only for it

        echo_view(render_dry_run(doc, kw["explain"] or kw["no_cache"]))
    if code == ExitCode.BLOCKED and doc.get("reason") == "approval_required":
        # On stderr with --output json too: what to do about it is for the person reading.
        click.echo(f"planrun: blocked: {doc['error']} (use --yes, or run at a terminal)", err=True)
    return code
