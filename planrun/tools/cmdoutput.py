"""Bounded capture of a command's output: memory stays flat whatever a step prints.

Up to the limit (`PLANRUN_MAX_OUTPUT`, default 1 MiB per stream) a stream is kept whole in
memory, as before. Past it, the whole stream goes to a log file under
`.planrun/logs/<plan>/<step>.<stream>.log` and only its first and last halves of the limit
stay in memory; the text the step's result holds (and so the state, `--output json`, events,
JUnit and the console) is that head and tail around one marker line saying how much was cut
and where the whole output is. The log has the run's secrets masked (tools/redact.py).
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
from collections.abc import Callable
from typing import IO, Protocol

from planrun.tools.base import OutputCallback
from planrun.tools.redact import Redactor

__all__ = [
    "DEFAULT_LIMIT",
    "CappedOutput",
    "LineSplitter",
    "collect_output",
    "log_path",
    "output_limit",
    "output_sinks",
]

DEFAULT_LIMIT = 1 << 20
_CHUNK = 65536
_SIZE = re.compile(r"\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*\Z")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def output_limit(env: dict[str, str] | None = None) -> int:
    """Bytes of one stream kept in memory: `PLANRUN_MAX_OUTPUT` (`4096`, `512K`, `8M`)."""
    raw = (env if env is not None else os.environ).get("PLANRUN_MAX_OUTPUT")
    if not raw:
        return DEFAULT_LIMIT
    match = _SIZE.match(raw)
    if match is None:
        return DEFAULT_LIMIT  # a typo must not break every step: the default then
    return max(256, int(match.group(1)) * _UNITS[match.group(2).lower()])


def log_path(cwd: str, plan: str, step_id: str, stream: str) -> str:
    """Where the whole output of a cut stream goes: `.planrun/logs/<plan>/<step>.<stream>.log`."""
    parts = [_safe(p) for p in [plan, *step_id.split("/")]]
    return os.path.join(cwd, ".planrun", "logs", *parts[:-1], f"{parts[-1]}.{stream}.log")


def _safe(part: str) -> str:
    part = part.replace(os.sep, "_")
    return f"_{part}" if part in ("", ".", "..") else part


class CappedOutput:
    """One stream's bytes: whole while small, head + tail + a log file once past `limit`."""

    def __init__(
        self,
        limit: int,
        spill_to: str | Callable[[], str] | None,
        secrets: Callable[[], list[str]] | None = None,
    ) -> None:
        self.limit = limit
        self._secrets = secrets  # their forms, asked for only if the stream is cut
        self._redactor: Redactor | None = None
        self.total = 0
        self._spill_to = spill_to  # a callable: the path, worked out only if the stream is cut
        self._head: list[bytes] = []
        self._head_size = 0
        self._tail = bytearray()
        self._log: IO[bytes] | None = None
        self._log_error: str | None = None
        self.cut = False

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if not self.cut:
            if self._head_size + len(chunk) <= self.limit:
                self._head.append(chunk)
                self._head_size += len(chunk)
                return
            self._start_cutting(b"".join([*self._head, chunk]))
            return
        if self._log is not None:
            try:
                self._log.write(self._redactor.feed(chunk) if self._redactor else chunk)
            except OSError as exc:  # a full disk: keep going, say so in the marker
                self._close_log(exc)
        keep = self.limit - self.limit // 2
        self._tail += chunk[-keep:]
        if len(self._tail) > keep:
            del self._tail[: len(self._tail) - keep]

    def _start_cutting(self, whole: bytes) -> None:
        self.cut = True
        half = self.limit // 2
        self._head = [whole[:half]]
        self._head_size = min(half, len(whole))
        self._tail = bytearray(whole[half:][-(self.limit - half) :])
        if callable(self._spill_to):
            self._spill_to = self._spill_to()
        if self._spill_to is None:
            return
        try:
            os.makedirs(os.path.dirname(self._spill_to), exist_ok=True)
            # Never through a symlink planted there; 0600: the output is kept as printed.
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            self._log = os.fdopen(os.open(self._spill_to, flags, 0o600), "wb")
            forms = self._secrets() if self._secrets is not None else []
            self._redactor = Redactor(forms) if forms else None  # the run's secrets, masked
            self._log.write(self._redactor.feed(whole) if self._redactor else whole)
        except OSError as exc:
            self._close_log(exc)

    def _close_log(self, exc: OSError | None = None) -> None:
        if exc is not None:
            self._log_error = exc.strerror or str(exc)
        if self._log is not None:
            try:
                if self._redactor is not None and exc is None:
                    self._log.write(self._redactor.close())
                self._log.close()
            except OSError as close_error:
                self._log_error = self._log_error or close_error.strerror
            self._log = None

    def finish(self) -> bytes:
        """The bytes to keep: everything, or head + marker line + tail."""
        self._close_log()
        head = b"".join(self._head)
        if not self.cut:
            return head
        kept = len(head) + len(self._tail)
        if self._spill_to is None:
            where = "the whole output was not kept"
        elif self._log_error:
            where = f"the whole output could not be written to {self._spill_to}: {self._log_error}"
        else:
            where = f"the whole output is in {self._spill_to}"
        marker = (
            f"\n[planrun: output cut: {self.total} bytes, kept the first {len(head)} and the "
            f"last {len(self._tail)} ({self.total - kept} left out); {where}; "
            "PLANRUN_MAX_OUTPUT sets how much is kept]\n"
        )
        return head + marker.encode() + bytes(self._tail)


