"""An MCP server written by hand (no SDK) that misbehaves on request, for planrun's tests.

It answers the handshake and tools/list properly; each tool misbehaves in its own way:

- `nan`: text content `NaN`; `nan_json`: text content `{"x": NaN, "y": Infinity}`;
  `nan_structured`: structured content holding NaN (a JSON-RPC line with a bare NaN in it)
- `garbage`: a line that is not JSON, then nothing
- `wrong_id`: an answer under another request id, then nothing
- `huge`: a text content of `size` characters (argument, default 8 MB)
- `say`: text content `text` (argument) as is
- `odd.name`: a tool whose name holds a dot
- `chatty`: a log notification, a stray progress notification and two requests to the client
  (roots, sampling) before its answer
- `refy`: an input schema whose `$ref` resolves nowhere (answers like `say`)
- `fail`: a tool error (`isError`) whose text is `lines` lines of `size` characters in all
  (arguments, default 1 MB in one line); `rpc_error`: a JSON-RPC error whose message is that
- `long_line`: an answer `size` bytes long (argument, default 1 GiB), written 1 MiB at a time
  (the server never holds it), a text content the client must refuse to read whole

`--long-hello`: the answer to `initialize` is 1 GiB long, as `long_line`'s.
`--pages`: tools/list answers page after page, each with another `nextCursor` and `tools` tools
(`--tools N`, default 100) whose descriptions are `--description N` characters (default 64 KiB).
`--http`: serve streamable HTTP on 127.0.0.1 (prints `listening PORT` on stdout); each answer
is a JSON body, except `long_line` under `--sse-answers`: one server-sent event that long;
`--gzip`: every answer compressed (`content-encoding: gzip`), whatever the client asked for.
"""

import contextlib
import gzip
import json
import sys

TOOLS = [
    {"name": "nan", "inputSchema": {"type": "object"}},
    {"name": "nan_json", "inputSchema": {"type": "object"}},
    {"name": "nan_structured", "inputSchema": {"type": "object"}},
    {"name": "garbage", "inputSchema": {"type": "object"}},
    {"name": "wrong_id", "inputSchema": {"type": "object"}},
    {"name": "huge", "inputSchema": {"type": "object"}},
    {"name": "say", "inputSchema": {"type": "object"}},
    {"name": "odd.name", "inputSchema": {"type": "object"}},
    {"name": "chatty", "inputSchema": {"type": "object"}},
    {"name": "fail", "inputSchema": {"type": "object"}},
    {"name": "rpc_error", "inputSchema": {"type": "object"}},
    {"name": "long_line", "inputSchema": {"type": "object"}},
    {"name": "refy", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "#/nowhere"}}}},
]
if "--bad-schema" in sys.argv:
    TOOLS.append({"name": "broken", "inputSchema": "not a schema"})
if "--odd-tools" in sys.argv:  # control characters in a name and a description
    TOOLS.append(
        {
            "name": "odd\x1b[31m",
            "description": "\x1b]0;pwned\x07 line one\nline two",
            "inputSchema": {"type": "object", "properties": {"a\nb": {}}},
        }
    )


def _option(name: str, default: int) -> int:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


class Out:
    """Where answers go: stdout, or the body of an HTTP answer (--http)."""

    write = staticmethod(sys.stdout.write)
    flush = staticmethod(sys.stdout.flush)


def send(msg: object) -> None:
    Out.write(json.dumps(msg) + "\n")
    Out.flush()


def long_line(request_id: object, size: int) -> None:
    """An answer of `size` bytes, the text content written a mebibyte at a time."""
    head = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "@"}]}}
    )
    before, after = head.split("@")
    chunk = "x" * (1 << 20)
    try:
        Out.write(before)
        for _ in range(size >> 20):
            Out.write(chunk)
        Out.write(after + "\n")
        Out.flush()
    except BrokenPipeError:  # the client stopped reading
        sys.exit(0)


