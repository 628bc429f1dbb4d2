"""`planrun mcp` over stdio: the SDK's transport, plus a ledger of the answers still owed on stdout.

A server leaving on a signal ends with `os._exit` (the SDK reads stdin in a thread nothing can
interrupt, so the process would not end by itself), and nothing written after that point
reaches the client. So the requests read are noted here, and each is crossed off once its
answer has been written to stdout and flushed: the server leaves when the ones it waits for are.

The same ledger holds back the end of input: the SDK stops serving when its input ends and
cancels the requests in flight, unanswered. A client that writes its requests and closes stdin
(`printf '...' | planrun mcp`) expects every answer, so the SDK sees the end of input only once
every request read has its answer on stdout (the transport itself stays the SDK's), or as soon
as nobody is left to read stdout (the client died): then there is no one to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import select
import sys
from collections.abc import Callable, Iterator
from io import TextIOWrapper
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from planrun.text import first_line

HANG_UP_POLL_S = 0.2  # how often a server whose input has ended looks whether its client is gone


class Answers:
    """The requests (by JSON-RPC request id) whose answers have not reached stdout yet."""

    def __init__(self) -> None:
        self.owed: set[str] = set()
        self._flushed = asyncio.Event()  # set whenever an answer is crossed off

    @contextlib.contextmanager
    def call(self, request_id: str) -> Iterator[None]:
        """Around a tool call: its answer is owed from now on, unless the call is cancelled
        (a cancelled request is not answered)."""
        self.owed.add(request_id)
        try:
            yield
        except asyncio.CancelledError:
            self.settle(request_id)  # not answered, but no longer owed
            raise

    def read(self, item: Any) -> None:
        """Note a message read from the client: a request is owed its answer from now on; a
        `notifications/cancelled` crosses its request off (a cancelled request is not answered)."""
        from mcp_types import JSONRPCNotification, JSONRPCRequest

        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest):
            self.owed.add(str(message.id))
        elif (
            isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled"
        ):
            params = message.params if isinstance(message.params, dict) else {}
            if "requestId" in params:
                self.settle(str(params["requestId"]))

    def settle(self, request_id: str) -> None:
        """The call is no longer owed: its answer is on stdout, or it was cancelled."""
        if request_id in self.owed:
            self.owed.discard(request_id)
            self._flushed.set()

    async def until_answered(self, ids: set[str], timeout_s: float | None) -> None:
        """Wait until every request of `ids` has its answer on stdout, or `timeout_s` passed (a
        client that stops reading stdout must not keep a stopping server alive; None: no bound)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while ids & self.owed:
                    self._flushed.clear()
                    await self._flushed.wait()


class Wire(anyio.AsyncFile[str]):
    """stdout as the SDK writes it (one JSON-RPC message a line, then a flush), crossing off
    the answers each flush has delivered."""

    def __init__(self, fp: TextIOWrapper, answers: Answers) -> None:
        super().__init__(fp)
        self._answers = answers
        self._written: list[str] = []  # answers written since the last flush

    async def write(self, b: str) -> int:
        n = await super().write(b)
        if self._answers.owed:  # no call in flight: nothing to cross off, nothing to parse
            self._written += [i for line in b.splitlines() if (i := _answer_id(line))]
        return n

    async def flush(self) -> None:
        await super().flush()
        for request_id in self._written:
            self._answers.settle(request_id)
        self._written.clear()


