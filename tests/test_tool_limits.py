"""`read_file` and `http` with hostile input: a FIFO, a device, a file or a response body
without end, a body that trickles, JSON nested without end. Each fails its step (or falls back
to text) in one line, at once, in bounded memory: never a hang, a MemoryError or a
RecursionError."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.conftest import assert_no_traceback, planrun_process, serve_http

DEPTH = 100_000


class _Hostile(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _head(self, content_type: str, length: int | None = None) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        if length is not None:
            self.send_header("content-length", str(length))
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 (the handler's name)
        try:
            if self.path == "/deep":
                body = b"[" * DEPTH + b"]" * DEPTH
                self._head("application/json", len(body))
                self.wfile.write(body)
            elif self.path == "/endless":  # a body that never ends, as fast as it is read
                self._head("text/plain")
                chunk = b"x" * 65536
                while True:
                    self.wfile.write(chunk)
            elif self.path == "/trickle":  # one byte every 0.2 s, forever
                self._head("text/plain")
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
        except OSError:  # the client went away
            pass


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    with serve_http(_Hostile) as url:
        yield url


def _run_one(tmp_path: Path, step: str, timeout: float = 60) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    (tmp_path / "p.yaml").write_text(f"steps:\n  - {step}\n")
    r = planrun_process(
        "run",
        "p.yaml",
        "--no-state",
        "--output",
        "json",
        cwd=tmp_path,
        timeout=timeout,
        capped=True,
    )
    assert_no_traceback(r)
    assert "MemoryError" not in r.err and "RecursionError" not in r.err, r
    return r.code, r.err, r.json["steps"][0]


def _one_line_failure(step: dict, *words: str) -> None:  # type: ignore[type-arg]
    assert step["status"] == "failed", step
    error = step["error"]
    assert "\n" not in error, error
    for word in words:
        assert word in error, error


def test_read_file_of_a_fifo_fails_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")  # no writer: opening it to read would block forever
    # Opening it would block for ever: the run's timeout (a bound, not a speed) catches that.
    code, _, step = _run_one(tmp_path, "{id: a, tool: read_file, args: {path: pipe}}")
    assert code == 1
    _one_line_failure(step, "pipe", "FIFO")


def test_read_file_of_a_device_fails(tmp_path: Path) -> None:
    code, _, step = _run_one(tmp_path, "{id: a, tool: read_file, args: {path: /dev/zero}}")
    assert code == 1
    _one_line_failure(step, "/dev/zero", "device")


def test_read_file_larger_than_the_limit_fails_before_reading(tmp_path: Path) -> None:
    with open(tmp_path / "huge.txt", "wb") as f:
        f.truncate(3 << 30)  # sparse: 3 GiB claimed, nothing on disk
    code, _, step = _run_one(tmp_path, "{id: a, tool: read_file, args: {path: huge.txt}}")
    assert code == 1
    _one_line_failure(step, "huge.txt", "MiB")


def test_read_file_below_the_limit_still_reads_it_whole(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("ab\n" * 1_000_000)
    code, _, step = _run_one(tmp_path, "{id: a, tool: read_file, args: {path: big.txt}}")
    assert code == 0, step
    assert step["result"] == "ab\n" * 1_000_000


def test_http_body_without_end_fails_in_bounded_memory(tmp_path: Path, hostile: str) -> None:
    code, _, step = _run_one(tmp_path, f'{{id: a, tool: http, args: {{url: "{hostile}/endless"}}}}')
    assert code == 1
    _one_line_failure(step, "response body", "MiB")


def test_http_body_that_trickles_meets_the_request_timeout(tmp_path: Path, hostile: str) -> None:
    # The body trickles for ever: a timeout per read would never end the step, and the run's
    # timeout (a bound, not a speed) would catch that.
    code, _, step = _run_one(
        tmp_path, f'{{id: a, tool: http, args: {{url: "{hostile}/trickle", timeout: 1}}}}'
    )
    assert code == 1
    _one_line_failure(step, "timed out after 1s")


def test_http_json_nested_without_end_is_text(tmp_path: Path, hostile: str) -> None:
    code, _, step = _run_one(tmp_path, f'{{id: a, tool: http, args: {{url: "{hostile}/deep"}}}}')
    assert code == 0, step
    assert "json" not in step["result"]
    assert step["result"]["text"] == "[" * DEPTH + "]" * DEPTH


@pytest.mark.parametrize("name", ["A=B", ""])
def test_an_env_name_no_process_can_take_is_planruns_own_line(tmp_path: Path, name: str) -> None:
    code, _, step = _run_one(
        tmp_path, f'{{id: a, tool: shell, args: {{cmd: "true", env: {{"{name}": "x"}}}}}}'
    )
    assert code == 1
    _one_line_failure(step, "shell: env name", repr(name))
    assert "ValueError" not in step["error"], step


def test_an_http_method_that_is_not_a_token_is_one_line(tmp_path: Path, hostile: str) -> None:
    code, _, step = _run_one(
        tmp_path, f'{{id: a, tool: http, args: {{url: "{hostile}/deep", method: "GET\\nX"}}}}'
    )
    assert code == 1
    _one_line_failure(step, "http: 'method'", "'GET\\nX'")
