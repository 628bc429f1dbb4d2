"""The `shell` tool: run a command in its own process group, capture (and stream) its output."""

from __future__ import annotations

# Lazy import (inside a function), for start-up time: shlex only to show a list `cmd`.
import asyncio
import contextlib
import os
import signal
from typing import Any, NamedTuple

from planrun.run.procgroups import ProcessGroups, group_exists, signal_group
from planrun.text import type_name
from planrun.tools import check_args
from planrun.tools.base import OutputCallback, ToolContext, ToolFailed, env_text
from planrun.tools.cmdoutput import CappedOutput, collect_output, output_sinks
from planrun.tools.spawned import SpawnedChild, pidfd_supported, spawn_child

_OPTIONAL = ("cwd", "env", "stdin", "check")
_GROUP_POLL_S = 0.02  # how often an interrupted run looks whether a group's last process ended
_ZOMBIES_EVERY = 10  # ... and every how many looks whether what is left has only ended unreaped
_TAIL_LINES = 20
# In every command's environment: the run and the state row it runs for (planrun/run/leftovers.py)
RUN_ENV = "PLANRUN_RUN_ID"
STEP_ENV = "PLANRUN_STEP_ID"


def command_failed(command: str, result: dict[str, Any], what: str = "command") -> ToolFailed:
    """The failure of a command that exited non-zero (shared with remote executors); `what`
    names it (`run[1]` for a `run:` list's second command)."""
    tail = result.get("stderr", "").splitlines()[-_TAIL_LINES:]
    return ToolFailed(
        f"{what} exited with code {result['exit_code']}",
        detail="\n".join([f"$ {command}", *tail]),
        result=result,
    )


class ShellArgs(NamedTuple):
    """A shell step's arguments, checked (shared with remote executors)."""

    cmd: Any
    cwd: str  # absolute, or relative to the base directory it was given
    env: Any  # as written: merged over the environment where the command runs
    stdin: str | None
    check: bool
    run: Any = None  # a `run:` step's script, or list of commands (then `cmd` is None)


def parse_shell_args(args: Any, base_cwd: str) -> ShellArgs:
    """Check `args` as the shell tool does; one clear ToolFailed line for each mistake."""
    if isinstance(args, dict) and "run" in args:  # a `run:` step (planrun.run.stepcall)
        check_args("shell", args, ("run",), ("cwd", "env"))
    else:
        check_args("shell", args, ("cmd",), _OPTIONAL)
    cwd = args.get("cwd")
    if cwd is None:
        cwd = base_cwd
    elif isinstance(cwd, str):
        cwd = cwd if os.path.isabs(cwd) else os.path.join(base_cwd, cwd)
    else:
        raise ToolFailed(f"shell: 'cwd' must be a string, got {type_name(cwd)}")
    if "\0" in cwd:
        raise ToolFailed("shell: 'cwd' contains a NUL byte, which no directory name can hold")
    _unicode("'cwd'", cwd)
    stdin = args.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise ToolFailed(f"shell: 'stdin' must be a string, got {type_name(stdin)}")
    check = args.get("check", True)
    if not isinstance(check, bool):
        raise ToolFailed(f"shell: 'check' must be true or false, got {type_name(check)}")
    return ShellArgs(args.get("cmd"), cwd, args.get("env"), stdin, check, args.get("run"))


