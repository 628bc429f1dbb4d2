"""The shell tool's two ways of starting a command agree at the edges: large stdin, a command
that ignores its input, one that closes its output long before it exits, output callbacks."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from planrun.tools import builtin_registry
from planrun.tools.base import ToolContext, ToolFailed


def call(args: dict[str, Any], ctx: ToolContext) -> Any:
    spec = builtin_registry().get("shell")
    assert spec is not None
    return asyncio.run(spec.fn(args, ctx))


@pytest.fixture(params=["spawn", "fork"])
def ctx(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ToolContext:
    """posix_spawn (a step in planrun's own directory) and asyncio's fork/exec (any other)."""
    if request.param == "spawn":
        monkeypatch.chdir(tmp_path)
    return ToolContext(step_id="s", cwd=str(tmp_path), env=dict(os.environ))


def test_stdin_larger_than_a_pipe_buffer_arrives_whole(ctx: ToolContext) -> None:
    data = "".join(f"line {i}\n" for i in range(100_000))  # ~1 MB, far past 64 KiB
    result = call({"cmd": "wc -c", "stdin": data}, ctx)
    assert result["stdout"].strip() == str(len(data.encode()))


def test_a_command_that_ignores_its_stdin_still_succeeds(ctx: ToolContext) -> None:
    result = call({"cmd": "exit 0", "stdin": "x" * 1_000_000}, ctx)
    assert result == {"stdout": "", "stderr": "", "exit_code": 0}


def test_an_empty_stdin_is_an_immediate_end_of_file(ctx: ToolContext) -> None:
    assert call({"cmd": "cat; echo done", "stdin": ""}, ctx)["stdout"] == "done\n"


def test_the_exit_code_is_waited_for_after_the_output_ends(ctx: ToolContext) -> None:
    # The pipes reach their end long before the command exits: its exit code still counts.
    cmd = "echo early; exec >&- 2>&-; sleep 0.3; exit 3"
    with pytest.raises(ToolFailed) as info:
        call({"cmd": cmd}, ctx)
    assert info.value.result == {"stdout": "early\n", "stderr": "", "exit_code": 3}


def test_a_grandchild_holding_the_output_keeps_the_step_running(ctx: ToolContext) -> None:
    # As asyncio's path does: the step ends when its output ends, not only when sh exits.
    start = time.monotonic()
    result = call({"cmd": "(sleep 0.3; echo late) & echo now"}, ctx)
    assert result["stdout"] == "now\nlate\n"
    assert time.monotonic() - start >= 0.3


def test_every_line_reaches_the_output_callback_once_in_order(ctx: ToolContext) -> None:
    seen: list[tuple[str, str]] = []
    ctx.on_output = lambda stream, line: seen.append((stream, line))
    cmd = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; printf tail"
    result = call({"cmd": cmd}, ctx)
    assert [line for stream, line in seen if stream == "stdout"] == ["out1", "out2", "out3", "tail"]
    assert [line for stream, line in seen if stream == "stderr"] == ["err1", "err2", "err3"]
    assert result["stdout"] == "out1\nout2\nout3\ntail"


def test_an_error_in_the_output_callback_fails_the_call_and_leaves_no_process(
    ctx: ToolContext, tmp_path: Path
) -> None:
    def broken(stream: str, line: str) -> None:
        raise RuntimeError("callback broke")

    ctx.on_output = broken
    pid_file = tmp_path / "pid"
    with pytest.raises((RuntimeError, ExceptionGroup)):  # asyncio's path: from a TaskGroup
        call({"cmd": f"echo $$ > {pid_file}; echo hi; sleep 30"}, ctx)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped, not left running for 30 s


def test_a_bare_true_still_starts_a_process(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No command is answered without running it (a `true` step costs what a process costs)."""
    started: list[object] = []
    real_spawn = os.posix_spawn
    monkeypatch.setattr(os, "posix_spawn", lambda *a, **k: started.append(a) or real_spawn(*a, **k))
    real_exec = asyncio.create_subprocess_exec

    async def counted_exec(*a: Any, **k: Any) -> Any:
        started.append(a)
        return await real_exec(*a, **k)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", counted_exec)
    assert call({"cmd": "true"}, ctx)["exit_code"] == 0
    assert len(started) == 1
