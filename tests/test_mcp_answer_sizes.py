"""What an MCP server sends costs planrun bounded memory: a message larger than the limit (a
line of a stdio server's stdout, an HTTP body, a server-sent event) ends that server's session
with one line naming the server and the limit, and a tool list that pages on and on is cut
short. Each case runs planrun as a real process, its memory capped, and measures its peak."""

from __future__ import annotations

import codecs
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planrun.mcp.limits import (
    MAX_MESSAGE_BYTES,
    MAX_TOOL_LIST_BYTES,
    SDK_SSE_EVENT_BYTES,
    Guard,
    stdio_encoding,
)
from tests.conftest import (
    ROOT,
    Result,
    assert_no_process_left,
    assert_no_traceback,
    unique_mark,
    wait_until,
)
from tests.testkit import peak_run

# MCP servers take seconds to start: `pytest -m 'not slow'` skips those tests.
slow = pytest.mark.slow

HOSTILE = ROOT / "tests" / "mcp_servers" / "hostile_server.py"
GIB = 1 << 30
PEAK = 400 << 20
"""planrun's peak memory in these runs: what it needs (~100 MB) and one message held at the
limit (64 MiB, a few copies while it is read and parsed), far less than what was sent."""
BOUNDED: dict[str, Any] = {"capped": True, "timeout": 120}


def _plan(tmp_path: Path, server: str, *steps: str) -> None:
    lines = ["servers:", f"  h: {server}", "defaults: {on_failure: continue}", "steps:"]
    lines += [f"  - {step}" for step in steps]
    (tmp_path / "p.yaml").write_text("\n".join(lines) + "\n")


def _stdio(mark: str, *flags: str) -> str:
    args = ", ".join(f'"{a}"' for a in (HOSTILE, mark, *flags))
    return f'{{command: "{sys.executable}", args: [{args}]}}'


def _steps(r: Result) -> dict[str, dict[str, Any]]:
    assert_no_traceback(r)
    assert "MemoryError" not in r.err and "internal error" not in r.err, r.err[-2000:]
    return {s["id"]: s for s in r.json["steps"]}


def _refused(step: dict[str, Any], tool: str) -> None:
    assert step["status"] == "failed", step
    error = step["error"]
    assert "\n" not in error, error
    assert error.startswith(f"MCP server 'h' tool '{tool}': "), error
    assert f"{MAX_MESSAGE_BYTES >> 20} MiB" in error, error


@slow
def test_a_stdio_line_past_the_limit_ends_the_server_in_bounded_memory(tmp_path: Path) -> None:
    mark = unique_mark()
    _plan(
        tmp_path,
        _stdio(mark),
        f"{{id: a, tool: h.long_line, args: {{size: {GIB}}}, timeout: 60s}}",
        "{id: b, tool: h.say, args: {text: later}, depends_on: [a]}",
    )
    r, peak = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 1, r
    _refused(steps["a"], "long_line")
    assert steps["b"]["status"] == "skipped", steps["b"]
    assert peak < PEAK, f"peak RSS {peak >> 20} MiB"
    assert_no_process_left(mark)


@slow
def test_a_later_call_to_a_refused_server_fails_with_the_same_reason(tmp_path: Path) -> None:
    mark = unique_mark()
    _plan(
        tmp_path,
        _stdio(mark),
        f"{{id: a, tool: h.long_line, args: {{size: {MAX_MESSAGE_BYTES + 1}}}}}",
        "{id: b, tool: h.say, args: {text: later}, depends_on: [a], always: true}",
    )
    r, _ = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 1, r
    _refused(steps["a"], "long_line")
    _refused(steps["b"], "say")
    assert_no_process_left(mark)


@slow
def test_a_handshake_answer_past_the_limit_fails_the_start_at_once(tmp_path: Path) -> None:
    mark = unique_mark()
    _plan(tmp_path, _stdio(mark, "--long-hello"), "{id: a, tool: h.say, args: {text: hi}}")
    r, peak = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 1, r
    error = steps["a"]["error"]  # not the handshake's 20 s timeout
    assert error.startswith("MCP server 'h': the server sent a message larger than 64 MiB"), error
    assert "\n" not in error, error
    assert peak < PEAK, f"peak RSS {peak >> 20} MiB"
    assert_no_process_left(mark)