async def run_shell(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run `cmd`; result `{stdout, stderr, exit_code}`. Cancelling kills the whole group."""
    parsed = parse_shell_args(args, ctx.cwd)
    env = command_env(parsed.env, ctx.env, _marks(ctx))
    commands = run_commands(parsed.run) if parsed.run is not None else [command_argv(parsed.cmd)]
    cwd, stdin, check = parsed.cwd, parsed.stdin, parsed.check
    results = []
    for n, (argv, command) in enumerate(commands):
        result = await _run(argv, cwd, env, stdin, ctx)
        results.append(result)
        if check and result["exit_code"] != 0:
            what = f"run[{n}]" if isinstance(parsed.run, list) else "command"
            raise command_failed(command, joined(results), what)
    return joined(results)


def run_commands(run: Any) -> list[tuple[list[str], str]]:
    """The commands of a `run:` step, each as (argv, as shown): a string is one script run by
    `/bin/sh -e -c` (it stops at its first failing command, as GitHub Actions runs `run:`);
    a list runs each string by `/bin/sh -c`, one after another."""
    if isinstance(run, str):
        command_argv(run)  # the same checks as a string cmd
        return [(["/bin/sh", "-e", "-c", run], run)]
    if isinstance(run, list) and run and all(isinstance(r, str) for r in run):
        return [command_argv(r) for r in run]
    raise ToolFailed(
        f"shell: 'run' must be a string or a non-empty list of strings, got {type_name(run)}"
    )


def joined(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The result of commands run one after another: their output in order, the last exit code."""
    if len(results) == 1:
        return results[0]
    return {
        "stdout": "".join(r["stdout"] for r in results),
        "stderr": "".join(r["stderr"] for r in results),
        "exit_code": results[-1]["exit_code"],
    }


async def _run(
    argv: list[str], cwd: str, env: dict[str, str], stdin: str | None, ctx: ToolContext
) -> dict[str, Any]:
    """Start the command, collect its output, wait for its exit: the result document."""
    data = stdin.encode() if stdin is not None else None
    plan = ctx.parent.plan if ctx.parent is not None else "plan"
    secrets = ctx.parent.masks.values if ctx.parent is not None else None  # for a cut's log
    sinks = output_sinks(ctx.cwd, plan, ctx.step_id, ctx.env, secrets)  # bounded memory
    # The run's registry of process groups: what an interrupt signals (a tool called outside
    # a run gets one of its own, so a cancel still stops its command).
    groups = ctx.services.groups
    if groups is None:
        groups = ProcessGroups()
    proc = await _spawn(argv, cwd, env, data is not None, sinks, ctx.on_output, groups)
    groups.add(proc.pid)
    try:
        if isinstance(proc, asyncio.subprocess.Process):
            out, err = await collect_output(proc, data, ctx.on_output, sinks)
        else:
            out, err = await proc.collect(data)
            proc.close()
    except BaseException:
        # Cancellation is how timeouts, abort and Ctrl-C reach a step: nothing may outlive it.
        await _kill_group(proc, groups)
        raise
    finally:
        told = groups.told(proc.pid)
        groups.discard(proc.pid)
    if told:  # it ended on the run's interrupt, passed on to it: interrupted, not failed
        raise asyncio.CancelledError
    code = proc.returncode
    assert code is not None
    return {
        "stdout": out.decode("utf-8", errors="replace"),
        "stderr": err.decode("utf-8", errors="replace"),
        "exit_code": code,
    }


def command_argv(cmd: Any) -> tuple[list[str], str]:
    """The argv to exec and the command as shown to the user.

    A string always runs as `/bin/sh -c CMD`, even a plain `echo -e a`: exec'ing it directly
    would differ from the shell in builtins (`echo`, `true`, `printf`), `argv[0]`, the
    environment the shell exports (`PWD`, its order) and scripts without `#!` — and from the
    Dask executor, which always uses the shell. Starting the shell costs about 1 ms.
    """
    if isinstance(cmd, str):
        if "\0" in cmd:
            raise ToolFailed("shell: 'cmd' contains a NUL byte, which no command can receive")
        _unicode("'cmd'", cmd)
        return ["/bin/sh", "-c", cmd], cmd
    if isinstance(cmd, list) and cmd:
        argv = []
        for item in cmd:
            if isinstance(item, str):
                argv.append(item)
            elif isinstance(item, int | float) and not isinstance(item, bool):
                argv.append(str(item))
            else:
                raise ToolFailed(
                    f"shell: every item of a list 'cmd' must be a string, got {type_name(item)}"
                )
        if any("\0" in a for a in argv):
            raise ToolFailed("shell: 'cmd' contains a NUL byte, which no command can receive")
        for arg in argv:
            _unicode("'cmd'", arg)
        import shlex

        return argv, shlex.join(argv)
    raise ToolFailed(
        f"shell: 'cmd' must be a string or a non-empty list of strings, got {type_name(cmd)}"
    )


def _marks(ctx: ToolContext) -> dict[str, str] | None:
    """PLANRUN_RUN_ID and PLANRUN_STEP_ID: how the next run finds this command if planrun is
    killed while it runs (planrun/run/leftovers.py). Added here only, at spawn time, so that no
    expression, fingerprint or cache key sees them."""
    parent = ctx.parent
    if parent is None or not parent.run_id:
        return None
    return {RUN_ENV: parent.run_id, STEP_ENV: parent.prefix + ctx.step_id}


def command_env(
    extra: Any, base: dict[str, str], marks: dict[str, str] | None = None
) -> dict[str, str]:
    """`extra` merged over `base` and `marks`; None unsets a variable, other values become
    text (`env_text`). (One copy of `base`: the caller's dict is never changed.)"""
    if extra is None:
        return base if marks is None else {**base, **marks}
    if not isinstance(extra, dict):
        raise ToolFailed(f"shell: 'env' must be a mapping, got {type_name(extra)}")
    env = dict(base)
    if marks is not None:
        env.update(marks)
    for key, value in extra.items():
        name = str(key)
        if not name or "=" in name:  # the environment is NAME=VALUE lines
            raise ToolFailed(
                f"shell: env name {name!r} is not a variable name (empty, or holds '=')"
            )
        text = env_text(value)
        if text is None:
            env.pop(name, None)
        else:
            env[name] = text
        if "\0" in name + (text or ""):
            raise ToolFailed(
                f"shell: env {name!r} contains a NUL byte, which no command can receive"
            )
        _unicode(f"env {name!r}", name + (text or ""))
    return env


def _unicode(what: str, text: str) -> None:
    """One line for text a process cannot receive: a lone surrogate (JSON can spell "\\ud800").
    Undecodable bytes from argv or the environment (\\udc80-\\udcff) go back out as those bytes."""
    if text.isascii():
        return
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ToolFailed(
            f"shell: {what} contains text that is not valid Unicode (a lone surrogate)"
        ) from None


_FAST_SPAWN = hasattr(os, "posix_spawn")


async def _spawn(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    with_stdin: bool,
    sinks: tuple[CappedOutput, CappedOutput],
    on_output: OutputCallback | None,
    groups: ProcessGroups,
) -> Any:
    """The started command: a SpawnedChild (posix_spawn, for a command run in planrun's own
    directory, which posix_spawn cannot change) or asyncio's Process."""
    try:
        fast = _FAST_SPAWN and os.path.isabs(argv[0]) and cwd == os.getcwd()
        if fast and pidfd_supported():
            return SpawnedChild(spawn_child(argv, env, with_stdin), sinks, on_output)
        starting = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE if with_stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # own process group: a cancel kills grandchildren too
            )
        )
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            await _stop_started(starting, groups)
            raise
    except OSError as exc:
        error, why = type(exc).__name__, exc.strerror or str(exc)
        raise launch_failed(error, exc.filename, why, argv[0], cwd) from None


