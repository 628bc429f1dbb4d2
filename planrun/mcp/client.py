"""MCP client side of planrun: one session per server, tool calls and their results.

Config files are read in planrun.mcp.config (re-exported here)."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: the MCP SDK, httpx2, jsonschema and pydantic
# only once a server is started or checked (`--mcp-config` alone reads JSON).
import asyncio
import json
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from planrun import untrusted_json
from planrun.errors import PlanInvalid, exception_leaves, quoted
from planrun.mcp import limits, servergroup
from planrun.mcp.config import (
    HTTP_TYPES,
    load_env_file,
    parse_mcp_config,
    suggest_name,
)
from planrun.plan.definition import ServerEntry
from planrun.text import first_line
from planrun.tools.base import ToolFailed
from planrun.tools.capture import Capture

__all__ = ["ServerPool", "check_tool_args", "load_env_file", "map_tool_result", "parse_mcp_config"]

# The SDK's default mode="auto" probes `server/discover` with a fixed 10 s timeout before
# falling back; the initialize handshake works with every server released so far.
CONNECT_MODE = "legacy"

STDERR_TAIL_LINES = 20
_STDERR_TAIL_BYTES = 16_384
# What planrun keeps of an error text a server sends (a tool's error result, a JSON-RPC error's
# message, what the SDK says of a malformed answer): its first line in the step's error, cut
# to ERROR_LINE_CHARS, and the text in its detail up to ERROR_TEXT_CHARS, with a line saying
# how many more characters there were (as a step's printed output is kept: tools/capture.py).
ERROR_LINE_CHARS = 2000
ERROR_TEXT_CHARS = 16_384

# --------------------------------------------------------------------------- argument checks


def check_tool_args(
    input_schema: dict[str, Any], args: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """Validate a step's arguments against an MCP tool's input schema.

    Returns (errors, warnings). MCP servers ignore unknown arguments silently, so keys that
    the schema does not list are warnings (an error when the schema forbids extra keys).
    """
    from jsonschema import exceptions as js_exceptions
    from jsonschema.validators import validator_for

    errors: list[str] = []
    warnings: list[str] = []
    if not isinstance(input_schema, dict) or not input_schema:
        return errors, warnings
    cls = validator_for(input_schema)
    try:
        cls.check_schema(input_schema)
    except js_exceptions.SchemaError as exc:
        warnings.append(f"the tool's input schema is invalid, arguments not checked: {exc.message}")
        return errors, warnings
    from referencing.exceptions import Unresolvable

    try:
        found = sorted(
            cls(input_schema).iter_errors(args), key=lambda e: list(map(str, e.absolute_path))
        )
    except Unresolvable as exc:  # a `$ref` to nowhere (never fetched from the network)
        warnings.append(
            "the tool's input schema is invalid, arguments not checked: "
            f"$ref {first_line(str(exc.ref))[:200]!r} does not resolve"
        )
        return errors, warnings
    for err in found:
        where = ".".join(str(p) for p in err.absolute_path)
        errors.append(f"{where}: {err.message}" if where else err.message)
    props = input_schema.get("properties")
    if isinstance(props, dict) and input_schema.get("additionalProperties") is not False:
        known = list(props)
        for key in args:
            if key not in props:
                hint = suggest_name(key, known)
                listing = f"; known: {', '.join(known)}" if known and not hint else ""
                warnings.append(f"unknown argument '{key}' is ignored by the server{hint}{listing}")
    return errors, warnings


# --------------------------------------------------------------------------- results


def map_tool_result(result: Any) -> Any:
    """Structured content if any, else the text content (JSON-decoded when JSON).

    ValueError when the structured content holds what JSON cannot (NaN, infinity: the SDK
    parses them), which no result, state file or `--output json` document may carry.
    """
    if result.structured_content is not None:
        return _strict_json(result.structured_content)
    items = [_map_content(c) for c in result.content]
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _map_content(item: Any) -> Any:
    if getattr(item, "type", None) == "text":
        return _maybe_json(item.text)
    # Images, audio, resources: keep the wire shape (camelCase, base64 data) as a dict.
    return item.model_dump(by_alias=True, exclude_none=True, mode="json")


def _maybe_json(text: str) -> Any:
    """The text's JSON value when it is strict JSON planrun can hold, else the text itself:
    `NaN`, `Infinity` and arrays nested a hundred thousand deep stay text."""
    stripped = text.strip()
    if not stripped:
        return text
    try:
        return untrusted_json.loads(stripped)  # NaN, or nesting too deep, stays text
    except ValueError:
        return text


def _strict_json(value: Any) -> Any:
    """`value` if JSON can hold it as it is; ValueError naming what it cannot."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise ValueError("holds NaN or infinity, which JSON cannot hold") from None
    except (TypeError, RecursionError):
        raise ValueError("is not JSON planrun can hold") from None
    return value