class LineSplitter:
    """Splits chunks into lines for `--stream`, never holding more than `limit` bytes of one
    line (a command printing without newlines has its text passed on in pieces)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._partial += chunk
        lines: list[bytes] = []
        if b"\n" in chunk:
            *complete, rest = self._partial.split(b"\n")
            lines = [bytes(line) for line in complete]
            self._partial = bytearray(rest)
        while len(self._partial) > self.limit:
            lines.append(bytes(self._partial[: self.limit]))
            del self._partial[: self.limit]
        return lines

    def flush(self) -> list[bytes]:
        rest, self._partial = bytes(self._partial), bytearray()
        return [rest] if rest else []


class _Pipes(Protocol):
    """The process as `collect_output` needs it (asyncio's Process, or the fast path's)."""

    stdin: asyncio.StreamWriter | None
    stdout: asyncio.StreamReader | None
    stderr: asyncio.StreamReader | None

    async def wait(self) -> int: ...


async def collect_output(
    proc: _Pipes,
    data: bytes | None,
    on_output: OutputCallback | None,
    sinks: tuple[CappedOutput, CappedOutput],
) -> tuple[bytes, bytes]:
    """Feed `data` to stdin and read both pipes to the end into `sinks` (stdout, stderr),
    passing each line to `on_output` as it arrives; returns what the sinks keep."""

    async def pump(reader: asyncio.StreamReader | None, stream: str, sink: CappedOutput) -> None:
        assert reader is not None
        lines = LineSplitter(sink.limit) if on_output is not None else None
        while chunk := await reader.read(_CHUNK):
            sink.write(chunk)
            if lines is not None and on_output is not None:
                for line in lines.feed(chunk):
                    on_output(stream, line.decode("utf-8", errors="replace"))
        if lines is not None and on_output is not None:
            for line in lines.flush():
                on_output(stream, line.decode("utf-8", errors="replace"))

    async def feed() -> None:
        if proc.stdin is None:
            return
        try:
            if data:
                proc.stdin.write(data)
                await proc.stdin.drain()
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command did not read all of its input: not an error

    try:
        # A TaskGroup (not gather) so that an error in one pump cancels the others.
        async with asyncio.TaskGroup() as group:
            group.create_task(pump(proc.stdout, "stdout", sinks[0]))
            group.create_task(pump(proc.stderr, "stderr", sinks[1]))
            group.create_task(feed())
        await proc.wait()
    finally:
        out, err = sinks[0].finish(), sinks[1].finish()  # closes the log files in any case
    return out, err


def output_sinks(
    cwd: str,
    plan: str,
    step_id: str,
    env: dict[str, str],
    secrets: Callable[[], list[str]] | None = None,
) -> tuple[CappedOutput, CappedOutput]:
    """The (stdout, stderr) sinks of one step, with their log files (named only when needed:
    most steps print far less than the limit), `secrets` masked in them."""
    limit = output_limit(env)
    return (
        CappedOutput(limit, functools.partial(log_path, cwd, plan, step_id, "stdout"), secrets),
        CappedOutput(limit, functools.partial(log_path, cwd, plan, step_id, "stderr"), secrets),
    )
