"""A command started by posix_spawn, its pipes and its exit watched by plain event-loop callbacks.

This is the shell tool's fast path for the most common step: one command in planrun's own
directory. It costs no fork of the (large) planrun process, no watcher thread, and none of
asyncio's per-process machinery (two pipe transports, their protocols and stream readers,
three tasks to pump and feed them): each pipe and the pidfd get one reader callback, and the
step awaits one future that is done once both pipes are at their end and the child has exited,
as asyncio's path ends (a grandchild still holding a pipe keeps the step running).
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
from typing import Any

from planrun.tools.base import OutputCallback
from planrun.tools.cmdoutput import CappedOutput, LineSplitter

__all__ = ["SpawnedChild", "pidfd_supported", "spawn_child"]

_CHUNK = 65536
_STREAMS = ("stdout", "stderr")


@functools.cache
def pidfd_supported() -> bool:
    """Whether children can be watched through a pidfd (Linux 5.3+), probed once."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def spawn_child(
    argv: list[str], env: dict[str, str], with_stdin: bool
) -> tuple[int, int, int, int | None]:
    """posix_spawn `argv` in its own session: (pid, stdout fd, stderr fd, stdin fd or None).

    posix_spawn has no chdir, so the child runs in planrun's own directory; os.pipe() fds are
    close-on-exec, so the child gets exactly its three standard streams.
    """
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


class SpawnedChild:
    """One spawned command: `collect` reads its output to the end and waits for its exit.

    `pid`, `returncode`, `wait()` and `close()` are what the shell tool's cancellation needs
    (signal the group, wait with a grace, close the pipes), as for asyncio's Process. The
    child is reaped here and nowhere else, so its pid cannot be reused before that.
    """

    def __init__(
        self,
        spawned: tuple[int, int, int, int | None],
        sinks: tuple[CappedOutput, CappedOutput],
        on_output: OutputCallback | None,
    ) -> None:
        self.pid, out_r, err_r, self._stdin_fd = spawned
        self.returncode: int | None = None
        self._loop = asyncio.get_running_loop()
        self._pidfd: int | None = None  # opened only if the child outlives its pipes
        self._fds: list[int | None] = [out_r, err_r]
        self._sinks = sinks
        self._on_output = on_output
        self._lines = (
            (LineSplitter(sinks[0].limit), LineSplitter(sinks[1].limit)) if on_output else None
        )
        self._pending = memoryview(b"")
        self._exited: asyncio.Future[None] = self._loop.create_future()
        self._done: asyncio.Future[None] = self._loop.create_future()
        self._transport = self  # the shell tool's cancellation closes the pipes through this

    async def collect(self, data: bytes | None) -> tuple[bytes, bytes]:
        """Feed `data` to stdin, read both pipes to the end into the sinks (each line to
        `on_output` as it arrives) and wait for the exit; returns what the sinks keep."""
        sinks = self._sinks
        try:
            for index, fd in enumerate(self._fds):
                assert fd is not None
                self._loop.add_reader(fd, self._on_readable, index)
            if self._stdin_fd is not None:
                self._start_feeding(data or b"")
            await self._done
        finally:
            out, err = sinks[0].finish(), sinks[1].finish()  # closes the log files in any case
        return out, err

    async def wait(self) -> int:
        self._watch_exit()
        await asyncio.shield(self._exited)
        assert self.returncode is not None
        return self.returncode

    def close(self) -> None:
        """Stop watching and close the pipes (after the end, or when the step is cancelled)."""
        for index, fd in enumerate(self._fds):
            if fd is not None:
                self._loop.remove_reader(fd)
                os.close(fd)
                self._fds[index] = None
        self._close_stdin()

    # ---- callbacks -----------------------------------------------------------------------

    def _watch_exit(self) -> None:
        """Reap the child if it has exited, else watch its pidfd until it does.

        Most commands have exited by the time their pipes reach their end, so most steps need
        no pidfd at all (saving its open, two epoll changes and a close).
        """
        if self.returncode is not None or self._pidfd is not None:
            return
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid:
            self._reaped(status)
            return
        self._pidfd = os.pidfd_open(self.pid)
        self._loop.add_reader(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        assert self._pidfd is not None
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        _, status = os.waitpid(self.pid, 0)
        self._reaped(status)

    def _reaped(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        if not self._exited.done():
            self._exited.set_result(None)
        self._check_done()

    def _on_readable(self, index: int) -> None:
        fd = self._fds[index]
        assert fd is not None
        try:
            chunk = os.read(fd, _CHUNK)
            if chunk:
                self._sinks[index].write(chunk)
                if self._lines is not None:
                    self._pass_lines(index, self._lines[index].feed(chunk))
                return
            self._loop.remove_reader(fd)
            os.close(fd)
            self._fds[index] = None
            if self._lines is not None:
                self._pass_lines(index, self._lines[index].flush())
            if self._fds == [None, None]:
                self._watch_exit()
        except BaseException as exc:  # a read error or the output callback's: the step's error
            self._fail(exc)
            return
        self._check_done()

    def _pass_lines(self, index: int, lines: list[bytes]) -> None:
        assert self._on_output is not None
        for line in lines:
            self._on_output(_STREAMS[index], line.decode("utf-8", errors="replace"))

    def _check_done(self) -> None:
        if self.returncode is not None and self._fds == [None, None] and not self._done.done():
            self._done.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        if not self._done.done():
            self._done.set_exception(exc)

    # ---- stdin ---------------------------------------------------------------------------

    def _start_feeding(self, data: bytes) -> None:
        self._pending = memoryview(data)
        assert self._stdin_fd is not None
        os.set_blocking(self._stdin_fd, False)
        if self._write_some():
            self._loop.add_writer(self._stdin_fd, self._on_writable)

    def _write_some(self) -> bool:
        """Write what the pipe takes now; True while some is left to write."""
        assert self._stdin_fd is not None
        try:
            while self._pending:
                written = os.write(self._stdin_fd, self._pending)
                self._pending = self._pending[written:]
        except BlockingIOError:
            return True
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command did not read all of its input: not an error
        except OSError as exc:
            self._fail(exc)
        self._close_stdin()
        return False

    def _on_writable(self) -> None:
        self._write_some()

    def _close_stdin(self) -> None:
        fd, self._stdin_fd = self._stdin_fd, None
        if fd is not None:
            self._loop.remove_writer(fd)
            os.close(fd)