@slow
def test_a_stdio_answer_just_under_the_limit_is_read(tmp_path: Path) -> None:
    mark = unique_mark()
    size = MAX_MESSAGE_BYTES - (1 << 20)
    _plan(tmp_path, _stdio(mark), f"{{id: a, tool: h.long_line, args: {{size: {size}}}}}")
    # not capped: reading, parsing and printing 63 MiB takes ~450 MB, near the cap
    r, _ = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", timeout=120)
    steps = _steps(r)
    assert r.code == 0, r.err[-2000:]
    assert steps["a"]["result"] == "x" * size
    assert_no_process_left(mark)


@slow
def test_a_tool_list_without_end_is_cut_short_in_bounded_memory(tmp_path: Path) -> None:
    """Pages of 100 tools with 64 KiB descriptions, each with a next cursor, forever."""
    mark = unique_mark()
    _plan(tmp_path, _stdio(mark, "--pages"), "{id: a, tool: h.t0_0}")
    r, peak = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 1, r
    error = steps["a"]["error"]  # the tools are not checked; the server does not know t0_0
    assert "\n" not in error and "MCP server 'h'" in error, error
    assert peak < PEAK, f"peak RSS {peak >> 20} MiB"
    r, peak = peak_run(tmp_path, "tools", "p.yaml", **BOUNDED)
    assert r.code == 1, r
    assert_no_traceback(r)
    assert r.err.startswith("planrun: error: MCP server 'h' tools/list: "), r.err
    assert f"{MAX_TOOL_LIST_BYTES >> 20} MiB" in r.err, r.err
    assert peak < PEAK, f"peak RSS {peak >> 20} MiB"
    assert_no_process_left(mark)


@slow
def test_a_tool_list_of_many_small_pages_is_cut_short(tmp_path: Path) -> None:
    mark = unique_mark()
    flags = ("--pages", "--tools", "1", "--description", "1")
    _plan(tmp_path, _stdio(mark, *flags), "{id: a, tool: h.t0_0}")
    r, _ = peak_run(tmp_path, "tools", "p.yaml", **BOUNDED)
    assert r.code == 1, r
    assert_no_traceback(r)
    assert r.err.startswith("planrun: error: MCP server 'h' tools/list: "), r.err
    assert "pages" in r.err, r.err
    assert_no_process_left(mark)


