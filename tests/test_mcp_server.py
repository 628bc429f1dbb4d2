"""`planrun mcp` driven by a real MCP client: in-process for the tools' answers, over stdio for
the protocol stream and signals, and once over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from tests.conftest import subprocess_layer

if TYPE_CHECKING:  # imported where used: collecting the quick layer needs none of the SDK
    from mcp import Client

# What a client sends first: initialize, then the initialized notification.
OPENING: list[dict[str, Any]] = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


# MCP servers and Dask clusters take seconds to start: `pytest -m 'not slow'` skips these.
pytestmark = pytest.mark.slow

TOOLS = {
    "plan_validate",
    "plan_dry_run",
    "plan_run",
    "plan_resume",
    "plan_status",
    "plan_list",
    "plan_schema",
}

BAD_PLAN = """\
name: bad
steps:
  - id: build
    tool: shell
    args: {cmd: "make"}
  - id: test
    tool: shel
    depends_on: [biuld]
"""

GOOD_PLAN = """\
name: hello
variables: {who: world}
steps:
  - id: greet
    tool: echo
    args: {value: "hello ${who}"}
    result_variable: greeting
  - id: shout
    tool: shell
    args: {cmd: "echo ${greeting}"}
"""

# `first` appends a line to ran.txt each time it runs, so a re-run would show.
FLAKY_PLAN = """\
name: flaky
steps:
  - id: first
    tool: shell
    args: {cmd: "echo first >> ran.txt"}
  - id: second
    tool: shell
    args: {cmd: "exit 3"}
    depends_on: [first]