def launch_failed(error: str | None, filename: Any, why: str, argv0: str, cwd: str) -> ToolFailed:
    """The failure of a command that could not start (shared with remote executors, which
    send the OSError's class name, its filename and its strerror)."""
    if error == "FileNotFoundError":
        # The child reports which of cwd or the executable was missing via `filename`.
        if filename == cwd:
            return ToolFailed(f"shell: no such directory: {cwd}")
        return ToolFailed(f"command not found: {argv0}")
    if error == "NotADirectoryError":
        return ToolFailed(f"shell: not a directory: {cwd}")
    if error == "PermissionError":
        return ToolFailed(f"permission denied: {filename or argv0}")
    return ToolFailed(f"cannot run {argv0}: {why}")


async def _stop_started(starting: asyncio.Future[Any], groups: ProcessGroups) -> None:
    """The step was cancelled while asyncio was still setting up the command it had already
    forked (connecting its pipes takes a few turns of the loop, in which a quick command may
    even have exited, leaving a grandchild behind): stop its group as any cancel does.

    Cancelling asyncio's set-up instead would SIGKILL the command alone, never its group."""
    while not starting.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([starting])  # a second cancel cannot skip the stop
    if starting.cancelled() or starting.exception() is not None:
        return  # nothing was started (a missing command or directory): nothing to stop
    proc = starting.result()
    groups.add(proc.pid)
    try:
        await _kill_group(proc, groups)
    finally:
        groups.discard(proc.pid)


async def _kill_group(proc: Any, groups: ProcessGroups) -> None:
    """Stop the command's process group: a signal (the run's interrupt signal, else SIGTERM),
    a grace period for the group to end (the run's `grace` after an interrupt), then SIGKILL
    for what is left; reap the child."""
    # The group id is the child's pid (start_new_session); the group lives on in any
    # grandchild even after the child itself has exited (`sh -c` of a command that cleans up).
    grace = groups.stopping(proc.pid)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    # A second cancel during cleanup only shortens the grace; a second signal (groups.hurried)
    # has killed the group already.
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        if proc.returncode is None and grace > 0:
            await asyncio.wait_for(proc.wait(), grace)
        if groups.stop_signal is not None:  # interrupted: the rest of the group may clean up
            looks = 0
            while (
                _group_alive(proc.pid, thorough=looks % _ZOMBIES_EVERY == _ZOMBIES_EVERY - 1)
                and not groups.hurried
                and loop.time() < deadline
            ):
                looks += 1
                await asyncio.sleep(_GROUP_POLL_S)
    signal_group(proc.pid, signal.SIGKILL)
    while proc.returncode is None:
        try:
            await proc.wait()
        except asyncio.CancelledError:
            continue  # SIGKILL is certain; the caller re-raises the original cancellation
    # Close the pipes now: left to the garbage collector, they would complain
    # "Event loop is closed" when the cancellation ends the loop (Ctrl-C).
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _group_alive(pgid: int, *, thorough: bool = False) -> bool:
    """Whether a process of the group is still there (the leader is reaped by then).
    `thorough`: a group of zombies only is gone too (members that ended after the leader,
    adopted by a parent that has not reaped them yet: a container's init may never do, some
    reap a second late), which `killpg(pgid, 0)` alone still answers for; it reads /proc."""
    return group_exists(pgid) and (not thorough or _live_member(pgid))


def _live_member(pgid: int) -> bool:
    """Whether /proc shows a process of the group that has not ended (True without /proc)."""
    from planrun.state.lock import live_stat, proc_pids

    try:
        pids = proc_pids()
    except OSError:
        return True
    return any((st := live_stat(pid)) is not None and st[0] == pgid for pid in pids)