@pytest.fixture
def http_server() -> Iterator[Any]:
    """Start the hostile server over streamable HTTP with FLAGS; yields a starter."""
    started: list[subprocess.Popen[str]] = []

    def start(*flags: str) -> str:
        proc = subprocess.Popen(
            [sys.executable, str(HOSTILE), "--http", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()  # `listening PORT` once it listens
        assert line.startswith("listening "), line
        return f"{{type: http, url: 'http://127.0.0.1:{line.split()[1]}/mcp'}}"

    yield start
    for proc in started:
        proc.kill()
        proc.wait(10)


@slow
@pytest.mark.parametrize("answers", ["json", "sse"])
def test_an_http_answer_past_the_limit_ends_the_session_in_bounded_memory(
    tmp_path: Path, http_server: Any, answers: str
) -> None:
    server = http_server(*(["--sse-answers"] if answers == "sse" else []))
    _plan(
        tmp_path,
        server,
        f"{{id: a, tool: h.long_line, args: {{size: {GIB}}}, timeout: 60s}}",
        "{id: b, tool: h.say, args: {text: later}, depends_on: [a], always: true}",
    )
    r, peak = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 1, r
    _refused(steps["a"], "long_line")
    _refused(steps["b"], "say")
    assert peak < PEAK, f"peak RSS {peak >> 20} MiB"


@slow
@pytest.mark.parametrize("answers", ["json", "sse"])
def test_an_http_answer_of_megabytes_is_read(
    tmp_path: Path, http_server: Any, answers: str
) -> None:
    server = http_server(*(["--sse-answers"] if answers == "sse" else []))
    _plan(tmp_path, server, f"{{id: a, tool: h.long_line, args: {{size: {8 << 20}}}}}")
    r, _ = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 0, r.err[-2000:]
    assert steps["a"]["result"] == "x" * (8 << 20)


@slow
def test_a_compressed_http_answer_is_refused(tmp_path: Path, http_server: Any) -> None:
    """planrun asks for answers as they are: a compressed one (which may unpack to gigabytes)
    is refused, whatever its size."""
    _plan(tmp_path, http_server("--gzip"), "{id: a, tool: h.say, args: {text: hi}}")
    r, _ = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
    steps = _steps(r)
    assert r.code == 1, r
    error = steps["a"]["error"]
    assert error.startswith("MCP server 'h'") and "compressed" in error and "\n" not in error


# ---- the stdio codec, byte by byte ----------------------------------------------------------


def _decoder(limit: int) -> tuple[Any, Guard, list[int]]:
    ended: list[int] = []
    guard = Guard(lambda: ended.append(1), limit=limit)
    name = stdio_encoding(guard)
    return codecs.getincrementaldecoder(name)(), guard, ended


def test_the_stdio_codec_hands_on_whole_lines_across_chunks() -> None:
    decoder, guard, ended = _decoder(10)
    assert decoder.decode(b'{"a":1}\n{"b"') == '{"a":1}\n'
    assert decoder.decode(b":2}") == ""
    assert decoder.decode(b"\n") == '{"b":2}\n'
    assert decoder.decode("é\n".encode()[:1]) == ""  # half a character, then the rest
    assert decoder.decode("é\n".encode()[1:] + b"1\n22\n3") == "é\n1\n22\n"
    assert decoder.decode(b"", final=True) == "3"
    assert decoder.decode(b"x" * 10 + b"\n") == "x" * 10 + "\n"  # exactly the limit
    assert guard.reason is None and not ended


@pytest.mark.parametrize(
    "chunks",
    [
        [b"x" * 11],  # no line end yet
        [b"x" * 6, b"x" * 5],  # across chunks
        [b"x" * 6, b"x" * 5 + b"\nok\n"],  # the line ends, past the limit
        [b"ok\n" + b"x" * 11 + b"\nok\n"],  # a line inside one chunk
        [b"ok\n" + b"x" * 11],  # what follows the last line end
    ],
)
def test_the_stdio_codec_refuses_a_line_past_the_limit_once(chunks: list[bytes]) -> None:
    decoder, guard, ended = _decoder(10)
    text = "".join(decoder.decode(c) for c in [*chunks, b"more\n", b"x" * 100])
    assert "x" not in text and "more" not in text, text
    assert ended == [1]
    assert guard.reason is not None and "larger than" in guard.reason


def test_the_stdio_codec_writes_utf_8() -> None:
    _, guard, _ = _decoder(10)
    assert "é\n".encode(stdio_encoding(guard)) == "é\n".encode()


@slow
def test_a_legacy_sse_event_past_the_sdk_s_limit_names_that_limit(tmp_path: Path) -> None:
    """A legacy SSE server's events pass through the SDK's own 1 MiB bound, which planrun
    cannot raise: an answer past it fails with that limit named, not as a crashed server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    crashy = ROOT / "tests" / "mcp_servers" / "crashy_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(crashy), "--sse", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: _listening(port) or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, "server did not start"
        server = f"{{type: sse, url: 'http://127.0.0.1:{port}/sse'}}"
        text = "y" * (SDK_SSE_EVENT_BYTES + 1000)
        _plan(
            tmp_path,
            server,
            "{id: a, tool: h.echo, args: {text: small}}",
            f"{{id: b, tool: h.echo, args: {{text: {text}}}, depends_on: [a]}}",
        )
        r, _ = peak_run(tmp_path, "run", "p.yaml", "--output", "json", "--no-state", **BOUNDED)
        steps = _steps(r)
        assert r.code == 1, r
        assert steps["a"]["status"] == "succeeded", steps["a"]
        error = steps["b"]["error"]
        assert error.startswith("MCP server 'h' tool 'echo': the server sent an event larger"), (
            error
        )
        assert f"{SDK_SSE_EVENT_BYTES >> 20} MiB" in error, error
    finally:
        proc.terminate()
        proc.wait(10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True
