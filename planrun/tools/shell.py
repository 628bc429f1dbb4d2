"""The `shell` tool: run a command in its own process group, capture (and stream) its output."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
from dataclasses import dataclass
from typing import Any

from planrun.tools import check_args, type_name
from planrun.tools.base import ToolContext, ToolFailed
from planrun.tools.cmdoutput import collect_output, output_sinks

_OPTIONAL = ("cwd", "env", "stdin", "check")
_GRACE_S = 0.5  # between SIGTERM and SIGKILL when a step is cancelled
_TAIL_LINES = 20
_CHUNK = 65536

LIVE_GROUPS: set[int] = set()
"""Process groups of running commands: what a second Ctrl-C kills before planrun exits."""


def kill_live_groups() -> None:
    """SIGKILL every running command's process group (no grace: planrun is exiting now)."""
    for pgid in list(LIVE_GROUPS):
        _signal_group(pgid, signal.SIGKILL)


def command_failed(command: str, result: dict[str, Any]) -> ToolFailed:
    """The failure of a command that exited non-zero (shared with remote executors)."""
    tail = result.get("stderr", "").splitlines()[-_TAIL_LINES:]
    return ToolFailed(
        f"command exited with code {result['exit_code']}",
        detail="\n".join([f"$ {command}", *tail]),
        result=result,
    )


@dataclass(frozen=True)
class ShellArgs:
    """A shell step's arguments, checked (shared with remote executors)."""

    cmd: Any
    cwd: str  # absolute, or relative to the base directory it was given
    env: Any  # as written: merged over the environment where the command runs
    stdin: str | None
    check: bool


def parse_shell_args(args: Any, base_cwd: str) -> ShellArgs:
    """Check `args` as the shell tool does; one clear ToolFailed line for each mistake."""
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
    stdin = args.get("stdin")
    if stdin is not None and not isinstance(stdin, str):
        raise ToolFailed(f"shell: 'stdin' must be a string, got {type_name(stdin)}")
    check = args.get("check", True)
    if not isinstance(check, bool):
        raise ToolFailed(f"shell: 'check' must be true or false, got {type_name(check)}")
    return ShellArgs(args["cmd"], cwd, args.get("env"), stdin, check)


