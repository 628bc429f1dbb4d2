"""planrun.mcp.client against real MCP servers: mcp-server-time, mcp-server-git and small scripts."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from planrun.errors import UsageError
from planrun.mcp.client import ServerPool, check_tool_args, map_tool_result, parse_mcp_config
from planrun.plan.definition import ServerEntry
from planrun.tools.base import ToolFailed
from tests.conftest import (
    assert_no_process_left,
    serve_http,
    unique_sleep,
    wait_for_command,
    wait_until,
)

# MCP servers and Dask clusters take seconds to start: `pytest -m 'not slow'` skips these.
pytestmark = pytest.mark.slow

SERVERS_DIR = Path(__file__).parent / "mcp_servers"
CRASHY = ServerEntry(command=sys.executable, args=[str(SERVERS_DIR / "crashy_server.py")])
SILENT = ServerEntry(command=sys.executable, args=[str(SERVERS_DIR / "silent_server.py")])
TIME = ServerEntry(command="mcp-server-time")
HOSTILE = ServerEntry(command=sys.executable, args=[str(SERVERS_DIR / "hostile_server.py")])

needs_time = pytest.mark.skipif(
    shutil.which("mcp-server-time") is None, reason="mcp-server-time not installed"
)
needs_git = pytest.mark.skipif(
    shutil.which("mcp-server-git") is None, reason="mcp-server-git not installed"
)


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    # A bound on a hang, not a timing claim: every scenario here ends in seconds.
    return asyncio.run(asyncio.wait_for(coro_fn(), 120))  # type: ignore[arg-type]


def children() -> list[psutil.Process]:
    """Live (non-zombie) descendants of this test process, but for the session's Dask cluster
    (a fixture of other test files that may still be running)."""
    alive = []
    cluster: set[int] = set()
    for proc in psutil.Process().children():
        try:
            cmd = " ".join(proc.cmdline())
            # the session's Dask cluster, and multiprocessing's resource tracker that an
            # in-process LocalCluster leaves for the life of the test process
            if "dask" in cmd or "multiprocessing.resource_tracker" in cmd:
                cluster.add(proc.pid)
                cluster.update(c.pid for c in proc.children(recursive=True))
        except psutil.Error:
            pass
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.pid not in cluster and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            pass
    return alive


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Any:
    before = {p.pid for p in children()}
    yield
    left = [p for p in children() if p.pid not in before]
    assert not left, f"processes left running: {[p.cmdline() for p in left]}"


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=planrun", "-c", "user.email=planrun@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "README.md").write_text("hello\n")
    subprocess.run([*git, "add", "README.md"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], cwd=repo, check=True)
    (repo / "new.txt").write_text("untracked\n")
    return repo


# --------------------------------------------------------------------------- real servers


@needs_time
def test_time_server_structured_results(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"time": TIME}, cwd=str(tmp_path)) as pool:
            now = await pool.call("time", "get_current_time", {"timezone": "UTC"})
            assert now["timezone"] == "UTC" and now["datetime"].endswith("+00:00")
            assert set(now) == {"timezone", "datetime", "day_of_week", "is_dst"}
            conv = await pool.call(
                "time",
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            )
            assert conv["target"]["datetime"][11:16] == "21:00"
            assert conv["time_difference"] == "+9.0h"
            tools = await pool.list_tools("time")
            assert {t["name"] for t in tools} == {"get_current_time", "convert_time"}
            assert all(t["input_schema"]["type"] == "object" and t["description"] for t in tools)

    run(main)


@needs_git
def test_git_server_text_results(tmp_path: Path, git_repo: Path) -> None:
    async def main() -> None:
        entry = ServerEntry(command="mcp-server-git", args=["--repository", str(git_repo)])
        async with ServerPool({"git": entry}, cwd=str(tmp_path)) as pool:
            status = await pool.call("git", "git_status", {"repo_path": str(git_repo)})
            assert isinstance(status, str) and "new.txt" in status
            log = await pool.call("git", "git_log", {"repo_path": str(git_repo)})
            assert isinstance(log, str) and "first commit" in log
            # A path outside the repository is the tool's own error (is_error), not a crash.
            with pytest.raises(ToolFailed) as err:
                await pool.call("git", "git_status", {"repo_path": str(tmp_path)})
            assert err.value.message.startswith("MCP server 'git' tool 'git_status' failed: ")
            assert "outside the allowed repository" in err.value.message

    run(main)


@needs_time
def test_concurrent_calls_share_one_server_process(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"time": TIME}, cwd=str(tmp_path)) as pool:
            # Twenty tasks race for the first use: one start, one process, twenty answers.
            results = await asyncio.gather(
                *(pool.call("time", "get_current_time", {"timezone": "UTC"}) for _ in range(20))
            )
            assert len(results) == 20 and all(r["timezone"] == "UTC" for r in results)
            assert len([p for p in children() if "mcp-server-time" in " ".join(p.cmdline())]) == 1
            more = await asyncio.gather(
                *(
                    pool.call("time", "get_current_time", {"timezone": tz})
                    for tz in ("Europe/Paris", "Asia/Tokyo", "America/New_York") * 5
                )
            )
            assert [r["timezone"] for r in more[:3]] == [
                "Europe/Paris",
                "Asia/Tokyo",
                "America/New_York",
            ]
        assert children() == [], [p.cmdline() for p in children()]

    run(main)


@needs_time
def test_unknown_tool_and_bad_arguments_fail_the_call(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"time": TIME, "crashy": CRASHY}, cwd=str(tmp_path)) as pool:
            # mcp-server-time answers an unknown tool with MCPError -32602 ...
            with pytest.raises(ToolFailed, match=r"^MCP server 'time' tool 'nope': Unknown tool"):
                await pool.call("time", "nope", {})
            # ... a plain MCPServer with is_error=True; both are a failed call.
            with pytest.raises(
                ToolFailed, match=r"^MCP server 'crashy' tool 'nope' failed: Unknown tool"
            ):
                await pool.call("crashy", "nope", {})
            with pytest.raises(ToolFailed, match="Invalid timezone") as err:
                await pool.call("time", "get_current_time", {"timezone": "Mars/Olympus"})
            assert "\n" not in err.value.message
            with pytest.raises(ToolFailed, match="validation error") as err:
                await pool.call("time", "get_current_time", {})
            assert "\n" not in err.value.message and "Field required" in (err.value.detail or "")
            with pytest.raises(
                ToolFailed, match=r"^MCP server 'crashy' tool 'fail' failed: .*it broke$"
            ):
                await pool.call("crashy", "fail", {"message": "it broke"})
            # The session is still usable after every one of those.
            assert await pool.call("crashy", "echo", {"text": "still here"}) == {
                "result": "still here"
            }

    run(main)


def test_unknown_server_and_missing_command(tmp_path: Path) -> None:
    async def main() -> None:
        servers = {"x": ServerEntry(command="planrun-no-such-command")}
        # A connect timeout longer than the test's: "not found" must come at once, not then.
        async with ServerPool(servers, cwd=str(tmp_path), connect_timeout=600) as pool:
            with pytest.raises(ToolFailed) as err:
                await pool.call("x", "anything", {})
            assert err.value.message == "MCP server 'x': command not found: planrun-no-such-command"
            with pytest.raises(ToolFailed, match="command not found"):  # the failure is remembered
                await pool.list_tools("x")
            with pytest.raises(ToolFailed, match=r"unknown MCP server 'y' \(servers: x\)"):
                await pool.call("y", "anything", {})

    run(main)


def test_server_exiting_at_start_up_shows_its_stderr(tmp_path: Path) -> None:
    async def main() -> None:
        entry = ServerEntry(
            command=sys.executable, args=["-c", "import sys; sys.exit('config is broken')"]
        )
        async with ServerPool({"bad": entry}, cwd=str(tmp_path)) as pool:
            with pytest.raises(ToolFailed) as err:
                await pool.call("bad", "anything", {})
            assert err.value.message == "MCP server 'bad': exited during start-up"
            assert err.value.detail == "config is broken"

    run(main)


def test_server_crashing_mid_run_fails_this_and_later_calls(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async def main() -> None:
        async with ServerPool({"crashy": CRASHY}, cwd=str(tmp_path)) as pool:
            assert await pool.call("crashy", "echo", {"text": "[1, 2]"}) == {"result": "[1, 2]"}
            with pytest.raises(ToolFailed) as err:
                await pool.call("crashy", "crash", {})
            assert err.value.message == (
                "MCP server 'crashy' tool 'crash': the server closed the connection (crashed or exited)"
            )
            assert "about to crash" in (err.value.detail or "")
            with pytest.raises(ToolFailed, match="closed the connection"):
                await pool.call("crashy", "echo", {"text": "hello?"})

    run(main)
    # The server's stderr went to the error detail, none of it to planrun's own stderr.
    assert capfd.readouterr().err == ""


def test_server_that_never_answers_is_bounded_by_connect_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"silent": SILENT}, cwd=str(tmp_path), connect_timeout=1.5) as pool:
            with pytest.raises(ToolFailed) as err:
                await pool.call("silent", "anything", {})
            assert (
                err.value.message
                == "MCP server 'silent': no answer to the MCP handshake within 1.5s"
            )
            assert err.value.detail == "silent: waiting forever"

    run(main)


def test_call_timeout_and_cancellation_keep_the_session(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"crashy": CRASHY}, cwd=str(tmp_path)) as pool:
            # The words of a step's own timeout (run/attempts.py), which races with this one:
            # a step that times out says the same whichever of the two ends it.
            with pytest.raises(
                ToolFailed, match=r"^MCP server 'crashy' tool 'nap': timed out after 0.3s$"
            ):
                await pool.call("crashy", "nap", {"seconds": 0.6}, timeout=0.3)
            # The scheduler's way: cancel the awaiting task (asyncio.timeout).
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await pool.call("crashy", "nap", {"seconds": 0.4})
            assert await pool.call("crashy", "echo", {"text": "ok"}) == {"result": "ok"}

    run(main)


def test_text_that_is_not_strict_json_stays_text(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000  # JSON, but nested deeper than planrun can hold

    async def main() -> list[Any]:
        async with ServerPool({"h": HOSTILE}, cwd=str(tmp_path)) as pool:
            return [
                await pool.call("h", "nan", {}),
                await pool.call("h", "nan_json", {}),
                await pool.call("h", "say", {"text": "Infinity"}),
                await pool.call("h", "say", {"text": deep}),
                await pool.call("h", "say", {"text": '{"ok": [1, 2.5, null]}'}),
            ]

    nan, nan_json, inf, nested, strict = run(main)
    assert nan == "NaN" and inf == "Infinity"
    assert nan_json == '{"x": NaN, "y": Infinity}'
    assert nested == deep
    assert strict == {"ok": [1, 2.5, None]}


def test_structured_content_that_json_cannot_hold_fails_the_call(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"h": HOSTILE}, cwd=str(tmp_path)) as pool:
            with pytest.raises(ToolFailed) as err:
                await pool.call("h", "nan_structured", {})
            assert err.value.message.startswith("MCP server 'h' tool 'nan_structured': ")
            assert "NaN" in err.value.message and "\n" not in err.value.message
            assert await pool.call("h", "say", {"text": "still here"}) == "still here"

    run(main)


def test_answers_never_sent_are_bounded_by_the_call_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        async with ServerPool({"h": HOSTILE}, cwd=str(tmp_path)) as pool:
            for tool in ("garbage", "wrong_id"):  # a non-JSON line; an answer to another id
                with pytest.raises(
                    ToolFailed, match=f"^MCP server 'h' tool '{tool}': timed out after 0.5s$"
                ):
                    await pool.call("h", tool, {}, timeout=0.5)
            assert await pool.call("h", "odd.name", {}) == "odd"  # a dot in a tool's name

    run(main)


def test_notifications_and_requests_from_the_server_neither_leak_nor_stall(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    async def main() -> Any:
        async with ServerPool({"h": HOSTILE}, cwd=str(tmp_path)) as pool:
            return await pool.call("h", "chatty", {}, timeout=60)  # a bound on a stall

    assert run(main) == "chatted"
    assert capfd.readouterr().err == ""  # its log line goes nowhere near planrun's stderr


def test_a_malformed_tool_list_is_one_clear_failure(tmp_path: Path) -> None:
    entry = ServerEntry(command=HOSTILE.command, args=[*HOSTILE.args, "--bad-schema"])

    async def main() -> None:
        async with ServerPool({"h": entry}, cwd=str(tmp_path)) as pool:
            with pytest.raises(ToolFailed) as err:
                await pool.list_tools("h")
            assert err.value.message.startswith("MCP server 'h' tools/list: malformed answer")
            assert "\n" not in err.value.message
            # The SDK lists the tools to check each result: a call fails as clearly.
            with pytest.raises(ToolFailed) as err:
                await pool.call("h", "say", {"text": "hello"})
            assert err.value.message.startswith(
                "MCP server 'h' tool 'say': malformed tools/list answer"
            )

    run(main)


def test_cancelling_the_run_shuts_servers_down(tmp_path: Path) -> None:
    async def main() -> None:
        up = asyncio.Event()

        async def a_run() -> None:
            async with ServerPool({"crashy": CRASHY, "silent": SILENT}, cwd=str(tmp_path)) as pool:
                await pool.call("crashy", "echo", {"text": "x"})
                up.set()
                await pool.call("silent", "anything", {})  # hangs in the handshake

        task = asyncio.create_task(a_run())
        await up.wait()
        for _ in range(100):  # until the silent server's process exists too
            if len(children()) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(children()) == 2
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert children() == [], [p.cmdline() for p in children()]

    run(main)


@pytest.mark.parametrize(("status", "words"), [(401, "Unauthorized"), (503, "Service Unavailable")])
def test_an_http_server_refusing_the_handshake_names_its_status(
    tmp_path: Path, status: int, words: str
) -> None:
    """A wrong token (401) or a server down behind its proxy (503): the step's error says the
    HTTP status, which the SDK's own words ("Server returned an error response") leave out."""
    from http.server import BaseHTTPRequestHandler

    class Refusing(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        do_GET = do_DELETE = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    with serve_http(Refusing) as base:
        entry = ServerEntry(url=f"{base}/mcp")

        async def main() -> None:
            async with ServerPool({"web": entry}, cwd=str(tmp_path)) as pool:
                with pytest.raises(ToolFailed) as err:
                    await pool.call("web", "x", {})
                assert f"HTTP {status} {words})" in err.value.message, err.value.message

        run(main)


@pytest.mark.parametrize("ending", ["close", "cancel"])
def test_what_a_server_started_dies_with_its_session(tmp_path: Path, ending: str) -> None:
    """A server that leaves on end of input (as SDK servers do) without stopping the helper it
    started: the helper is in the server's process group and must not outlive the session,
    whether the run ends normally or is cancelled (Ctrl-C)."""
    helper = unique_sleep(300)
    script = tmp_path / "spawning_server.py"
    script.write_text(
        "import subprocess, sys\n"
        f"subprocess.Popen({helper.split()!r})\n"
        f"sys.argv[1:] = []\n"
        f"exec(open({str(SERVERS_DIR / 'crashy_server.py')!r}).read())\n"
    )
    entry = ServerEntry(command=sys.executable, args=[str(script)])

    async def main() -> None:
        async def a_run() -> None:
            async with ServerPool({"spawner": entry}, cwd=str(tmp_path)) as pool:
                assert await pool.call("spawner", "echo", {"text": "x"}) == {"result": "x"}
                if ending == "cancel":
                    await asyncio.Event().wait()

        task = asyncio.create_task(a_run())
        if ending == "cancel":
            await asyncio.to_thread(wait_for_command, helper)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            await task

    run(main)
    assert_no_process_left(helper.split()[1], timeout=5)


@pytest.mark.parametrize(("kind", "endpoint"), [("http", "/mcp"), ("sse", "/sse")])
def test_remote_server(tmp_path: Path, kind: str, endpoint: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = str(SERVERS_DIR / "crashy_server.py")
    proc = subprocess.Popen(
        [sys.executable, script, f"--{kind}", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Until it listens or has exited (a loaded machine starts it in tens of seconds).
        wait_until(
            lambda: _listening(port) or proc.poll() is not None, timeout=300, what="the server"
        )
        assert proc.poll() is None, "server did not start"

        async def main() -> None:
            url = f"http://127.0.0.1:{port}{endpoint}"
            servers = {
                "web": ServerEntry(type=kind, url=url, headers={"X-Token": "t0k"}),
                "gone": ServerEntry(type=kind, url="http://127.0.0.1:9/mcp"),
            }
            async with ServerPool(servers, cwd=str(tmp_path)) as pool:
                echoed = await pool.call("web", "echo", {"text": f"over {kind}"})
                assert echoed == {"result": f"over {kind}"}
                assert await pool.call("web", "header", {"name": "x-token"}) == {"result": "t0k"}
                assert "echo" in {t["name"] for t in await pool.list_tools("web")}
                with pytest.raises(ToolFailed, match=r"^MCP server 'gone': cannot connect to "):
                    await pool.call("gone", "echo", {"text": "x"})

        run(main)
    finally:
        proc.terminate()
        proc.wait(10)


def test_stray_stdout_output_prints_no_traceback(tmp_path: Path) -> None:
    # Outside pytest (which installs its own log handlers): the SDK logs a traceback for a
    # non-JSON stdout line, and planrun's output must stay clean.
    code = f"""
import asyncio, sys
from planrun.mcp.client import ServerPool
from planrun.plan.definition import ServerEntry

async def main():
    entry = ServerEntry(command=sys.executable, args=[{str(SERVERS_DIR / "crashy_server.py")!r}, "--noisy"])
    async with ServerPool({{"n": entry}}, cwd=".") as pool:
        print(await pool.call("n", "echo", {{"text": "fine"}}))

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,  # a bound on a hang, not a speed
        cwd=Path(__file__).parent.parent,
    )
    assert (out.returncode, out.stdout, out.stderr) == (0, "{'result': 'fine'}\n", "")


def test_stdio_entry_env_cwd_and_env_file(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "vars.env").write_text(
        "# comment\nexport FROM_FILE='file value'\nOVERRIDDEN=file\n"
    )
    script = (
        "import os, sys; print(os.getcwd(), os.environ.get('FROM_FILE'), os.environ.get('OVERRIDDEN'),"
        " os.environ.get('PLANRUN_TEST_INHERITED'), file=sys.stderr); sys.exit(3)"
    )
    entry = ServerEntry(
        command=sys.executable,
        args=["-c", script],
        cwd="work",
        envFile="vars.env",
        env={"OVERRIDDEN": "entry"},
    )

    async def main() -> None:
        async with ServerPool({"probe": entry}, cwd=str(tmp_path)) as pool:
            with pytest.raises(ToolFailed) as err:
                await pool.call("probe", "x", {})
            assert err.value.detail == f"{work} file value entry inherited"

    os.environ["PLANRUN_TEST_INHERITED"] = "inherited"
    try:
        run(main)
    finally:
        del os.environ["PLANRUN_TEST_INHERITED"]


# --------------------------------------------------------------------------- check_tool_args

TZ_SCHEMA = {
    "type": "object",
    "properties": {"timezone": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
    "required": ["timezone"],
}


def test_check_tool_args_accepts_valid_args() -> None:
    assert check_tool_args(TZ_SCHEMA, {"timezone": "UTC", "count": 2}) == ([], [])


def test_check_tool_args_reports_errors_with_paths() -> None:
    errors, warnings = check_tool_args(TZ_SCHEMA, {"count": 0})
    assert errors == ["'timezone' is a required property", "count: 0 is less than the minimum of 1"]
    assert warnings == []
    errors, _ = check_tool_args(TZ_SCHEMA, {"timezone": 5})
    assert errors == ["timezone: 5 is not of type 'string'"]


def test_check_tool_args_warns_on_unknown_keys() -> None:
    errors, warnings = check_tool_args(TZ_SCHEMA, {"timezone": "UTC", "timzone": "x", "zzz": 1})
    assert errors == []
    assert warnings == [
        "unknown argument 'timzone' is ignored by the server (did you mean 'timezone'?)",
        "unknown argument 'zzz' is ignored by the server; known: timezone, count",
    ]
    closed = {**TZ_SCHEMA, "additionalProperties": False}
    errors, warnings = check_tool_args(closed, {"timezone": "UTC", "zzz": 1})
    assert len(errors) == 1 and "'zzz' was unexpected" in errors[0] and warnings == []


def test_check_tool_args_tolerates_empty_and_broken_schemas() -> None:
    assert check_tool_args({}, {"a": 1}) == ([], [])
    errors, warnings = check_tool_args({"type": "objekt"}, {"a": 1})
    assert errors == [] and warnings[0].startswith("the tool's input schema is invalid")


def test_check_tool_args_with_a_reference_that_does_not_resolve() -> None:
    for ref in ("#/defs/nowhere", "http://127.0.0.1:9/schema.json"):  # never fetched
        schema = {"type": "object", "properties": {"x": {"$ref": ref}}}
        errors, warnings = check_tool_args(schema, {"x": 1})
        assert errors == [], ref
        assert len(warnings) == 1 and warnings[0].startswith(
            "the tool's input schema is invalid, arguments not checked: "
        ), warnings
        assert ref.lstrip("#") in warnings[0] and "\n" not in warnings[0]


@needs_time
def test_check_tool_args_with_a_real_schema(tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        async with ServerPool({"time": TIME}, cwd=str(tmp_path)) as pool:
            tools = await pool.list_tools("time")
            return next(t["input_schema"] for t in tools if t["name"] == "convert_time")

    schema = run(main)
    errors, _ = check_tool_args(schema, {"source_timezone": "UTC", "time": "12:00"})
    assert errors == ["'target_timezone' is a required property"]


# --------------------------------------------------------------------------- config files


def write(path: Path, doc: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_parse_claude_style_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANRUN_TEST_TOKEN", "s3cret")
    monkeypatch.delenv("PLANRUN_TEST_UNSET", raising=False)
    path = write(
        tmp_path / ".mcp.json",
        {
            "mcpServers": {
                "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
                "fs": {
                    "command": "npx",
                    "args": ["-y", "fs", "${PLANRUN_TEST_UNSET:-/data}"],
                    "env": {"N": 3},
                },
                "api": {
                    "type": "http",
                    "url": "https://x.example/mcp",
                    "headers": {"Authorization": "Bearer ${PLANRUN_TEST_TOKEN}"},
                },
                "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                "cursor": {"url": "http://127.0.0.1:2/mcp"},
                "off": {"command": "whatever", "disabled": True},
                "cline": {"command": "c", "autoApprove": [], "timeout": 60},
            }
        },
    )
    assert parse_mcp_config(path) == {
        "time": ServerEntry(
            type="stdio", command="mcp-server-time", args=["--local-timezone", "UTC"]
        ),
        "fs": ServerEntry(type="stdio", command="npx", args=["-y", "fs", "/data"], env={"N": "3"}),
        "api": ServerEntry(
            type="http",
            url="https://x.example/mcp",
            headers={"Authorization": "Bearer s3cret"},
        ),
        "old": ServerEntry(type="sse", url="http://127.0.0.1:1/sse"),
        "cursor": ServerEntry(type="http", url="http://127.0.0.1:2/mcp"),
        "cline": ServerEntry(type="stdio", command="c"),
    }


def test_parse_vscode_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANRUN_TEST_HOME", "/somewhere")
    path = write(
        tmp_path / ".vscode" / "mcp.json",
        {
            "inputs": [],
            "servers": {
                "git": {
                    "type": "stdio",
                    "command": "mcp-server-git",
                    "args": ["--repository", "${workspaceFolder}"],
                    "envFile": "${workspaceFolder}/.env",
                    "env": {"WHERE": "${env:PLANRUN_TEST_HOME}"},
                },
                "remote": {"type": "http", "url": "http://127.0.0.1:8000/mcp"},
            },
        },
    )
    assert parse_mcp_config(path) == {
        "git": ServerEntry(
            type="stdio",
            command="mcp-server-git",
            args=["--repository", str(tmp_path)],
            env={"WHERE": "/somewhere"},
            envFile=f"{tmp_path}/.env",
        ),
        "remote": ServerEntry(type="http", url="http://127.0.0.1:8000/mcp"),
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "invalid JSON: Expecting property name enclosed in double quotes"),
        ("[]", "an MCP config must be a JSON object"),
        ({"other": {}}, "no 'mcpServers' (Claude, Cursor) or 'servers' (VS Code) object"),
        ({"mcpServers": []}, "'mcpServers' must be an object"),
        ({"mcpServers": {"a": "cmd"}}, "server 'a': entry must be an object"),
        ({"mcpServers": {"a": {"args": []}}}, "server 'a': 'command' must be a non-empty string"),
        ({"servers": {"a": {"type": "ws", "url": "x"}}}, "server 'a': unknown type 'ws'"),
        (
            {"mcpServers": {"a": {"command": "c", "arg": []}}},
            "unknown key 'arg' for a stdio server (did you mean 'args'?)",
        ),
        ({"mcpServers": {"a": {"command": "c", "args": "x"}}}, "server 'a': 'args' must be a list"),
        (
            {"mcpServers": {"a": {"command": "c", "env": {"K": "${PLANRUN_TEST_UNSET}"}}}},
            "environment variable PLANRUN_TEST_UNSET is not set",
        ),
        (
            {"servers": {"a": {"command": "c", "env": {"K": "${input:key}"}}}},
            "VS Code input variable ${input:key} is not supported",
        ),
    ],
)
def test_parse_mcp_config_errors(
    tmp_path: Path, content: Any, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLANRUN_TEST_UNSET", raising=False)
    path = write(tmp_path / "mcp.json", content)
    with pytest.raises(UsageError) as err:
        parse_mcp_config(path)
    assert message in str(err.value) and str(err.value).startswith(path)
    assert "\n" not in str(err.value)


def test_parse_mcp_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"cannot read MCP config: No such file or directory"):
        parse_mcp_config(str(tmp_path / "nope.json"))


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


@pytest.mark.parametrize(
    "text",
    ['{"v": NaN}', "[Infinity]", "[1e999]", "[" * 100_000 + "]" * 100_000],
    ids=["nan", "infinity", "overflow", "deep"],
)
def test_text_content_that_is_not_json_planrun_can_write_stays_text(text: str) -> None:
    # A tool's text is JSON-decoded when it is JSON; NaN, infinity and nesting past what Python
    # can hold are not, so the text is kept as it came rather than failing the call or making
    # the run's documents something a JSON reader refuses.
    from mcp.types import CallToolResult, TextContent

    result = CallToolResult(content=[TextContent(type="text", text=text)])
    assert map_tool_result(result) == text


def test_text_content_that_is_json_is_decoded() -> None:
    from mcp.types import CallToolResult, TextContent

    result = CallToolResult(content=[TextContent(type="text", text=' {"v": [1.5, null]} ')])
    assert map_tool_result(result) == {"v": [1.5, None]}
