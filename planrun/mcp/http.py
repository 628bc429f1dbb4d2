"""`planrun mcp --http`: the server over streamable HTTP, where a signal first stops the runs."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: uvicorn only when serving HTTP.
import asyncio
import socket
from typing import TYPE_CHECKING, Any

from planrun.errors import UsageError

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from planrun.mcp.runs import Runs

HTTP_GRACE_S = 5  # seconds a stopping HTTP server waits for connections to close


def parse_http_address(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT` (host defaults to 127.0.0.1); `[::1]:PORT` for IPv6."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = "", value
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"--http expects HOST:PORT, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"--http: port {port} out of range")
    return host, port


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before the server starts so that a port in use is a plain
    usage error (uvicorn would exit 3, planrun's code for an invalid plan)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        raise UsageError(f"--http: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


async def serve_http(app: Starlette, runs: Runs, host: str, port: int, sock: socket.socket) -> None:
    """`MCPServer.run("streamable-http")`, but a signal first stops the runs in flight.

    uvicorn's graceful shutdown waits for open connections, and a run in flight keeps its
    request open: so the first SIGTERM/SIGINT interrupts the runs (their calls are answered
    with `interrupted` documents), then uvicorn shuts down as usual.
    """
    import uvicorn

    loop = asyncio.get_running_loop()

    class Server(uvicorn.Server):
        stopping = False

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.stopping or not runs.tasks:
                super().handle_exit(sig, frame)
                return
            self.stopping = True
            runs.interrupt_soon(loop, lambda: super(Server, self).handle_exit(sig, frame))

    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=HTTP_GRACE_S
    )
    await Server(config).serve(sockets=[sock])