async def run_shell(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run `cmd`; result `{stdout, stderr, exit_code}`. Cancelling kills the whole group."""
    parsed = parse_shell_args(args, ctx.cwd)
    env = _env(parsed.env, ctx.env)
    argv, command = _argv(parsed.cmd)
    cwd, stdin, check = parsed.cwd, parsed.stdin, parsed.check
    data = stdin.encode() if stdin is not None else None

    proc = await _spawn(argv, cwd, env, data is not None)
    LIVE_GROUPS.add(proc.pid)
    plan = ctx.parent.plan if ctx.parent is not None else "plan"
    sinks = output_sinks(ctx.cwd, plan, ctx.step_id, ctx.env)  # bounded memory, see cmdoutput
    try:
        out, err = await collect_output(proc, data, ctx.on_output, sinks)
        close = getattr(proc, "close", None)  # the fast path's pipes (asyncio's close themselves)
        if close is not None:
            close()
    except BaseException:
        # Cancellation is how timeouts, abort and Ctrl-C reach a step: nothing may outlive it.
        await _kill_group(proc)
        raise
    finally:
        LIVE_GROUPS.discard(proc.pid)
    code = proc.returncode
    assert code is not None
    result = {
        "stdout": out.decode("utf-8", errors="replace"),
        "stderr": err.decode("utf-8", errors="replace"),
        "exit_code": code,
    }
    if check and code != 0:
        raise command_failed(command, result)
    return result


def _argv(cmd: Any) -> tuple[list[str], str]:
    """The argv to exec and the command as shown to the user.

    A string always runs as `/bin/sh -c CMD`, even a plain `echo -e a`: exec'ing it directly
    would differ from the shell in builtins (`echo`, `true`, `printf`), `argv[0]`, the
    environment the shell exports (`PWD`, its order) and scripts without `#!` — and from the
    Dask executor, which always uses the shell. Starting the shell costs about 1 ms.
    """
    if isinstance(cmd, str):
        if "\0" in cmd:
            raise ToolFailed("shell: 'cmd' contains a NUL byte, which no command can receive")
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
        return argv, shlex.join(argv)
    raise ToolFailed(
        f"shell: 'cmd' must be a string or a non-empty list of strings, got {type_name(cmd)}"
    )


def _env(extra: Any, base: dict[str, str]) -> dict[str, str]:
    """`extra` merged over `base`; None unsets a variable, other values become text."""
    if extra is None:
        return base
    if not isinstance(extra, dict):
        raise ToolFailed(f"shell: 'env' must be a mapping, got {type_name(extra)}")
    env = dict(base)
    for key, value in extra.items():
        if value is None:
            env.pop(str(key), None)
        elif isinstance(value, str):
            env[str(key)] = value
        elif isinstance(value, bool):
            env[str(key)] = "true" if value else "false"  # as YAML wrote it, not Python's True
        elif isinstance(value, int | float):
            env[str(key)] = str(value)
        else:
            env[str(key)] = json.dumps(value)
        if "\0" in env.get(str(key), "") or "\0" in str(key):
            raise ToolFailed(
                f"shell: env {str(key)!r} contains a NUL byte, which no command can receive"
            )
    return env


class _SpawnedProcess:
    """The part of asyncio's Process that this tool uses, for a child started by posix_spawn
    and watched through a pidfd: no fork of this (large) process, no watcher thread."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._transports: list[asyncio.BaseTransport] = []
        loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[None] = loop.create_future()
        self._pidfd = pidfd
        loop.add_reader(pidfd, self._on_exit, loop)
        self._transport = self  # _kill_group closes the pipes through this

    def _on_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        _, status = os.waitpid(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        if not self._exited.done():
            self._exited.set_result(None)

    async def connect(self, out_r: int, err_r: int, in_w: int | None) -> None:
        loop = asyncio.get_running_loop()
        for fd, name in ((out_r, "stdout"), (err_r, "stderr")):
            reader = asyncio.StreamReader(limit=_CHUNK)

            def reading(r: asyncio.StreamReader = reader) -> asyncio.StreamReaderProtocol:
                return asyncio.StreamReaderProtocol(r)

            transport, _ = await loop.connect_read_pipe(reading, os.fdopen(fd, "rb", 0))
            self._transports.append(transport)
            setattr(self, name, reader)
        if in_w is not None:

            def protocol() -> asyncio.StreamReaderProtocol:
                return asyncio.StreamReaderProtocol(asyncio.StreamReader())

            wt, wp = await loop.connect_write_pipe(protocol, os.fdopen(in_w, "wb", 0))
            self._transports.append(wt)
            self.stdin = asyncio.StreamWriter(wt, wp, None, loop)

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        assert self.returncode is not None
        return self.returncode

    async def communicate(self, data: bytes | None) -> tuple[bytes, bytes]:
        async def feed() -> None:
            if self.stdin is None:
                return
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if data:
                    self.stdin.write(data)
                    await self.stdin.drain()
                self.stdin.close()

        assert self.stdout is not None and self.stderr is not None
        _, out, err = await asyncio.gather(feed(), self.stdout.read(), self.stderr.read())
        await self.wait()
        self.close()
        return out, err

    def close(self) -> None:
        for t in self._transports:
            t.close()


def _spawn_fast(
    argv: list[str], cwd: str, env: dict[str, str], with_stdin: bool
) -> tuple[int, int, int, int | None] | None:
    """posix_spawn the command (pid, stdout, stderr, stdin fds), or None where it cannot be used.

    posix_spawn has no chdir, so only commands run in planrun's own directory take this path;
    os.pipe() fds are close-on-exec, so the child gets exactly its three standard streams.
    """
    if not _FAST_SPAWN or not os.path.isabs(argv[0]) or cwd != os.getcwd():
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if with_stdin else (None, None)
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        (os.POSIX_SPAWN_DUP2, in_r, 0)
        if in_r is not None
        else (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
    ]
    try:
        pid = os.posix_spawn(
            argv[0],
            argv,
            env,
            file_actions=actions,
            setsid=True,  # own process group
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            setsigmask=(),  # as subprocess does
        )
    except BaseException:
        for fd in (out_r, err_r, in_w):
            if fd is not None:
                os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w, in_r):
            if fd is not None:
                os.close(fd)
    return pid, out_r, err_r, in_w


_FAST_SPAWN = hasattr(os, "posix_spawn") and hasattr(os, "pidfd_open")


async def _spawn(argv: list[str], cwd: str, env: dict[str, str], with_stdin: bool) -> Any:
    try:
        fast = _spawn_fast(argv, cwd, env, with_stdin)
        if fast is not None:
            pid, out_r, err_r, in_w = fast
            try:
                proc = _SpawnedProcess(pid, os.pidfd_open(pid))
            except OSError:  # no pidfd support in this kernel: reap it and go the usual way
                for fd in (out_r, err_r, in_w):
                    if fd is not None:
                        os.close(fd)
                os.waitpid(pid, 0)
                globals()["_FAST_SPAWN"] = False
            else:
                await proc.connect(out_r, err_r, in_w)
                return proc
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE if with_stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # own process group, so a cancel can kill grandchildren too
        )
    except FileNotFoundError as exc:
        # The child reports which of cwd or the executable was missing via `filename`.
        if exc.filename == cwd:
            raise ToolFailed(f"shell: no such directory: {cwd}") from None
        raise ToolFailed(f"command not found: {argv[0]}") from None
    except NotADirectoryError:
        raise ToolFailed(f"shell: not a directory: {cwd}") from None
    except PermissionError as exc:
        raise ToolFailed(f"permission denied: {exc.filename or argv[0]}") from None
    except OSError as exc:
        raise ToolFailed(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(pgid, sig)


async def _kill_group(proc: Any) -> None:
    """SIGTERM the process group, SIGKILL what is left after a short grace, reap the child."""
    # The group id is the child's pid (start_new_session); the group lives on in any
    # grandchild even after the child itself has exited.
    _signal_group(proc.pid, signal.SIGTERM)
    if proc.returncode is None:
        # A second cancel during cleanup only shortens the grace.
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(proc.wait(), _GRACE_S)
    _signal_group(proc.pid, signal.SIGKILL)
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