def _tool_size(tool: Any) -> int:
    """About how much of planrun's memory one listed tool takes: its name, description and
    schemas as JSON text."""
    size = len(tool.name) + len(tool.description or "")
    for schema in (tool.input_schema, tool.output_schema):
        try:
            size += len(json.dumps(schema)) if schema else 0
        except (TypeError, ValueError, RecursionError):
            size += limits.MAX_TOOL_LIST_BYTES  # not JSON planrun would keep
    return size


def _error_text(result: Any) -> str:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return "\n".join(texts).strip() or "the tool reported an error with no message"


def server_text(text: str) -> tuple[str, str | None]:
    """An error text a server sent, as a step keeps it: (its first line, cut to
    ERROR_LINE_CHARS; the text, cut to ERROR_TEXT_CHARS, when it says more than that line)."""
    text = text.strip()
    first, _, rest = text.partition("\n")
    if not rest and len(first) <= ERROR_LINE_CHARS:
        return first, None
    kept = Capture(ERROR_TEXT_CHARS)
    kept.add("stderr", text)
    return quoted(first, ERROR_LINE_CHARS), kept.text()


# --------------------------------------------------------------------------- server pool


class _StartFailed(Exception):
    """A server could not be started; carries the ToolFailed to raise for every caller."""

    def __init__(self, failure: ToolFailed) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class _Server:
    """One server's session, owned by its background task."""

    name: str
    entry: ServerEntry
    ready: asyncio.Future[Any]  # the connected mcp.Client, or a _StartFailed
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    scope: Any = None  # the anyio CancelScope around the session, to abort a pending start
    stderr: IO[bytes] | None = None
    guard: limits.Guard = field(init=False)  # what the server may send; why it was refused
    encoding: str | None = None  # the codec reading a stdio server's stdout (limits.py)
    groups: set[int] = field(default_factory=set)  # a stdio server's groups (servergroup.py)

    def __post_init__(self) -> None:
        self.guard = limits.Guard(self._end)
        if self.entry.transport == "sse":  # the SDK's own bound on a legacy SSE event
            self.guard.event_limit = limits.SDK_SSE_EVENT_BYTES

    def _end(self) -> None:
        """The server sent more than planrun reads: end its session, or its start."""
        self.closing.set()
        if not self.ready.done() and self.scope is not None:
            self.scope.cancel()

    @contextmanager
    def refusal(self, what: str) -> Iterator[None]:
        """A request to a server planrun stopped reading from fails with why, whatever the SDK
        made of it (a closed connection, a parse error, a transport error)."""
        if self.guard.reason is not None:
            raise ToolFailed(f"MCP server '{self.name}' {what}: {self.guard.reason}")
        try:
            yield
        except Exception:
            if self.guard.reason is None:
                raise
            raise ToolFailed(f"MCP server '{self.name}' {what}: {self.guard.reason}") from None

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        """The last lines the server wrote to stderr ('' for remote servers)."""
        if self.stderr is None or self.stderr.closed:
            return ""
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - _STDERR_TAIL_BYTES)
        # pread leaves the shared file offset alone; the server keeps appending through it.
        data = os.pread(fd, size - start, start).decode("utf-8", "replace")
        return "\n".join(data.rstrip("\n").splitlines()[-lines:])