def _answer_id(line: str) -> str | None:
    """The request id of a JSON-RPC response (a result or an error), else None."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
        return str(msg["id"])
    return None


def claim_stdout() -> tuple[TextIOWrapper, Callable[[bool], None]]:
    """The protocol's own copy of fd 1, and how to give fd 1 back (`lost`: nobody reads it any
    more, so what is left unwritten goes to /dev/null, and so does fd 1 from then on).

    While serving, fd 1 points at stderr, so a stray print() or a child process that inherited
    stdout cannot corrupt the protocol stream (what the SDK does when it opens stdout itself).
    """
    sys.stdout.flush()
    wire_fd = os.dup(1)  # not inherited by children (PEP 446)
    os.dup2(2, 1)
    raw = os.fdopen(wire_fd, "wb", closefd=False)
    out = TextIOWrapper(raw, encoding="utf-8")

    def give_back(lost: bool) -> None:
        if lost:  # a half-written answer must not fail again at exit ("Exception ignored")
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, wire_fd)
            os.close(null)
            with contextlib.suppress(OSError, ValueError):
                out.flush()
        os.dup2(wire_fd, 1)
        os.close(wire_fd)

    return out, give_back


async def serve_stdio(server: Server[Any], answers: Answers) -> None:
    """Serve one client on stdin/stdout, noting the answers as they leave, until stdin closes
    or the client is gone (a write to stdout finds nobody to read it, in the middle of an
    answer or after a run its leaving interrupted): either is how a stdio session ends."""
    out, give_back = claim_stdout()
    lost = False
    try:
        try:
            async with stdio_server(stdout=Wire(out, answers)) as (read, write):
                sifted, receive = anyio.create_memory_object_stream[Any](0)
                async with anyio.create_task_group() as tg:
                    gone = functools.partial(reader_gone, out.fileno())
                    tg.start_soon(_answer_unreadable, read, sifted, write, answers, gone)
                    await server.run(receive, write, server.create_initialization_options())
                    tg.cancel_scope.cancel()
        except* (BrokenPipeError, ConnectionResetError):
            lost = True
    finally:
        give_back(lost)


async def _answer_unreadable(
    read: Any, forward: Any, write: Any, answers: Answers, gone: Callable[[], bool]
) -> None:
    """Pass the client's messages on, noting the requests; answer a request that the SDK could
    not read; pass the end of input on once every request read has its answer, or at once when
    nobody is left to read the answers (`gone`: the client died), so the SDK cancels the calls
    in flight and their runs are interrupted, as a cancelled call's run is.

    The SDK parses each line with a nesting limit, and hands on a line it cannot parse as an
    exception the server drops, unanswered: the client would wait for its own timeout. A line
    that is JSON with a request id (nested past that limit, say) gets an error answer instead.
    """
    async with forward:
        async with read:
            async for item in read:
                refusal = _refusal(item) if isinstance(item, Exception) else None
                if refusal is None:
                    answers.read(item)
                    await forward.send(item)
                else:
                    await write.send(refusal)
        # End of input: the SDK would cancel the requests still running (module docstring).
        owed = set(answers.owed)
        while owed & answers.owed and not gone():
            await answers.until_answered(owed, timeout_s=HANG_UP_POLL_S)


def reader_gone(fd: int) -> bool:
    """Whether nothing can read what is written to `fd` any more: the write end of a pipe (or
    socket) whose other end is closed. False for a file, a terminal, or when poll cannot say."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)  # POLLERR and POLLHUP are reported whatever is asked
    try:
        events = poller.poll(0)
    except OSError:
        return False
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def _refusal(exc: Exception) -> Any:
    """A JSON-RPC "invalid request" answer for a line the SDK could not parse, if it has an id."""
    from mcp.shared.message import SessionMessage
    from mcp_types import INVALID_REQUEST, ErrorData, JSONRPCError
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError) or exc.error_count() != 1:
        return None
    error = exc.errors()[0]
    line = error.get("input")
    if error.get("type") != "json_invalid" or not isinstance(line, str):
        return None
    request_id = _request_id(line)
    if request_id is None:
        return None
    why = error.get("msg", "unreadable")
    reason = "nested too deeply" if "recursion limit" in why else first_line(why, 200)
    return SessionMessage(
        JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=ErrorData(code=INVALID_REQUEST, message=f"invalid request: {reason}"),
        )
    )


def _request_id(line: str) -> int | str | None:
    """The id of the request on `line` (None for no JSON, a notification, an answer)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None  # not JSON at all: there is no request id to answer
    except RecursionError:  # deeper than Python reads: the members before the first nested one
        head = _HEAD.match(line)
        try:
            msg = json.loads("{" + head.group(1).rsplit(",", 1)[0] + "}") if head else None
        except ValueError:
            return None
    request_id = msg.get("id") if isinstance(msg, dict) and "method" in msg else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


_HEAD = re.compile(r"\s*\{([^{}\[\]]*)")
