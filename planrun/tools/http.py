"""The `http` tool: one HTTP request with httpx2; JSON responses come back decoded."""

from __future__ import annotations

# Lazy imports (inside functions), for start-up time: httpx2 only when an http step runs.
import asyncio
import json
import ssl
from typing import TYPE_CHECKING, Any

from planrun import untrusted_json
from planrun.text import type_name
from planrun.tools import check_args
from planrun.tools.base import MAX_RESULT_BYTES, ToolContext, ToolFailed

if TYPE_CHECKING:
    import httpx2

_OPTIONAL = ("method", "headers", "json", "body", "expect_status", "timeout")
_DEFAULT_TIMEOUT_S = 300.0  # only when neither the step nor the call sets one
_DETAIL_CHARS = 500
_TCHAR = "!#$%&'*+-.^_`|~"  # what a method (an HTTP token) may hold besides letters and digits

_ssl_context: ssl.SSLContext | None = None


def _ssl() -> ssl.SSLContext:
    # Building the default SSL context costs ~20 ms; every call can share one.
    global _ssl_context
    if _ssl_context is None:
        import httpx2

        _ssl_context = httpx2.create_ssl_context()
    return _ssl_context


async def run_http(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Send the request; result `{status, headers, json}` or `{status, headers, text}`."""
    check_args("http", args, ("url",), _OPTIONAL)
    url = args["url"]
    if not isinstance(url, str) or not url:
        raise ToolFailed(f"http: 'url' must be a non-empty string, got {type_name(url)}")
    method = args.get("method") or "GET"
    if not isinstance(method, str):
        raise ToolFailed(f"http: 'method' must be a string, got {type_name(method)}")
    method = method.upper()
    if not method or not all(c.isascii() and (c.isalnum() or c in _TCHAR) for c in method):
        raise ToolFailed(f"http: 'method' must be an HTTP method name, got {method!r}")
    headers = args.get("headers") or {}
    if not isinstance(headers, dict):
        raise ToolFailed(f"http: 'headers' must be a mapping, got {type_name(headers)}")
    headers = _headers(headers)
    body = args.get("body")
    if body is not None and not isinstance(body, str):
        raise ToolFailed(f"http: 'body' must be a string, got {type_name(body)}")
    if body is not None and "json" in args:
        raise ToolFailed("http: give either 'json' or 'body', not both")
    expect = _expect_status(args.get("expect_status"))
    timeout = args.get("timeout")
    if timeout is None:
        timeout = ctx.timeout or _DEFAULT_TIMEOUT_S
    elif isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ToolFailed(f"http: 'timeout' must be a positive number of seconds, got {timeout!r}")

    import httpx2

    _check_port(url)
    request: dict[str, Any] = {"headers": headers}
    if "json" in args:
        request["json"] = args["json"]
    elif body is not None:
        request["content"] = body.encode("utf-8")
    try:
        # `timeout` bounds the whole request: httpx's own bounds each read, which a body that
        # trickles in one byte at a time never meets.
        async with (
            asyncio.timeout(timeout),
            httpx2.AsyncClient(timeout=timeout, follow_redirects=True, verify=_ssl()) as client,
        ):
            response, body = await _fetch(client, method, url, request)
    except (httpx2.TimeoutException, TimeoutError):
        raise ToolFailed(f"timed out after {timeout:g}s: {method} {url}") from None
    except httpx2.ConnectError as exc:
        raise ToolFailed(f"cannot connect to {url}: {_reason(exc)}") from None
    except (httpx2.InvalidURL, httpx2.UnsupportedProtocol) as exc:
        raise ToolFailed(f"http: invalid URL {url!r}: {_reason(exc)}") from None
    except httpx2.TooManyRedirects:
        raise ToolFailed(f"too many redirects: {method} {url}") from None
    except httpx2.HTTPError as exc:
        raise ToolFailed(f"{method} {url} failed: {_reason(exc)}") from None
    except TypeError as exc:  # e.g. a `json` value that cannot be encoded
        raise ToolFailed(f"http: cannot encode the request: {exc}") from None
    except ExceptionGroup as group:  # a socket's own error, from inside the client's tasks
        raise ToolFailed(f"{method} {url} failed: {_reason(_first_leaf(group))}") from None

    result: dict[str, Any] = {"status": response.status_code, "headers": dict(response.headers)}
    text = body.decode(response.encoding or "utf-8", errors="replace")
    decoded = _json_body(response.headers.get("content-type", ""), text)
    if decoded is not _NOT_JSON:
        result["json"] = decoded
    else:
        result["text"] = text
    status = response.status_code
    refused = status >= 400 if expect is None else status not in expect
    if refused:
        wanted = "" if expect is None else f" (expected {', '.join(map(str, expect))})"
        message = f"HTTP {status} from {method} {url}{wanted}"
        raise ToolFailed(message, detail=text[:_DETAIL_CHARS], result=result)
    return result


async def _fetch(
    client: httpx2.AsyncClient, method: str, url: str, request: dict[str, Any]
) -> tuple[httpx2.Response, bytes]:
    """The response and its body, read only up to MAX_RESULT_BYTES: the body becomes the
    step's result, and a server may send one without end."""
    async with client.stream(method, url, **request) as response:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_RESULT_BYTES:
                raise ToolFailed(
                    f"http: response body larger than {MAX_RESULT_BYTES >> 20} MiB: {method} {url}"
                )
            chunks.append(chunk)
    return response, b"".join(chunks)


def _headers(given: dict[Any, Any]) -> dict[str, bytes]:
    """The request's headers: each name an HTTP token, each value text (a non-string as JSON)
    sent as UTF-8, as curl sends what it is given (the library would take ASCII only)."""
    headers: dict[str, bytes] = {}
    for name, value in given.items():
        name = str(name)
        if not name or not all(c.isascii() and (c.isalnum() or c in _TCHAR) for c in name):
            raise ToolFailed(f"http: header name {name!r} is not an HTTP token")
        text = value if isinstance(value, str) else json.dumps(value)
        if any(c in text for c in "\r\n\0"):
            raise ToolFailed(f"http: header {name!r} holds a line break or a NUL byte")
        try:
            headers[name] = text.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolFailed(
                f"http: header {name!r} contains text that is not valid Unicode (a lone surrogate)"
            ) from None
    return headers


def _check_port(url: str) -> None:
    """The URL's port is one a socket takes: the parser reads any number, and the socket's
    refusal would come from inside the client's task group."""
    import httpx2

    try:
        port = httpx2.URL(url).port
    except httpx2.InvalidURL as exc:
        raise ToolFailed(f"http: invalid URL {url!r}: {_reason(exc)}") from None
    if port is not None and not 0 <= port <= 65535:
        raise ToolFailed(f"http: invalid URL {url!r}: the port must be 0 to 65535")


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _expect_status(value: Any) -> list[int] | None:
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not items or any(isinstance(s, bool) or not isinstance(s, int) for s in items):
        raise ToolFailed(
            f"http: 'expect_status' must be a status code or a list of them, got {value!r}"
        )
    return items


_NOT_JSON = object()


def _json_body(content_type: str, text: str) -> Any:
    """The decoded body when the content type is JSON and it parses, else `_NOT_JSON`."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        return _NOT_JSON
    try:
        return untrusted_json.loads(text)  # NaN, or nesting a million deep, is not JSON
    except ValueError:
        return _NOT_JSON


def _reason(exc: BaseException) -> str:
    """One line: the exception's message, or its type when it has none."""
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__
