"""How much planrun reads from an MCP server: one message at most MAX_MESSAGE_BYTES, read
through the SDK's own transports (see docs/architecture.md, "MCP servers' answers")."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: httpx2 only once an HTTP server starts.
import codecs
import functools
import itertools
from collections.abc import AsyncIterator, Callable
from typing import Any

from planrun.tools.base import MAX_RESULT_BYTES

MAX_MESSAGE_BYTES = MAX_RESULT_BYTES
"""One message from a server: a line of a stdio server's stdout, an HTTP body, an SSE event."""
MAX_TOOL_LIST_BYTES = 16 << 20
"""A server's tool list as planrun keeps it (names, descriptions, schemas)."""
MAX_TOOL_PAGES = 100
MAX_TOOLS = 10_000


SDK_SSE_EVENT_BYTES = 1 << 20
"""The SDK's own limit on one event of a legacy SSE server (sse_client takes no other)."""


def mib(size: int) -> str:
    """A limit as messages name it."""
    return f"{size >> 20} MiB"


class Guard:
    """One server's limits on a message, and why planrun stopped reading from it (None: it did
    not). `on_refuse` runs once, when a message passes a limit: the pool ends that session."""

    def __init__(
        self,
        on_refuse: Callable[[], None],
        limit: int = MAX_MESSAGE_BYTES,
        event_limit: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.limit, self.event_limit = limit, event_limit
        self.reason: str | None = None
        # The HTTP error status of the last request's answer (`HTTP 401 Unauthorized`, None
        # after one that succeeded), which the SDK's own message for it leaves out.
        self.http_error: str | None = None
        self._on_refuse = on_refuse

    def refuse(self, why: str) -> None:
        if self.reason is None:
            self.reason = f"{why}; planrun ended its session"
            self._on_refuse()


# --------------------------------------------------------------------------- stdio
# The SDK's stdio transport spawns the server and reads its stdout as text, one line a message,
# in its `encoding`: a codec of planrun's is the one place that sees every byte first. It hands
# the SDK whole lines only (so the SDK's own line buffer stays empty) and none past the limit.

_PREFIX = "planrun_mcp_lines_"
_guards: dict[str, Guard] = {}
_ids = itertools.count(1)
_free: list[str] = []  # names released: Python keeps every codec it has looked up, so reuse


def stdio_encoding(guard: Guard) -> str:
    """A codec name for StdioServerParameters.encoding: UTF-8 read under `guard`; release()
    it once the server is gone (its decoder took the guard when the server started)."""
    _register()
    name = _free.pop() if _free else f"{_PREFIX}{next(_ids)}"
    _guards[name] = guard
    return name


def release(name: str) -> None:
    if _guards.pop(name, None) is not None:
        _free.append(name)


@functools.cache
def _register() -> None:
    codecs.register(_search)


def _search(name: str) -> codecs.CodecInfo | None:
    if not name.startswith(_PREFIX):
        return None
    return codecs.CodecInfo(
        encode=codecs.utf_8_encode,
        decode=codecs.utf_8_decode,
        incrementalencoder=codecs.getincrementalencoder("utf-8"),
        incrementaldecoder=functools.partial(_LineDecoder, name),  # type: ignore[arg-type]
        name=name,
    )


class _LineDecoder(codecs.IncrementalDecoder):
    """UTF-8 handed on a whole line at a time; at a line past the guard's limit the server is
    refused, and what it writes after that is read and dropped until it is gone."""

    def __init__(self, name: str, errors: str = "strict") -> None:
        super().__init__(errors)
        self._guard = _guards.get(name) or Guard(lambda: None)
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors)
        self._line = bytearray()  # the line read so far, without its end
        self._refused = False

    def decode(self, input: Any, final: bool = False) -> str:  # noqa: A002 (codecs' name)
        if self._refused:
            return ""
        data = input if isinstance(input, bytes) else bytes(input)
        limit = self._guard.limit
        end = data.rfind(b"\n") + 1
        if not end:
            self._line += data
            if len(self._line) > limit:
                return self._refuse()
            return self._take() if final else ""
        head, tail = data[:end], data[end:]
        longest = len(self._line) + head.find(b"\n")  # the first line
        if len(head) > limit:  # lines within one chunk (never in practice: 64 KiB chunks)
            longest = max(longest, *map(len, head.split(b"\n")))
        if longest > limit or len(tail) > limit:
            return self._refuse()
        self._line += head
        text = self._utf8.decode(self._line)
        self._line = bytearray(tail)
        return text + self._take() if final else text

    def _take(self) -> str:
        text = self._utf8.decode(self._line, True)
        self._line = bytearray()
        return text

    def _refuse(self) -> str:
        self._refused = True
        self._line = bytearray()
        self._guard.refuse(f"the server sent a message larger than {mib(self._guard.limit)}")
        return ""

    def reset(self) -> None:
        self._line = bytearray()
        self._utf8.reset()


# --------------------------------------------------------------------------- HTTP


def response_hook(guard: Guard) -> Callable[[Any], Any]:
    """An httpx2 response event hook that reads each answer's body under `guard`: a body past
    its limit (JSON, or anything but an event stream), or one event past the event limit, is
    refused. It sees the bytes of every transport the client picks (proxies included).

    planrun asks for answers as they are (`accept-encoding: identity`) and refuses a compressed
    one: a few kilobytes of gzip can unpack to gigabytes that no count of these bytes sees."""
    import httpx2

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream, kind: str, encoding: str) -> None:
            self._inner, self._events = inner, kind == "text/event-stream"
            self._encoded = encoding not in ("", "identity")

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if self._encoded:
                guard.refuse("the server sent a compressed answer, which planrun does not read")
                raise httpx2.ReadError(guard.reason or "")
            limit = guard.event_limit if self._events else guard.limit
            size = 0  # bytes of the body, or of the event being read
            last = b""  # the end of what was read, line ends made "\n": an event ends at "\n\n"
            async for chunk in self._inner:
                if self._events:
                    seen = last + chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                    end = seen.rfind(b"\n\n")
                    size = size + len(chunk) if end < 0 else len(seen) - end - 2
                    last = seen[-1:]
                else:
                    size += len(chunk)
                if size > limit:
                    what = "an event" if self._events else "an answer"
                    guard.refuse(f"the server sent {what} larger than {mib(limit)}")
                    raise httpx2.ReadError(guard.reason or "")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

        @property
        def elapsed(self) -> Any:  # what httpx2 reads back from the stream it wrapped
            return getattr(self._inner, "elapsed", None)

    async def hook(response: httpx2.Response) -> None:
        if response.request.method == "POST":  # a request's answer (GET: the event stream)
            code = response.status_code
            guard.http_error = (
                f"HTTP {code} {response.reason_phrase}".strip() if code >= 400 else None
            )
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        encoding = response.headers.get("content-encoding", "").strip().lower()
        response.stream = Capped(response.stream, kind, encoding)  # type: ignore[arg-type]

    return hook