def tool_page(request_id: object, cursor: object) -> None:
    """One page of an endless tool list (--pages)."""
    page = int(cursor or 0)
    count, size = _option("--tools", 100), _option("--description", 65536)
    tools = [
        {"name": f"t{page}_{i}", "description": "d" * size, "inputSchema": {"type": "object"}}
        for i in range(count)
    ]
    send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"tools": tools, "nextCursor": str(page + 1)},
        }
    )


def text(request_id: object, value: str) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": [{"type": "text", "text": value}]},
        }
    )


def call(request_id: object, name: str, args: dict) -> None:
    if name == "nan":
        text(request_id, "NaN")
    elif name == "nan_json":
        text(request_id, '{"x": NaN, "y": Infinity}')
    elif name == "nan_structured":
        result = {"content": [], "structuredContent": {"x": float("nan")}}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})  # json writes NaN as is
    elif name == "garbage":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    elif name == "wrong_id":
        text(f"{request_id}-other", "for someone else")
    elif name == "huge":
        text(request_id, "x" * int(args.get("size", 8_000_000)))
    elif name in ("fail", "rpc_error"):
        size, lines = int(args.get("size", 1_000_000)), int(args.get("lines", 1))
        message = "\n".join("e" * (size // lines) for _ in range(lines))
        if name == "fail":
            content = [{"type": "text", "text": message}]
            result = {"content": content, "isError": True}
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        else:
            error = {"code": -32603, "message": message}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
    elif name == "chatty":  # a log message, a progress note and a request to the client first
        note = {"level": "error", "data": "\x1b[31mserver log line"}
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": note})
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1},
            }
        )
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"})
        send({"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage", "params": {}})
        text(request_id, "chatted")
    elif name == "long_line":
        long_line(request_id, int(args.get("size", 1 << 30)))
    elif name in ("say", "refy"):
        text(request_id, str(args.get("text", "")))
    elif name == "odd.name":
        text(request_id, "odd")
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32602, "message": f"Unknown tool: {name}"},
            }
        )


def answer(msg: dict) -> None:
    """Answer one request from the client."""
    method, request_id = msg.get("method"), msg.get("id")
    if method == "initialize" and "--long-hello" in sys.argv:
        long_line(request_id, 1 << 30)
    elif method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "0"},
                },
            }
        )
    elif method == "tools/list" and "--pages" in sys.argv:
        tool_page(request_id, (msg.get("params") or {}).get("cursor"))
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        call(request_id, msg["params"]["name"], msg["params"].get("arguments") or {})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})


def serve_http() -> None:
    """Streamable HTTP, by hand: every request's answer is the body of its POST."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            msg = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if msg.get("id") is None or "method" not in msg:
                self.send_response(202)
                self.end_headers()
                return
            sse = (
                "--sse-answers" in sys.argv and (msg.get("params") or {}).get("name") == "long_line"
            )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if sse else "application/json")
            if "--gzip" in sys.argv:  # the whole answer, compressed (small answers only)
                held: list[str] = []
                Out.write = held.append  # type: ignore[method-assign]
                Out.flush = lambda: None  # type: ignore[method-assign]
                answer(msg)
                self.send_header("content-encoding", "gzip")
                self.end_headers()
                self.wfile.write(gzip.compress("".join(held).encode()))
                return
            self.end_headers()
            body = self.wfile  # (one request at a time: Out is shared)
            if sse:
                body.write(b"event: message\ndata: ")
            Out.write = lambda text: body.write(text.encode())  # type: ignore[method-assign]
            Out.flush = body.flush  # type: ignore[method-assign]
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client left
                answer(msg)
                if sse:
                    body.write(b"\n")  # the blank line that ends the event

        def do_GET(self) -> None:  # noqa: N802 (no stream of server-initiated messages)
            self.send_response(405)
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


def main() -> None:
    print("hostile: started", file=sys.stderr, flush=True)
    if "--http" in sys.argv:
        serve_http()
        return
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("id") is None or "method" not in msg:
            continue  # a notification, or the client's answer to a request of ours
        answer(msg)


if __name__ == "__main__":
    main()