"""


def children() -> list[psutil.Process]:
    """Live (non-zombie) descendants of this test process."""
    alive = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Any:
    before = {p.pid for p in children()}
    yield
    deadline = time.monotonic() + 5
    while (left := [p for p in children() if p.pid not in before]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left running: {[p.cmdline() for p in left]}"


@asynccontextmanager
async def planrun_mcp(cwd: Path) -> AsyncIterator[Client]:
    """A client of planrun's MCP server in `cwd`: in the test process (the SDK's in-memory
    transport), or a real `planrun mcp` over stdio for a test marked `e2e` (and with
    PLANRUN_TEST_SUBPROCESS=1). What only a real process shows (stdout purity, signals, HTTP)
    is tested below with real processes either way."""
    from mcp import Client, StdioServerParameters

    if subprocess_layer():
        # The SDK passes a spawned server only a few safe variables: give it ours, so that it
        # imports the planrun under test (PYTHONPATH) rather than whichever is installed.
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "planrun", "mcp"],
            cwd=str(cwd),
            env=dict(os.environ),
        )
        async with Client(params, read_timeout_seconds=30) as client:
            yield client
        return
    from planrun.mcp.server import PlanrunServer

    saved = os.getcwd()
    os.chdir(cwd)  # the server's tools resolve plans against its working directory
    try:
        async with Client(PlanrunServer(), read_timeout_seconds=30) as client:
            yield client
    finally:
        os.chdir(saved)


def session(cwd: Path, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with planrun_mcp(cwd) as client:
            return await body(client)

    return asyncio.run(main())


def test_lists_seven_tools_with_input_and_output_schemas(tmp_path: Path) -> None:
    async def body(c: Client) -> Any:
        return (await c.list_tools()).tools

    tools = {t.name: t for t in session(tmp_path, body)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None, tool.name
        assert tool.description
    assert tools["plan_validate"].input_schema["required"] == ["plan"]
    assert set(tools["plan_run"].input_schema["properties"]) == {"plan", "variables", "approve"}
    assert set(tools["plan_dry_run"].input_schema["properties"]) == {"plan", "variables"}
    assert set(tools["plan_list"].input_schema["properties"]) == {"dir"}
    assert tools["plan_schema"].input_schema.get("properties", {}) == {}
    assert {"valid", "diagnostics"} <= set(tools["plan_validate"].output_schema["properties"])
    assert {"plan", "status", "reason", "steps"} <= set(
        tools["plan_run"].output_schema["properties"]
    )


@pytest.mark.e2e  # the schema a real `planrun mcp` advertises over stdio
def test_every_argument_declares_one_top_level_type(tmp_path: Path) -> None:
    # Clients that turn a command-line value into JSON by the property's top-level `type`
    # (MCP Inspector's --tool-arg) sent `variables` as a string under `anyOf[object, null]`.
    async def body(c: Client) -> Any:
        tools = (await c.list_tools()).tools
        given = await c.call_tool("plan_dry_run", {"plan": GOOD_PLAN, "variables": {"who": "x"}})
        null = await c.call_tool("plan_dry_run", {"plan": GOOD_PLAN, "variables": None})
        text = await c.call_tool("plan_dry_run", {"plan": GOOD_PLAN, "variables": "who=x"})
        return tools, given, null, text

    tools, given, null, text = session(tmp_path, body)
    for tool in tools:
        for name, prop in tool.input_schema["properties"].items():
            assert isinstance(prop.get("type"), str) and "anyOf" not in prop, (tool.name, name)
        if "variables" in tool.input_schema["properties"]:
            assert tool.input_schema["properties"]["variables"]["type"] == "object"
            assert "variables" not in tool.input_schema.get("required", [])
    assert given.structured_content["steps"][0]["args"] == {"value": "hello x"}, given.content
    # null is taken as not given: the plan's own value
    assert null.structured_content["steps"][0]["args"] == {"value": "hello world"}, null.content
    assert text.is_error
    assert text.content[0].text.startswith("plan_dry_run: argument 'variables' must be an object")


def test_validate_reports_every_problem_with_positions(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_PLAN)

    async def body(c: Client) -> Any:
        inline = await c.call_tool("plan_validate", {"plan": BAD_PLAN})
        by_path = await c.call_tool("plan_validate", {"plan": "bad.yaml"})
        good = await c.call_tool("plan_validate", {"plan": GOOD_PLAN})
        needs_var = await c.call_tool(
            "plan_validate",
            {"plan": "steps: [{id: a, tool: echo, args: {value: '${x}'}}]", "variables": {"x": 1}},
        )
        return inline, by_path, good, needs_var

    inline, by_path, good, needs_var = session(tmp_path, body)
    assert not inline.is_error
    doc = inline.structured_content
    assert doc["valid"] is False
    got = {(d["line"], d["col"], d["severity"]) for d in doc["diagnostics"]}
    assert (7, 11, "error") in got  # tool: shel
    assert any(d["line"] == 8 and "biuld" in d["message"] for d in doc["diagnostics"])
    assert all(d["file"] == "<inline>" for d in doc["diagnostics"])
    assert json.loads(inline.content[0].text) == doc  # the text is the CLI's JSON document
    assert {d["file"] for d in by_path.structured_content["diagnostics"]} == {"bad.yaml"}
    assert good.structured_content == {"valid": True, "diagnostics": []}
    assert needs_var.structured_content["valid"] is True


def test_dry_run_shows_waves_and_placeholders_and_runs_nothing(tmp_path: Path) -> None:
    async def body(c: Client) -> Any:
        return await c.call_tool("plan_dry_run", {"plan": GOOD_PLAN, "variables": {"who": "mcp"}})

    res = session(tmp_path, body)
    assert not res.is_error
    doc = res.structured_content
    assert doc["plan"] == "hello"
    assert doc["waves"] == [["greet"], ["shout"]]
    greet, shout = doc["steps"]
    assert greet["args"] == {"value": "hello mcp"}
    assert shout["depends_on"] == ["greet"]
    assert "<greet result>" in json.dumps(shout["args"])
    assert not (tmp_path / ".planrun").exists()


@pytest.mark.e2e  # a real `planrun mcp` process over stdio
def test_run_succeeds_with_progress_and_keeps_state(tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def body(c: Client) -> Any:
        run = await c.call_tool("plan_run", {"plan": GOOD_PLAN}, progress_callback=on_progress)
        status = await c.call_tool("plan_status", {"plan": GOOD_PLAN})
        return run, status

    run, status = session(tmp_path, body)
    assert not run.is_error, run.content
    doc = run.structured_content
    assert (doc["plan"], doc["status"], doc["reason"]) == ("hello", "succeeded", "completed")
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["greet"]["result"] == "hello world"
    assert steps["shout"]["result"]["stdout"] == "hello world\n"
    assert (tmp_path / ".planrun" / "state" / "hello.json").exists()
    # progress: steps done out of steps to run, ending at 2/2
    assert seen and seen[-1][:2] == (2, 2)
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
    assert any(m == "greet succeeded" for _, _, m in seen)
    assert status.structured_content["status"] == "succeeded"
    assert [s["id"] for s in status.structured_content["steps"]] == ["greet", "shout"]
    # plan_status has the shape of plan_run's document (and of `run --output json`)
    assert list(status.structured_content) == list(doc)
    assert status.structured_content["error"] is None


def test_failed_run_then_resume_skips_the_step_that_succeeded(tmp_path: Path) -> None:
    plan = tmp_path / "flaky.yaml"
    plan.write_text(FLAKY_PLAN)

    async def body(c: Client) -> Any:
        failed = await c.call_tool("plan_run", {"plan": "flaky.yaml"})
        status = await c.call_tool("plan_status", {"plan": "flaky.yaml"})
        plan.write_text(FLAKY_PLAN.replace("exit 3", "echo fixed"))
        resumed = await c.call_tool("plan_resume", {"plan": "flaky.yaml"})
        return failed, status, resumed

    failed, status, resumed = session(tmp_path, body)
    doc = failed.structured_content
    assert not failed.is_error  # a failed run is a result, not a tool error
    assert (doc["status"], doc["reason"]) == ("failed", "step_failed")
    steps = {s["id"]: s for s in doc["steps"]}
    assert steps["first"]["status"] == "succeeded"
    assert steps["second"]["status"] == "failed"
    assert "exited with code 3" in steps["second"]["error"]
    assert status.structured_content["status"] == "failed"
    assert resumed.structured_content["status"] == "succeeded", resumed.content
    assert (tmp_path / "ran.txt").read_text() == "first\n"  # `first` ran once, not twice


def test_a_plan_reading_invocation_dir_runs_as_from_the_command_line(tmp_path: Path) -> None:
    # A plan that `planrun run` runs is valid here too: `invocation_dir` is the directory the
    # server was started in, unless `variables` set it.
    plan = "steps: [{id: s, tool: echo, args: {value: '${invocation_dir}'}}]\n"

    async def body(c: Client) -> Any:
        valid = await c.call_tool("plan_validate", {"plan": plan})
        dry = await c.call_tool("plan_dry_run", {"plan": plan})
        ran = await c.call_tool("plan_run", {"plan": plan})
        given = await c.call_tool("plan_run", {"plan": plan, "variables": {"invocation_dir": "x"}})
        return valid, dry, ran, given

    valid, dry, ran, given = session(tmp_path, body)
    assert valid.structured_content["valid"], valid.structured_content
    assert not dry.is_error, dry.content
    assert dry.structured_content["steps"][0]["args"] == {"value": str(tmp_path)}
    assert not ran.is_error, ran.content
    assert ran.structured_content["steps"][0]["result"] == str(tmp_path)
    assert given.structured_content["steps"][0]["result"] == "x"


def test_errors_come_back_as_tool_errors_with_cli_text(tmp_path: Path) -> None:
    gated = "name: gated\nsteps:\n  - {id: deploy, tool: echo, args: {value: 1}, approval: true}\n"

    async def body(c: Client) -> Any:
        return (
            await c.call_tool("plan_run", {"plan": BAD_PLAN}),
            await c.call_tool("plan_dry_run", {"plan": "missing.yaml"}),
            await c.call_tool("plan_status", {"plan": GOOD_PLAN}),
            await c.call_tool("plan_resume", {"plan": GOOD_PLAN}),
            await c.call_tool("plan_list", {"dir": "nowhere"}),
            await c.call_tool("plan_run", {"plan": gated}),
            await c.call_tool("plan_run", {"plan": gated, "approve": True}),
        )

    invalid, missing, no_status, no_resume, no_dir, blocked, approved = session(tmp_path, body)
    assert invalid.is_error
    lines = invalid.content[0].text.splitlines()
    assert "<inline>:7:11: error: step 'test': unknown tool 'shel' (did you mean 'shell'?)" in lines
    assert all(line.startswith("<inline>:") for line in lines)
    assert missing.is_error and missing.content[0].text == "plan file not found: missing.yaml"
    assert no_status.is_error and "no state for plan 'hello'" in no_status.content[0].text
    assert no_resume.is_error and "start it with plan_run" in no_resume.content[0].text
    assert "planrun run" not in no_resume.content[0].text  # a CLI command means nothing here
    assert no_dir.is_error and no_dir.content[0].text == "no such directory: nowhere"
    # approval is never granted silently
    assert not blocked.is_error
    assert blocked.structured_content["status"] == "blocked"
    assert blocked.structured_content["reason"] == "approval_required"
    assert "approve" in blocked.structured_content["error"]
    assert approved.structured_content["status"] == "succeeded"


def test_errors_quote_a_huge_argument_as_a_short_escaped_prefix(tmp_path: Path) -> None:
    huge = "\x1b[31m" + "x" * 2_000_000  # one line, no ':' or '{': meant as a path
    calls = [(tool, {"plan": huge}) for tool in sorted(TOOLS - {"plan_list", "plan_schema"})]
    calls.append(("plan_list", {"dir": huge}))
    calls.append(("plan_validate", {"plan": "a.yaml", huge: 1}))  # an unknown argument
    named = f"name: {huge[5:]}\nsteps: []\n"  # its state file's name is too long to open

    async def body(c: Client) -> Any:
        calls_done = [await c.call_tool(tool, args) for tool, args in calls]
        return calls_done, await c.call_tool("plan_status", {"plan": named})

    answers, status = session(tmp_path, body)
    for (tool, _), res in zip(calls, answers, strict=True):
        assert res.is_error, tool
        text = res.content[0].text
        assert len(text) < 300, (tool, len(text))
        assert "\\x1b[31mxxxx" in text and "\x1b" not in text, (tool, text)
        assert "2000005 characters" in text, (tool, text)
    # an error about something made of the argument (a path) is cut as a whole
    text = status.content[0].text
    assert status.is_error and len(text) < 2100 and text.endswith(" characters)"), text[:300]


def test_list_and_schema(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "hello.yaml").write_text("title: Say hello\n" + GOOD_PLAN)
    (plans / "flaky.yaml").write_text(FLAKY_PLAN)
    (plans / "notes.txt").write_text("not a plan")
    (plans / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")  # dangling: left out

    async def body(c: Client) -> Any:
        await c.call_tool("plan_run", {"plan": "plans/hello.yaml"})
        return await c.call_tool("plan_list", {}), await c.call_tool("plan_schema", {})

    listing, schema = session(tmp_path, body)
    assert not listing.is_error, listing.content
    rows = {r["name"]: r for r in listing.structured_content["result"]}
    assert set(rows) == {"hello", "flaky"}
    assert rows["hello"] == {
        "path": "plans/hello.yaml",
        "name": "hello",
        "title": "Say hello",
        "steps": 2,
        "last_status": "succeeded",
    }
    assert rows["flaky"]["last_status"] is None
    assert json.loads(listing.content[0].text) == listing.structured_content["result"]
    doc = schema.structured_content
    assert doc["$schema"].startswith("https://json-schema.org/")
    assert "steps" in doc["properties"]


def test_list_keeps_plans_whose_title_is_not_text(tmp_path: Path) -> None:
    from tests.conftest import planrun

    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "a.yaml").write_text("title: {executor: null}\nsteps: []\n")
    (plans / "b.yaml").write_text("title: 3\nsteps: []\n")

    async def body(c: Client) -> Any:
        return await c.call_tool("plan_list", {})

    listing = session(tmp_path, body)
    assert not listing.is_error, listing.content
    cli = planrun("list", "plans", "--output", "json", cwd=tmp_path)
    assert listing.structured_content["result"] == cli.json
    assert [r["title"] for r in cli.json] == [{"executor": None}, 3]


def test_results_are_strict_json_in_both_forms(tmp_path: Path) -> None:
    """No value JSON cannot hold reaches an answer: a plan holding `.nan` or `.inf` is refused
    at the value, and the answer (text and structured) is strict JSON."""
    plan = "name: odd\nsteps:\n  - {id: a, tool: echo, args: {value: [.nan, .inf, 1.5]}}\n"

    def strict(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    async def body(c: Client) -> Any:
        return await c.call_tool("plan_run", {"plan": plan}), await c.call_tool(
            "plan_run", {"plan": plan.replace(".nan, .inf, ", "")}
        )

    refused, ran = session(tmp_path, body)
    assert refused.is_error, refused.content
    assert ".nan is not a JSON number" in refused.content[0].text, refused.content
    assert not ran.is_error, ran.content
    text = json.loads(ran.content[0].text, parse_constant=strict)
    assert text == ran.structured_content
    assert text["steps"][0]["result"] == [1.5]


def test_nothing_but_protocol_reaches_stdout(tmp_path: Path) -> None:
    """Raw JSON-RPC over the server's pipes: steps that print (an in-process `python` step,
    a shell step writing to its inherited stdout) or read stdin must not touch the channel."""
    plan = (
        "name: noisy\nsteps:\n"
        "  - {id: talk, tool: python, args: {function: 'builtins:print', kwargs: {end: 'NOISE'}}}\n"
        "  - {id: sh, tool: shell, args: {cmd: 'echo SHELL; cat; echo done'}, depends_on: [talk]}\n"
    )
    requests = [
        *OPENING,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "plan_run", "arguments": {"plan": plan}},
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "mcp"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read_stdout() -> None:
        for line in proc.stdout or []:
            lines.put(line)

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    try:
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        out: list[str] = []
        while not any('"id":2' in x.replace(" ", "") for x in out):
            out.append(lines.get(timeout=60))  # a bound on a hang
        proc.stdin.close()
        proc.wait(timeout=60)  # a bound on a hang
        reader.join(5)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    while not lines.empty():
        out.append(lines.get())
    messages = [json.loads(x) for x in out]  # every line on stdout is a JSON-RPC message
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    result = next(m for m in messages if m.get("id") == 2)["result"]
    assert result["structuredContent"]["status"] == "succeeded"
    steps = {s["id"]: s for s in result["structuredContent"]["steps"]}
    assert steps["sh"]["result"]["stdout"] == "SHELL\ndone\n"  # `cat` read an empty stdin
    # a python step's prints are captured as its own output: never on the protocol stream
    assert not any("NOISE" in x for x in out)
    del err
    assert proc.returncode == 0


def test_a_request_too_deep_for_the_sdk_gets_an_error_answer(tmp_path: Path) -> None:
    """The SDK parses each line with a nesting limit and drops a line past it unanswered: the
    client would wait for its own timeout. Such a request gets a JSON-RPC error instead."""

    def line(request_id: int, depth: int) -> str:
        return (
            f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": {{"name":'
            ' "plan_validate", "arguments": {"plan": "steps: []", "variables": {"v": '
            + "[" * depth
            + "]" * depth
            + "}}}}\n"
        )

    after = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "plan_schema"}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "mcp"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or []], daemon=True)
    reader.start()
    try:
        opening = "".join(json.dumps(r) + "\n" for r in OPENING)
        proc.stdin.write(opening + "garbage that is not JSON\n")
        proc.stdin.write(line(2, 300))  # past the SDK's parser: Python still reads it
        proc.stdin.write(line(4, 100_000))  # past Python's too
        proc.stdin.write(json.dumps(after) + "\n")
        proc.stdin.flush()
        got: list[str] = []  # the answers, waited for before hanging up (as a client does)
        while not {2, 3, 4} <= {json.loads(x).get("id") for x in got}:
            got.append(lines.get(timeout=30))
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        reader.join(5)
        while not lines.empty():
            got.append(lines.get())
        out = "".join(got)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    answers = {m.get("id"): m for m in map(json.loads, out.splitlines())}
    for request_id in (2, 4):
        refused = answers[request_id]["error"]
        assert refused["code"] == -32600, refused  # invalid request
        assert "nested" in refused["message"] and len(refused["message"]) < 300, refused
    assert "result" in answers[3]  # the server goes on serving
    assert set(answers) == {1, 2, 3, 4}  # the garbage line (no id) has no answer


def test_every_request_before_end_of_input_is_answered(tmp_path: Path) -> None:
    """A client that writes its requests and closes stdin (`printf ... | planrun mcp`) gets
    every answer: the SDK stops serving at end of input and cancels the calls in flight, so the
    end of input reaches it only once each request read has its answer on stdout."""
    (tmp_path / "plan.yaml").write_text(
        "name: p\nsteps:\n  - {id: a, tool: shell, args: {cmd: 'echo hi'}}\n"
    )
    calls = [
        ("plan_validate", {"plan": "plan.yaml"}),
        ("plan_dry_run", {"plan": "plan.yaml"}),
        ("plan_schema", {}),
        ("plan_list", {}),
        ("plan_run", {"plan": "plan.yaml"}),
        ("plan_status", {"plan": "plan.yaml"}),
    ]
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 10 + n,
            "method": "tools/call",
            "params": {"name": name, "arguments": args},
        }
        for n, (name, args) in enumerate(calls)
    ]
    requests.append({"jsonrpc": "2.0", "id": "last", "method": "tools/list"})
    text = "".join(json.dumps(m) + "\n" for m in [*OPENING, *requests])
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-m", "planrun", "mcp"],
            cwd=tmp_path,
            input=text,  # written whole, then end of input
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        answers = {m.get("id"): m for m in map(json.loads, proc.stdout.splitlines()) if "id" in m}
        assert set(answers) == {1, "last", *(r["id"] for r in requests)}, proc.stdout[-2000:]
        assert all("result" in answers[r["id"]] for r in requests), proc.stdout[-2000:]


def test_streamable_http(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "planrun", "mcp", "--http", "127.0.0.1:0"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 30)
        assert ready, "server did not announce its address"
        line = proc.stderr.readline()
        url = line.rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), line

        async def main() -> Any:
            from mcp import Client

            async with Client(url, read_timeout_seconds=30) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                run = await c.call_tool("plan_run", {"plan": GOOD_PLAN})
                return names, run

        names, run = asyncio.run(main())
        assert names == TOOLS
        assert run.structured_content["status"] == "succeeded"
        assert (tmp_path / ".planrun" / "state" / "hello.json").exists()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.mark.e2e  # a real `planrun mcp` process, signalled
def test_sigterm_interrupts_the_run_in_flight(tmp_path: Path) -> None:
    """SIGTERM to the server: the step's process is killed, the call answered `interrupted`,
    the state says so, and the server leaves."""
    plan = (
        "name: slow\nsteps:\n"
        "  - {id: nap, tool: shell, args: {cmd: 'echo $$ > nap.pid; exec sleep 600'}}\n"
    )

    async def main() -> Any:
        async with planrun_mcp(tmp_path) as c:
            call = asyncio.create_task(c.call_tool("plan_run", {"plan": plan}))
            pid_file = tmp_path / "nap.pid"
            deadline = time.monotonic() + 120  # a bound on a hang, not a speed
            while not (pid_file.exists() and pid_file.read_text().strip()):
                assert time.monotonic() < deadline, "the step never started"
                await asyncio.sleep(0.05)
            nap = psutil.Process(int(pid_file.read_text()))
            server = next(
                p for p in psutil.Process().children() if "planrun" in " ".join(p.cmdline())
            )
            server.terminate()
            result = await asyncio.wait_for(call, 60)  # bounds: the step would sleep 600 s
            server.wait(60)
            return result, nap

    result, nap = asyncio.run(main())
    assert result.structured_content["status"] == "interrupted", result.content
    assert result.structured_content["steps"][0]["status"] == "interrupted"
    assert not nap.is_running() or nap.status() == psutil.STATUS_ZOMBIE
    state = json.loads((tmp_path / ".planrun" / "state" / "slow.json").read_text())
    assert state["status"] == "interrupted"


def test_http_address_forms() -> None:
    from planrun.errors import UsageError
    from planrun.mcp.server import parse_http_address

    assert parse_http_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http_address(":8765") == ("127.0.0.1", 8765)
    assert parse_http_address("8765") == ("127.0.0.1", 8765)
    assert parse_http_address("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_http_address("[::1]:9000") == ("::1", 9000)
    for bad in ("host:port", "127.0.0.1:70000"):
        with pytest.raises(UsageError):
            parse_http_address(bad)