class ServerPool:
    """MCP sessions for one run: each server starts lazily on first use, once, shared by all steps."""

    def __init__(
        self, servers: Mapping[str, ServerEntry], *, cwd: str, connect_timeout: float = 20.0
    ) -> None:
        self._entries = dict(servers)
        self._cwd = cwd
        self._connect_timeout = connect_timeout
        self._servers: dict[str, _Server] = {}
        self._closed = False

    async def __aenter__(self) -> ServerPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def call(
        self, server: str, tool: str, args: dict[str, Any], *, timeout: float | None = None
    ) -> Any:
        """Call `tool` on `server` and map its result (map_tool_result); raises ToolFailed."""
        client = await self._client(server)
        srv = self._servers[server]
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        with srv.refusal(f"tool '{tool}'"):
            try:
                result = await client.call_tool(tool, args, read_timeout_seconds=timeout)
            except MCPError as exc:
                raise self._mcp_error(srv, f"tool '{tool}'", exc, timeout) from None
            except ValidationError as exc:
                # The SDK lists the tools to check a result against its output schema.
                what = "tools/list answer" if exc.title == "ListToolsResult" else "result"
                raise ToolFailed(
                    f"MCP server '{server}' tool '{tool}': malformed {what} ({exc.error_count()} validation errors)",
                    detail=server_text(str(exc))[1] or str(exc),
                ) from None
            except RuntimeError as exc:  # the SDK's output_schema check, among others
                first, detail = server_text(str(exc))
                raise ToolFailed(
                    f"MCP server '{server}' tool '{tool}': {first}", detail=detail or str(exc)
                ) from None
        try:
            value = map_tool_result(result)
        except ValueError as exc:
            if result.is_error:  # the tool's own message says more than its broken content
                value = None
            else:
                raise ToolFailed(
                    f"MCP server '{server}' tool '{tool}': malformed result: structured content {exc}"
                ) from None
        if result.is_error:
            first, detail = server_text(_error_text(result))
            raise ToolFailed(
                f"MCP server '{server}' tool '{tool}' failed: {first}",
                detail=detail,
                result=value if result.structured_content is not None else None,
            )
        return value

    async def list_tools(self, server: str) -> list[dict[str, Any]]:
        """Every tool of `server` as {name, description, input_schema}, across pages."""
        client = await self._client(server)
        srv = self._servers[server]
        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        tools: list[dict[str, Any]] = []
        kept = 0  # characters of the names, descriptions and schemas kept
        cursor: str | None = None
        with srv.refusal("tools/list"):
            try:
                # A server that pages on and on, or lists huge tools, must not hold the run
                # nor its memory: the SDK keeps each tool's output schema, planrun the rest.
                for _ in range(limits.MAX_TOOL_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    for t in page.tools:
                        kept += _tool_size(t)
                        tools.append(
                            {
                                "name": t.name,
                                "description": t.description or "",
                                "input_schema": t.input_schema,
                            }
                        )
                    if len(tools) > limits.MAX_TOOLS:
                        why = f"has more than {limits.MAX_TOOLS} tools"
                        break
                    if kept > limits.MAX_TOOL_LIST_BYTES:
                        size = limits.mib(limits.MAX_TOOL_LIST_BYTES)
                        why = f"holds more than {size} of names, descriptions and schemas"
                        break
                    cursor = page.next_cursor
                    if not cursor:
                        return tools
                else:
                    why = f"goes on past {limits.MAX_TOOL_PAGES} pages"
            except MCPError as exc:
                raise self._mcp_error(srv, "tools/list", exc, None) from None
            except ValidationError as exc:  # e.g. an inputSchema that is not an object
                raise ToolFailed(
                    f"MCP server '{server}' tools/list: malformed answer ({exc.error_count()} validation errors)",
                    detail=server_text(str(exc))[1] or str(exc),
                ) from None
        raise ToolFailed(f"MCP server '{server}' tools/list: the tool list {why}, planrun's limit")

    async def aclose(self) -> None:
        """Shut every started server down and wait for it, even if this call is cancelled."""
        self._closed = True
        for srv in self._servers.values():
            srv.closing.set()
            if not srv.ready.done() and srv.scope is not None:
                srv.scope.cancel()  # a handshake still in progress would otherwise run to its deadline
        tasks = [s.task for s in self._servers.values() if s.task is not None and not s.task.done()]
        if tasks:
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                # asyncio.wait does not cancel the tasks; let their bounded shutdown finish so no
                # server process outlives the run, then pass the cancellation on.
                await asyncio.wait(tasks)
                raise
            finally:
                for task in tasks:  # mark outcomes as seen: nothing is logged at interpreter exit
                    if task.done() and not task.cancelled():
                        task.exception()
        for srv in self._servers.values():
            if srv.stderr is not None:
                srv.stderr.close()
            if srv.encoding is not None:
                limits.release(srv.encoding)

    # ----------------------------------------------------------------------- internals

    async def _client(self, name: str) -> Any:
        """The connected client of `name`, starting the server on first use."""
        if self._closed:
            raise ToolFailed(f"MCP server '{name}': the server pool is closed")
        srv = self._servers.get(name)
        if srv is None:
            if name not in self._entries:
                known = ", ".join(sorted(self._entries)) or "none"
                raise ToolFailed(f"unknown MCP server '{name}' (servers: {known})")
            # No await between the lookup and this insert, so concurrent first callers share it.
            srv = _Server(name, self._entries[name], asyncio.get_running_loop().create_future())
            # Mark a start failure as seen even if every waiter was cancelled meanwhile, so
            # asyncio does not log "exception was never retrieved" at exit.
            srv.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._servers[name] = srv
            srv.task = asyncio.create_task(self._serve(srv), name=f"mcp-server-{name}")
        try:
            # shield: one caller's cancellation (a step timeout) must not abort the shared start.
            return await asyncio.shield(srv.ready)
        except _StartFailed as exc:
            raise ToolFailed(exc.failure.message, detail=exc.failure.detail) from None

    async def _serve(self, srv: _Server) -> None:
        """Own one server's Client from start to shutdown (anyio scopes need a single task)."""
        import anyio
        from mcp import Client

        _quiet_sdk_logging()
        if self._closed:  # aclose() ran before this task got its first turn
            srv.ready.set_exception(
                _StartFailed(
                    ToolFailed(f"MCP server '{srv.name}': start-up abandoned, the run is ending")
                )
            )
            return
        try:
            transport = self._transport(srv)
        except ToolFailed as exc:
            srv.ready.set_exception(_StartFailed(exc))
            return
        except Exception as exc:  # noqa: BLE001 - e.g. a malformed entry; callers must not hang
            srv.ready.set_exception(_StartFailed(self._start_failure(srv, exc)))
            return
        # The deadline bounds the handshake only; it is lifted once the session is up.
        scope = srv.scope = anyio.CancelScope(deadline=anyio.current_time() + self._connect_timeout)
        try:
            try:
                with scope:
                    async with Client(transport, mode=CONNECT_MODE) as client:
                        scope.deadline = math.inf
                        if srv.stderr is not None:  # a stdio server: what it starts, it leaves
                            srv.groups = servergroup.find_groups(srv.stderr.fileno())
                        srv.ready.set_result(client)
                        await srv.closing.wait()
            finally:
                if srv.stderr is not None:  # the SDK stops the server; this, what it started
                    srv.groups |= servergroup.find_groups(srv.stderr.fileno())
                    await servergroup.stop_groups(srv.groups)
        except BaseException as exc:  # noqa: BLE001 - reported to the callers, never lost
            if not srv.ready.done():
                srv.ready.set_exception(_StartFailed(self._start_failure(srv, exc)))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
            # Anything else (a failed start, an error while closing a dead session) has been
            # reported to the callers or no longer matters; the task ends quietly.
            return
        if not srv.ready.done():  # the handshake ran out of time, or aclose() aborted it
            message = (
                f"MCP server '{srv.name}': {srv.guard.reason}"
                if srv.guard.reason
                else f"MCP server '{srv.name}': start-up abandoned, the run is ending"
                if self._closed
                else f"MCP server '{srv.name}': no answer to the MCP handshake within {self._connect_timeout:g}s"
            )
            srv.ready.set_exception(
                _StartFailed(ToolFailed(message, detail=srv.stderr_tail() or None))
            )

    def _transport(self, srv: _Server) -> Any:
        """The SDK transport for one entry: a spawned process or an HTTP connection."""
        entry = srv.entry
        kind = entry.transport
        if kind in HTTP_TYPES:
            if not entry.url:
                raise ToolFailed(f"MCP server '{srv.name}': no url")
            return _http_transport(kind, str(entry.url), dict(entry.headers), srv.guard)
        if kind != "stdio":
            raise ToolFailed(f"MCP server '{srv.name}': unknown type {kind!r}")
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        command = str(entry.command or "")
        if not command:
            raise ToolFailed(f"MCP server '{srv.name}': no command")
        cwd = os.path.join(self._cwd, entry.cwd) if entry.cwd else self._cwd
        # The whole environment, like the shell tool (the SDK alone passes only HOME, PATH...).
        env = dict(os.environ)
        if entry.envFile:
            env_file = os.path.join(self._cwd, entry.envFile)
            try:
                env.update(load_env_file(env_file))
            except OSError as exc:
                why = exc.strerror or exc
                raise ToolFailed(
                    f"MCP server '{srv.name}': cannot read envFile {env_file}: {why}"
                ) from None
            except PlanInvalid as exc:  # file:line:col: error: dotenv: ...
                raise ToolFailed(f"MCP server '{srv.name}': envFile {exc}") from None
        env.update({str(k): str(v) for k, v in entry.env.items()})
        # Its stdout is read through planrun's codec, which refuses a line past the limit.
        srv.encoding = limits.stdio_encoding(srv.guard)
        params = StdioServerParameters(
            command=command,
            args=[str(a) for a in entry.args],
            env=env,
            cwd=cwd,
            encoding=srv.encoding,
        )
        # The server's stderr goes to an unlinked temp file: out of planrun's output, but its
        # tail is at hand for the error message when the server fails.
        # The pool closes it in aclose(), after the process is gone.
        srv.stderr = tempfile.TemporaryFile(prefix=f"planrun-mcp-{srv.name}-")  # noqa: SIM115
        return stdio_client(params, errlog=srv.stderr)  # type: ignore[arg-type]

    def _start_failure(self, srv: _Server, exc: BaseException) -> ToolFailed:
        """One clear ToolFailed for whatever stopped a server from starting."""
        from mcp.shared.exceptions import MCPError

        leaf = _pick_leaf(exc)
        name, tail = srv.name, srv.stderr_tail() or None
        if srv.guard.reason:
            return ToolFailed(f"MCP server '{name}': {srv.guard.reason}")
        command = srv.entry.command or ""
        if isinstance(leaf, FileNotFoundError):
            where = srv.entry.cwd
            if where and not os.path.isdir(os.path.join(self._cwd, where)):
                return ToolFailed(f"MCP server '{name}': working directory not found: {where}")
            return ToolFailed(f"MCP server '{name}': command not found: {command}")
        if isinstance(leaf, PermissionError):
            return ToolFailed(f"MCP server '{name}': cannot run {command}: permission denied")
        if isinstance(leaf, MCPError):
            if leaf.code == -32000:  # CONNECTION_CLOSED
                return ToolFailed(f"MCP server '{name}': exited during start-up", detail=tail)
            via = f" with {srv.entry.url}" if srv.entry.url else ""
            first, _ = server_text(leaf.message)
            status = f"; {srv.guard.http_error}" if srv.guard.http_error else ""
            return ToolFailed(
                f"MCP server '{name}': handshake{via} failed: {first} (MCP error {leaf.code}{status})",
                detail=tail,
            )
        if isinstance(leaf, asyncio.CancelledError):
            return ToolFailed(f"MCP server '{name}': start-up was cancelled")
        text = server_text(first_line(str(leaf)))[0] or type(leaf).__name__
        if srv.entry.url is not None:
            return ToolFailed(f"MCP server '{name}': cannot connect to {srv.entry.url}: {text}")
        return ToolFailed(f"MCP server '{name}': failed to start: {text}", detail=tail)

    def _mcp_error(self, srv: _Server, what: str, exc: Any, timeout: float | None) -> ToolFailed:
        """Map an MCPError from a request to a ToolFailed naming the server and the request."""
        code = exc.code
        prefix = f"MCP server '{srv.name}' {what}"
        if code == -32000:  # CONNECTION_CLOSED: the process died, or the remote end went away
            return ToolFailed(
                f"{prefix}: the server closed the connection (crashed or exited)",
                detail=srv.stderr_tail() or None,
            )
        if code == -32001:  # REQUEST_TIMEOUT from read_timeout_seconds: the step's timeout
            # In the words of the step's own timeout (run/attempts.py), which ends the same call
            # at the same moment: whichever comes first, the step says the same.
            return ToolFailed(
                f"{prefix}: timed out after {timeout:g}s" if timeout else f"{prefix}: timed out"
            )
        first, detail = server_text(exc.message)
        status, srv.guard.http_error = srv.guard.http_error, None  # said once, for this call
        status = f"; {status}" if status else ""
        return ToolFailed(f"{prefix}: {first} (MCP error {code}{status})", detail=detail)


@asynccontextmanager
async def _http_transport(
    kind: str, url: str, headers: dict[str, str], guard: limits.Guard
) -> AsyncIterator[Any]:
    """Streamable HTTP (with the entry's headers) or legacy SSE streams for one server, each
    answer read under `guard` (limits.response_hook)."""
    import httpx2

    def http_client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        # The SDK's defaults: 30 s to connect/write, 300 s reads for long-lived response streams.
        return httpx2.AsyncClient(
            headers={"accept-encoding": "identity", **(headers or {})},
            timeout=timeout or httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            event_hooks={"response": [limits.response_hook(guard)]},
        )

    if kind == "sse":
        from mcp.client.sse import sse_client

        async with sse_client(
            url, headers=headers or None, httpx_client_factory=http_client
        ) as streams:
            yield streams
        return
    from mcp.client.streamable_http import streamable_http_client

    async with (
        http_client(headers) as http,
        streamable_http_client(
            url, http_client=http, max_sse_event_size=limits.MAX_MESSAGE_BYTES
        ) as streams,
    ):
        yield streams


def _quiet_sdk_logging() -> None:
    """Keep the SDK's log records (e.g. a traceback for a non-JSON line on a server's stdout)
    off planrun's stderr unless the application configured logging itself."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, logging.NullHandler) for h in sdk.handlers):
        # With a handler present, logging's last-resort stderr printer is not used; records
        # still propagate to any handler the application installs on the root logger.
        sdk.addHandler(logging.NullHandler())


def _pick_leaf(exc: BaseException) -> BaseException:
    """The most telling exception inside nested ExceptionGroups (an OS or MCP error first)."""
    from mcp.shared.exceptions import MCPError

    leaves = exception_leaves(exc)
    for kind in (OSError, MCPError, TimeoutError):
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    real = [leaf for leaf in leaves if not isinstance(leaf, asyncio.CancelledError)]
    return (real or leaves or [exc])[0]
