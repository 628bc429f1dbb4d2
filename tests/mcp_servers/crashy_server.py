"""A small MCP server for planrun's tests: echoes, fails on request, or dies mid-call."""

import logging
import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("crashy", log_level="WARNING")
logging.getLogger().setLevel(logging.WARNING)


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ('' over stdio or when absent)."""
    request = ctx.request_context.request
    return request.headers.get(name, "") if request is not None else ""


@server.tool()
def fail(message: str) -> str:
    """Report a tool error with this message."""
    raise ToolError(message)


@server.tool()
def nap(seconds: float) -> str:
    """Sleep this long, then answer (blocks the server, as a stuck tool would)."""
    time.sleep(seconds)
    return "rested"


@server.tool()
def crash() -> str:
    """Exit the server process at once, as a crashing server would."""
    print("crashy: about to crash", file=sys.stderr, flush=True)
    os._exit(1)


if __name__ == "__main__":
    # crashy_server.py [--noisy] [--http PORT | --sse PORT]
    print("crashy: started", file=sys.stderr, flush=True)
    argv = sys.argv[1:]
    if argv[:1] == ["--noisy"]:  # a stray print on stdout, which a stdio client must survive
        print("this line is not JSON-RPC", flush=True)
        argv = argv[1:]
    if argv[:1] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    elif argv[:1] == ["--sse"]:
        server.run("sse", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run()
