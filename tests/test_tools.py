"""The built-in tools, called as the scheduler calls them: real processes, files and HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from planrun.run import procgroups
from planrun.tools import builtin_registry
from planrun.tools.base import ToolContext, ToolFailed
from tests.conftest import hang_guard, serve_http
from tests.testkit import steps_by_id


def call(tool: str, args: dict[str, Any], ctx: ToolContext) -> Any:
    spec = builtin_registry().get(tool)
    assert spec is not None
    return asyncio.run(spec.fn(args, ctx))


def fails(tool: str, args: dict[str, Any], ctx: ToolContext) -> ToolFailed:
    with pytest.raises(ToolFailed) as info:
        call(tool, args, ctx)
    return info.value


@pytest.fixture(params=["spawn", "fork"])
def ctx(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ToolContext:
    """Both ways the shell tool starts a command: posix_spawn (a step run in planrun's own
    directory) and asyncio's fork/exec (any other directory)."""
    if request.param == "spawn":
        monkeypatch.chdir(tmp_path)
    return ToolContext(step_id="s", cwd=str(tmp_path), env={**os.environ, "FROM_CTX": "ctx"})


# --- registry ---------------------------------------------------------------------------------


def test_registry_lists_every_builtin_with_a_strict_schema() -> None:
    registry = builtin_registry()
    assert registry is builtin_registry()  # cached
    assert set(registry.names()) == {
        "shell",
        "echo",
        "sleep",
        "read_file",
        "write_file",
        "http",
        "python",
        "plan",
    }
    for spec in registry.specs():
        assert spec.description
        schema = spec.input_schema
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert schema["required"] or spec.name == "echo"  # echo's value defaults to null
    shell = jsonschema.Draft202012Validator(registry.get("shell").input_schema)  # type: ignore[union-attr]
    assert shell.is_valid({"cmd": ["ls", "-l"], "env": {"N": 1}, "check": False})
    assert not shell.is_valid({"cmd": "ls", "bogus": 1})
    assert not shell.is_valid({"cwd": "."})


def test_importing_the_registry_loads_no_tool_module_nor_httpx2() -> None:
    code = (
        "import sys, planrun.tools as t; t.builtin_registry(); "
        "print(sorted(m for m in sys.modules if m == 'httpx2' or m.startswith('planrun.tools.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    ).stdout
    assert out.strip() == "['planrun.tools.base']"


# --- shell ------------------------------------------------------------------------------------


def test_shell_string_runs_through_sh_and_keeps_output_verbatim(ctx: ToolContext) -> None:
    result = call("shell", {"cmd": "echo 'a  b' ; printf 'err\\n' >&2; printf ' x '"}, ctx)
    assert result == {"stdout": "a  b\n x ", "stderr": "err\n", "exit_code": 0}


def test_shell_list_is_exec_without_a_shell(ctx: ToolContext) -> None:
    result = call("shell", {"cmd": ["printf", "%s|", "a b", "$HOME", "$(id)", 3]}, ctx)
    assert result["stdout"] == "a b|$HOME|$(id)|3|"


def test_shell_env_is_merged_over_the_context_env(ctx: ToolContext) -> None:
    ctx.env["GONE"] = "here"
    env = {"NEW": "n", "NUM": 3, "FLAG": True, "GONE": None}
    result = call(
        "shell", {"cmd": 'echo "$FROM_CTX $NEW $NUM $FLAG ${GONE-unset}"', "env": env}, ctx
    )
    assert result["stdout"] == "ctx n 3 true unset\n"


def test_shell_cwd_is_relative_to_the_working_directory(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "sub" / "dir").mkdir(parents=True)
    assert call("shell", {"cmd": "pwd -P"}, ctx)["stdout"] == f"{tmp_path.resolve()}\n"
    out = call("shell", {"cmd": ["pwd", "-P"], "cwd": "sub/dir"}, ctx)["stdout"]
    assert out == f"{(tmp_path / 'sub' / 'dir').resolve()}\n"
    assert fails("shell", {"cmd": "true", "cwd": "nope"}, ctx).message == (
        f"shell: no such directory: {tmp_path / 'nope'}"
    )


def test_shell_stdin_is_fed_else_dev_null(ctx: ToolContext) -> None:
    assert call("shell", {"cmd": "cat", "stdin": "one\ntwo"}, ctx)["stdout"] == "one\ntwo"
    assert call("shell", {"cmd": ["cat"]}, ctx)["stdout"] == ""  # EOF at once: no hang


def test_shell_check_false_returns_a_failed_exit(ctx: ToolContext) -> None:
    result = call("shell", {"cmd": "echo out; echo err >&2; exit 3", "check": False}, ctx)
    assert result == {"stdout": "out\n", "stderr": "err\n", "exit_code": 3}


def test_shell_failure_names_the_code_and_shows_the_stderr_tail(ctx: ToolContext) -> None:
    cmd = "echo out; for i in $(seq 1 30); do echo line$i >&2; done; exit 2"
    error = fails("shell", {"cmd": cmd}, ctx)
    assert error.message == "command exited with code 2"
    assert error.detail == "\n".join([f"$ {cmd}"] + [f"line{i}" for i in range(11, 31)])
    assert error.result["exit_code"] == 2
    assert error.result["stdout"] == "out\n"
    assert error.result["stderr"].count("\n") == 30


def test_shell_list_failure_shows_the_quoted_argv(ctx: ToolContext) -> None:
    error = fails("shell", {"cmd": ["sh", "-c", "echo oops >&2; exit 1", "a b"]}, ctx)
    assert error.detail == "$ sh -c 'echo oops >&2; exit 1' 'a b'\noops"


def test_shell_missing_executable(ctx: ToolContext) -> None:
    assert fails("shell", {"cmd": ["no-such-cmd-xyz", "a"]}, ctx).message == (
        "command not found: no-such-cmd-xyz"
    )
    assert fails("shell", {"cmd": "no-such-cmd-xyz"}, ctx).result["exit_code"] == 127


def test_shell_bad_arguments_fail_clearly(ctx: ToolContext) -> None:
    assert "'cmd' must be a string or a non-empty list" in fails("shell", {"cmd": 3}, ctx).message
    assert "non-empty list" in fails("shell", {"cmd": []}, ctx).message
    assert (
        "'check' must be true or false"
        in fails("shell", {"cmd": "true", "check": "no"}, ctx).message
    )
    assert fails("shell", {"cmd": "true", "bogus": 1}, ctx).message.startswith(
        "shell: unknown argument 'bogus'"
    )
    assert fails("shell", {}, ctx).message == "shell: missing argument 'cmd'"


def test_shell_undecodable_output_is_replaced_not_fatal(ctx: ToolContext) -> None:
    assert call("shell", {"cmd": "printf 'a\\377b'"}, ctx)["stdout"] == "a\ufffdb"


def test_shell_streams_lines_as_they_come_and_still_captures(
    ctx: ToolContext, tmp_path: Path
) -> None:
    # The command ends only once its first line has been delivered: lines held until the end
    # would be a hang (the guard's bound), whatever the speed of the machine.
    seen: list[tuple[str, str]] = []

    def on_output(stream: str, line: str) -> None:
        seen.append((stream, line))
        if line == "first":
            (tmp_path / "go").touch()

    ctx.on_output = on_output
    cmd = "echo first; echo warn >&2; while [ ! -e go ]; do sleep 0.01; done; printf 'last'"
    with hang_guard():
        result = call("shell", {"cmd": cmd, "stdin": ""}, ctx)
    assert result == {"stdout": "first\nlast", "stderr": "warn\n", "exit_code": 0}
    assert sorted(seen) == [("stderr", "warn"), ("stdout", "first"), ("stdout", "last")]


# --- shell cancellation: nothing may outlive a cancelled step -----------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, pgid) of a live process, or None when it is gone (a zombie counts as gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()
    state, pgid = fields[0], int(fields[2])
    return None if state in ("Z", "X") else (state, pgid)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat is not None and stat[1] == pgid:
                members.append(int(entry))
    return members


def _wait_for_file(path: Path) -> int:
    deadline = time.monotonic() + 60  # a bound on a hang: the file is written before the cancel
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.01)
    raise AssertionError(f"{path} never written")


def _wait_until_gone(pgid: int, *pids: int) -> None:
    deadline = time.monotonic() + 60  # a bound: SIGKILL is carried out at once; a busy machine lags
    while _group_members(pgid) or any(_proc_stat(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still running: {_group_members(pgid)}"
        time.sleep(0.01)


@pytest.mark.parametrize("streaming", [False, True], ids=["captured", "streamed"])
@pytest.mark.parametrize("ignore_term", [False, True], ids=["sigterm", "sigkill"])
def test_cancelling_shell_kills_the_whole_group(
    ctx: ToolContext,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    streaming: bool,
    ignore_term: bool,
) -> None:
    # A grandchild in the background and a foreground child; optionally deaf to SIGTERM,
    # so that only the SIGKILL after the grace period stops them (a tenth of it here: the
    # same path, without waiting half a second for it in each case).
    trap = "trap '' TERM; " if ignore_term else ""
    monkeypatch.setattr(procgroups, "STOP_GRACE_S", procgroups.STOP_GRACE_S / 10)
    cmd = f"{trap}echo $$ > sh.pid; sleep 600 & echo $! > bg.pid; sleep 600"
    if streaming:
        ctx.on_output = lambda stream, line: None
    spec = builtin_registry().get("shell")
    assert spec is not None

    async def scenario() -> None:
        # Cancelled once the background child exists (its pid written), not after a set time:
        # what a step's timeout or a Ctrl-C does to a running command.
        call = asyncio.ensure_future(spec.fn({"cmd": cmd}, ctx))
        while not (tmp_path / "bg.pid").exists() or not (tmp_path / "bg.pid").read_text():
            assert not call.done(), call
            await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    with hang_guard():  # a cancellation that waited for the sleeps would outlast it
        asyncio.run(scenario())
    sh_pid = _wait_for_file(tmp_path / "sh.pid")
    bg_pid = _wait_for_file(tmp_path / "bg.pid")
    assert not Path(f"/proc/{sh_pid}").exists()  # reaped by us, not even a zombie
    # The grandchild was re-parented to init once the shell died; it has been sent SIGKILL,
    # which the kernel may take a moment to carry out.
    _wait_until_gone(sh_pid, bg_pid)


def test_cancelling_a_finished_shell_with_a_lingering_grandchild(
    ctx: ToolContext, tmp_path: Path
) -> None:
    # The shell exits at once, but a background child keeps stdout open: the step is
    # cancelled once the shell is gone (not after a set time, which a slow machine can spend
    # before the shell has even started).
    cmd = "sleep 600 & echo $$ > sh.pid"
    spec = builtin_registry().get("shell")
    assert spec is not None

    async def scenario() -> int:
        task = asyncio.create_task(spec.fn({"cmd": cmd}, ctx))
        sh_file = tmp_path / "sh.pid"
        while not (sh_file.exists() and sh_file.read_text().endswith("\n")):
            await asyncio.sleep(0.01)
        sh_pid = int(sh_file.read_text())
        while _proc_stat(sh_pid) is not None:  # exited: a zombie, or reaped already
            await asyncio.sleep(0.01)
        assert not task.done()  # the grandchild holds stdout open
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sh_pid

    with hang_guard():
        sh_pid = asyncio.run(scenario())
    _wait_until_gone(sh_pid)


def test_cancelling_at_the_moment_the_shell_has_exited_stops_its_grandchild(
    ctx: ToolContext, tmp_path: Path
) -> None:
    # The cancel lands just after `sh` has exited (its group lives on in the grandchild that
    # holds stdout open): the moment the leader is, or is about to be, reaped; with asyncio's
    # fork/exec often before it has even finished connecting the pipes of the started command.
    cmd = "sleep 30 & echo $! > bg.pid; echo $$ > sh.pid"
    spec = builtin_registry().get("shell")
    assert spec is not None

    async def scenario() -> tuple[int, int]:
        task = asyncio.create_task(spec.fn({"cmd": cmd}, ctx))
        sh_file = tmp_path / "sh.pid"
        while not (sh_file.exists() and sh_file.read_text().endswith("\n")):
            await asyncio.sleep(0.001)
        sh_pid = int(sh_file.read_text())
        while _proc_stat(sh_pid) is not None:  # exited: a zombie, or reaped already
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sh_pid, int((tmp_path / "bg.pid").read_text())

    for _ in range(40):  # the moment comes at a different point of the start-up each time
        for name in ("sh.pid", "bg.pid"):
            (tmp_path / name).unlink(missing_ok=True)
        with hang_guard():
            sh_pid, bg_pid = asyncio.run(scenario())
        _wait_until_gone(sh_pid, bg_pid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
def test_an_interrupt_waits_for_no_member_of_the_group_that_has_ended_but_is_not_reaped(
    ctx: ToolContext, tmp_path: Path
) -> None:
    # The shell's children outlive it for a moment: when it dies they are adopted, and until
    # their new parent reaps them they are zombies, still members of the group. An interrupted
    # run waited for the group to be empty, zombies included: the whole grace, wherever that
    # parent is slow to reap (a container's init that never does, a machine whose init reaps
    # a second or two late). Here the test process adopts them and reaps them only afterwards.
    import ctypes

    from planrun.run.procgroups import ProcessGroups
    from planrun.tools.base import Services

    pr_set_child_subreaper = 36
    libc = ctypes.CDLL(None, use_errno=True)
    groups = ProcessGroups(grace=600)  # far beyond the hang guard: waiting it out fails
    interrupted = ToolContext(
        step_id="s", cwd=ctx.cwd, env=ctx.env, services=Services(groups=groups)
    )
    spec = builtin_registry().get("shell")
    assert spec is not None
    # The shell execs its last command: the group's leader is planrun's child, reaped by it;
    # the background sleep is the shell's, adopted by the test process when the leader dies.
    cmd = "sleep 600 & echo $! > bg.pid; exec sleep 600"

    async def scenario() -> None:
        call = asyncio.ensure_future(spec.fn({"cmd": cmd}, interrupted))
        while not (tmp_path / "bg.pid").exists() or not (tmp_path / "bg.pid").read_text():
            assert not call.done(), call
            await asyncio.sleep(0.01)
        groups.interrupt(signal.SIGTERM)  # what the run's handler does with a Ctrl-C
        call.cancel()  # ... and then the run cancels its steps
        with pytest.raises(asyncio.CancelledError):
            await call

    assert libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0) == 0
    try:
        with hang_guard():
            asyncio.run(scenario())
        bg_pid = _wait_for_file(tmp_path / "bg.pid")
        # ended, and still not reaped when the step was done with it
        assert Path(f"/proc/{bg_pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    finally:
        libc.prctl(pr_set_child_subreaper, 0, 0, 0, 0)
        with contextlib.suppress(ChildProcessError, ValueError, OSError):
            os.waitpid(int((tmp_path / "bg.pid").read_text()), 0)


# --- echo, sleep ------------------------------------------------------------------------------


def test_echo_returns_its_value_unchanged(ctx: ToolContext) -> None:
    value = {"a": [1, None, True], "b": "x"}
    assert call("echo", {"value": value}, ctx) == value
    assert call("echo", {"value": None}, ctx) is None
    assert call("echo", {}, ctx) is None  # no value: null (a step that only orders others)


def test_sleep_waits_and_returns_null(ctx: ToolContext) -> None:
    start = time.monotonic()
    assert call("sleep", {"seconds": 0.1}, ctx) is None
    assert time.monotonic() - start >= 0.1
    assert fails("sleep", {"seconds": "1"}, ctx).message == (
        "sleep: 'seconds' must be a number, got string"
    )
    assert "0 or more" in fails("sleep", {"seconds": -1}, ctx).message


# --- read_file, write_file --------------------------------------------------------------------


def test_write_then_read_text_relative_to_the_working_directory(
    ctx: ToolContext, tmp_path: Path
) -> None:
    text = "héllo\r\nworld\n"
    result = call("write_file", {"path": "out/deep/a.txt", "content": text}, ctx)
    assert result == {"path": "out/deep/a.txt", "bytes": len(text.encode())}
    assert (tmp_path / "out" / "deep" / "a.txt").read_bytes() == text.encode()
    assert call("read_file", {"path": "out/deep/a.txt"}, ctx) == text
    assert call("read_file", {"path": str(tmp_path / "out/deep/a.txt")}, ctx) == text
    assert sorted(os.listdir(tmp_path / "out" / "deep")) == ["a.txt"]  # no temp file left


def test_write_file_writes_other_values_as_json(ctx: ToolContext, tmp_path: Path) -> None:
    content = {"name": "ünï", "items": [1, 2.5, None, True]}
    result = call("write_file", {"path": "data.json", "content": content}, ctx)
    written = (tmp_path / "data.json").read_text()
    assert written == json.dumps(content, indent=2, ensure_ascii=False) + "\n"
    assert result == {"path": "data.json", "bytes": len(written.encode())}
    call("write_file", {"path": "n.json", "content": 42}, ctx)
    assert (tmp_path / "n.json").read_text() == "42\n"


def test_write_file_replaces_atomically_and_keeps_the_mode(
    ctx: ToolContext, tmp_path: Path
) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o750)
    call("write_file", {"path": "script.sh", "content": "new"}, ctx)
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o750
    call("write_file", {"path": "fresh.txt", "content": ""}, ctx)
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "fresh.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_read_file_failures(ctx: ToolContext, tmp_path: Path) -> None:
    assert fails("read_file", {"path": "missing.txt"}, ctx).message == "no such file: missing.txt"
    (tmp_path / "bin").write_bytes(b"ok\xff")
    assert fails("read_file", {"path": "bin"}, ctx).message == "not UTF-8 text: bin (byte 2)"
    (tmp_path / "d").mkdir()
    assert fails("read_file", {"path": "d"}, ctx).message == "is a directory, not a file: d"
    assert fails("write_file", {"path": "d", "content": "x"}, ctx).message == (
        "is a directory, not a file: d"
    )
    assert "'path' must be a non-empty string" in fails("read_file", {"path": 1}, ctx).message


def test_write_file_failures_say_what_is_in_the_way(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file")
    assert fails("write_file", {"path": "plain/x.txt", "content": "x"}, ctx).message == (
        "cannot create the directory for plain/x.txt: a file is in the way"
    )
    message = fails("write_file", {"path": "plain/sub/x.txt", "content": "x"}, ctx).message
    assert message.startswith("cannot write plain/sub/x.txt: ")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "inner").mkdir()
    assert fails("write_file", {"path": "d/inner", "content": "x"}, ctx).message == (
        "is a directory, not a file: d/inner"
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["d", "inner", "plain"]


def test_write_file_never_replaces_a_fifo_or_a_device(ctx: ToolContext, tmp_path: Path) -> None:
    # Renamed over, a FIFO (or, for root, `/dev/null` itself) would become a plain file.
    os.mkfifo(tmp_path / "pipe")
    assert fails("write_file", {"path": "pipe", "content": "x"}, ctx).message == (
        "pipe is a FIFO, not a regular file"
    )
    assert stat.S_ISFIFO((tmp_path / "pipe").stat().st_mode)
    os.symlink("pipe", tmp_path / "to-pipe")
    assert fails("write_file", {"path": "to-pipe", "content": "x"}, ctx).message == (
        "to-pipe is a FIFO, not a regular file"
    )
    os.symlink("/dev/null", tmp_path / "null")
    assert fails("write_file", {"path": "null", "content": "x"}, ctx).message == (
        "null is a device, not a regular file"
    )
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(os.listdir(tmp_path)) == ["null", "pipe", "to-pipe"]  # no temp file left


def test_write_file_writes_through_a_symbolic_link(ctx: ToolContext, tmp_path: Path) -> None:
    # As `echo x > link` does: the file the link names gets the content, the link stays.
    (tmp_path / "real.txt").write_text("old")
    os.symlink("real.txt", tmp_path / "link.txt")
    assert call("write_file", {"path": "link.txt", "content": "new"}, ctx) == {
        "path": "link.txt",
        "bytes": 3,
    }
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "real.txt").read_text() == "new"
    os.symlink("made.txt", tmp_path / "dangling")  # a link to nothing yet: the target is made
    call("write_file", {"path": "dangling", "content": "made"}, ctx)
    assert (tmp_path / "dangling").is_symlink()
    assert (tmp_path / "made.txt").read_text() == "made"


def test_plan_arguments_are_checked_as_every_tool_checks_its_own(ctx: ToolContext) -> None:
    # Templated arguments reach the tool unchecked by validation: the same words as the
    # other tools (and as validation says them for literal ones).
    assert fails("plan", [], ctx).message == "plan: arguments must be a mapping, got array"  # type: ignore[arg-type]
    assert fails("plan", {}, ctx).message == "plan: missing argument 'path'"
    assert fails("plan", {"path": 5}, ctx).message == (
        "plan: 'path' must be a non-empty string, got number"
    )
    assert fails("plan", {"path": "p.yaml", "variables": []}, ctx).message == (
        "plan: 'variables' must be a mapping, got array"
    )
    assert fails("plan", {"path": "p.yaml", "vars": {}}, ctx).message == (
        "plan: unknown argument 'vars' (allowed: cwd, env, path, variables)"
    )
    assert fails("plan", {"path": "p.yaml", "env": "A=1"}, ctx).message == (
        "plan: 'env' must be a mapping, got string"
    )


# --- http -------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: str, content_type: str = "text/plain") -> None:
        data = body.encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Test", "yes")
            self.end_headers()
            self.wfile.write(data)
        except ConnectionError:
            pass  # the client gave up (the timeout test)

    def do_GET(self) -> None:
        if self.path == "/json":
            self._send(200, '{"a": [1, 2]}', "application/json; charset=utf-8")
        elif self.path == "/problem":
            self._send(422, '{"title": "bad"}', "application/problem+json")
        elif self.path == "/badjson":
            self._send(200, "not json", "application/json")
        elif self.path == "/text":
            self._send(200, '{"looks": "like json"}', "text/plain")
        elif self.path == "/created":
            self._send(201, "made")
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/json")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/slow":
            time.sleep(1.0)
            self._send(200, "late")
        else:
            self._send(404, "no such page " + "x" * 1000)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        echo = {
            "method": self.command,
            "content_type": self.headers.get("Content-Type"),
            "token": self.headers.get("X-Token"),
            "body": body,
        }
        self._send(200, json.dumps(echo), "application/json")

    do_PUT = do_POST


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_http(_Handler) as url:
        yield url


def test_http_json_response_is_decoded(ctx: ToolContext, server: str) -> None:
    result = call("http", {"url": f"{server}/json"}, ctx)
    assert result["status"] == 200
    assert result["json"] == {"a": [1, 2]}
    assert "text" not in result
    assert result["headers"]["x-test"] == "yes"


def test_http_non_json_or_unparsable_is_text(ctx: ToolContext, server: str) -> None:
    result = call("http", {"url": f"{server}/text"}, ctx)
    assert (result["status"], result["text"]) == (200, '{"looks": "like json"}')
    assert "json" not in result
    assert call("http", {"url": f"{server}/badjson"}, ctx)["text"] == "not json"


def test_http_sends_json_or_a_text_body_with_headers(ctx: ToolContext, server: str) -> None:
    sent = call(
        "http",
        {"method": "post", "url": f"{server}/echo", "json": {"k": 1}, "headers": {"X-Token": "t"}},
        ctx,
    )["json"]
    assert sent["method"] == "POST"
    assert sent["content_type"] == "application/json"
    assert json.loads(sent["body"]) == {"k": 1}
    assert sent["token"] == "t"
    sent = call("http", {"method": "PUT", "url": f"{server}/echo", "body": "raw"}, ctx)["json"]
    assert (sent["method"], sent["body"]) == ("PUT", "raw")


def test_http_header_values_beyond_ascii_are_sent_as_utf8(ctx: ToolContext, server: str) -> None:
    # As curl sends them; the library's own encoding (ASCII) failed the step with its
    # UnicodeEncodeError. A name is a token, and a value holds no line break.
    headers = {"X-Token": "café ✓"}
    sent = call("http", {"method": "PUT", "url": f"{server}/echo", "headers": headers}, ctx)
    assert sent["json"]["token"].encode("latin-1").decode("utf-8") == "café ✓"
    for name, value, message in (
        ("X-é", "v", "http: header name 'X-é' is not an HTTP token"),
        ("X-T", "a\nb", "http: header 'X-T' holds a line break or a NUL byte"),
        ("X-T", "\ud800", "http: header 'X-T' contains text that is not valid Unicode"),
    ):
        got = fails("http", {"url": server, "headers": {name: value}}, ctx).message
        assert got.startswith(message), got


def test_text_that_is_not_unicode_fails_a_step_in_planruns_words(run, write) -> None:
    # A lone surrogate (a python step's result) given to a file or http tool: one line that
    # says so, not Python's "UnicodeEncodeError: 'utf-8' codec can't encode ...".
    write("surrogate.py", "def text():\n    return 'a\\ud800'\n")
    write(
        "p.yaml",
        """
        steps:
          - {id: s, tool: python, args: {function: "surrogate:text"}, result_variable: t}
          - {id: w, tool: write_file, args: {path: out.txt, content: "${t}"}}
          - {id: p, tool: read_file, args: {path: "${t}"}}
          - {id: h, tool: http, args: {method: POST, url: "http://127.0.0.1:9/", body: "${t}"}}
        """,
    )
    r = run("run", "p.yaml", "--keep-going", "--output", "json")
    assert r.code == 1, r
    errors = {s["id"]: s["error"] for s in r.json["steps"]}
    for sid, tool in (("w", "write_file"), ("p", "read_file"), ("h", "http")):
        expected = f"{tool}: an argument contains text that is not valid Unicode (a lone surrogate)"
        assert errors[sid] == expected, errors


def test_http_status_400_or_more_fails_with_the_body(ctx: ToolContext, server: str) -> None:
    error = fails("http", {"url": f"{server}/missing"}, ctx)
    assert error.message == f"HTTP 404 from GET {server}/missing"
    assert error.detail is not None
    assert error.detail.startswith("no such page") and len(error.detail) == 500
    assert error.result["status"] == 404
    problem = fails("http", {"url": f"{server}/problem"}, ctx)
    assert problem.result["json"] == {"title": "bad"}  # +json is JSON too


def test_http_expect_status(ctx: ToolContext, server: str) -> None:
    assert call("http", {"url": f"{server}/missing", "expect_status": 404}, ctx)["status"] == 404
    assert call("http", {"url": f"{server}/created", "expect_status": [200, 201]}, ctx)["text"] == (
        "made"
    )
    error = fails("http", {"url": f"{server}/json", "expect_status": [201, 204]}, ctx)
    assert error.message == f"HTTP 200 from GET {server}/json (expected 201, 204)"
    assert "expect_status" in fails("http", {"url": server, "expect_status": "200"}, ctx).message


def test_http_follows_redirects(ctx: ToolContext, server: str) -> None:
    assert call("http", {"url": f"{server}/redirect"}, ctx)["json"] == {"a": [1, 2]}


def test_http_connection_refused_and_timeout(ctx: ToolContext, server: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x"
    error = fails("http", {"url": url}, ctx)
    assert error.message.startswith(f"cannot connect to {url}: ")
    assert "\n" not in error.message
    error = fails("http", {"url": f"{server}/slow", "timeout": 0.3}, ctx)
    assert error.message == f"timed out after 0.3s: GET {server}/slow"
    assert fails("http", {"url": "ftp://x/y"}, ctx).message.startswith("http: invalid URL")
    assert (
        "either 'json' or 'body'"
        in fails("http", {"url": server, "json": {}, "body": "x"}, ctx).message
    )


def test_http_port_out_of_range_is_an_invalid_url(ctx: ToolContext) -> None:
    # The URL parser takes any number; the socket refused it from inside the client's task
    # group, and the step said "ExceptionGroup: unhandled errors in a TaskGroup".
    for url in ("http://127.0.0.1:99999/", "http://127.0.0.1:-1/"):
        assert fails("http", {"url": url}, ctx).message == (
            f"http: invalid URL {url!r}: the port must be 0 to 65535"
        )


# --- python -----------------------------------------------------------------------------------


@pytest.fixture
def pymod(ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh module in the working directory (not on sys.path until the tool adds it)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    name = f"planrun_test_mod_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "import asyncio, threading\n"
        "def add(a, b=1):\n"
        "    return {'sum': a + b, 'thread': threading.current_thread().name}\n"
        "async def async_add(a, b):\n"
        "    await asyncio.sleep(0.01)\n"
        "    return [a + b, (1, 2)]\n"
        "def not_json():\n"
        "    return {1, 2}\n"
        "def boom(why):\n"
        "    raise ValueError(why)\n"
        "class Tools:\n"
        "    @staticmethod\n"
        "    def shout(text):\n"
        "        return text.upper()\n"
        "CONSTANT = 3\n"
    )
    return name


def test_python_calls_sync_functions_in_a_worker_thread(ctx: ToolContext, pymod: str) -> None:
    result = call("python", {"function": f"{pymod}:add", "kwargs": {"a": 2, "b": 3}}, ctx)
    assert result["sum"] == 5
    assert result["thread"] != "MainThread"
    assert call("python", {"function": f"{pymod}:Tools.shout", "kwargs": {"text": "hi"}}, ctx) == (
        "HI"
    )


def test_python_awaits_async_functions(ctx: ToolContext, pymod: str) -> None:
    result = call("python", {"function": f"{pymod}:async_add", "kwargs": {"a": 1, "b": 2}}, ctx)
    assert result == [3, [1, 2]]  # as the state file will hold it


def test_python_failures(ctx: ToolContext, pymod: str) -> None:
    error = fails("python", {"function": f"{pymod}:not_json"}, ctx)
    assert error.message == f"function {pymod}:not_json returned a non-JSON value of type set"
    error = fails("python", {"function": f"{pymod}:boom", "kwargs": {"why": "bad input"}}, ctx)
    assert error.message == "ValueError: bad input"
    assert error.detail is not None
    assert "Traceback" in error.detail and "raise ValueError(why)" in error.detail
    assert fails("python", {"function": f"{pymod}:nope"}, ctx).message == (
        f"python: {pymod} has no attribute 'nope'"
    )
    assert fails("python", {"function": f"{pymod}:CONSTANT"}, ctx).message == (
        f"python: {pymod}:CONSTANT is not callable (type int)"
    )
    assert fails("python", {"function": "no_such_module_xyz:f"}, ctx).message == (
        "python: no module named 'no_such_module_xyz'"
    )
    assert "module:attr" in fails("python", {"function": "justaname"}, ctx).message
    error = fails("python", {"function": f"{pymod}:add", "kwargs": {"z": 1}}, ctx)
    assert error.message.startswith("TypeError: ")


def test_python_import_errors_are_one_line(ctx: ToolContext, pymod: str, tmp_path: Path) -> None:
    (tmp_path / f"{pymod}_broken.py").write_text("import no_such_dependency_xyz\n")
    error = fails("python", {"function": f"{pymod}_broken:f"}, ctx)
    assert error.message == (
        f"python: cannot import {pymod}_broken: No module named 'no_such_dependency_xyz'"
    )
    (tmp_path / f"{pymod}_raises.py").write_text("raise RuntimeError('at import')\n")
    error = fails("python", {"function": f"{pymod}_raises:f"}, ctx)
    assert error.message == f"python: cannot import {pymod}_raises: RuntimeError: at import"
    assert error.detail is not None and "at import" in error.detail


# --- each tool renders its own arguments --------------------------------------------------


@pytest.fixture
def shout_tool() -> Iterator[str]:
    """A small tool registered in this process that renders its own arguments: every value
    an expression gives is upper-cased (the literal text around it is not)."""
    from planrun.plan.expressions import render_value
    from planrun.tools.base import ToolSpec

    def render(args: dict[str, Any], evaluate: Any) -> dict[str, Any]:
        rendered: dict[str, Any] = render_value(
            args, lambda expr: str(evaluate(expr)).upper(), ("args",)
        )
        return rendered

    async def shout(args: dict[str, Any], ctx: ToolContext) -> Any:
        return args

    registry = builtin_registry()
    spec = ToolSpec("shout", shout, "Upper-case the values.", {"type": "object"}, render)
    registry.register(spec)
    try:
        yield spec.name
    finally:
        builtin_registry.cache_clear()  # the tests after see the built-in tools only


def test_a_tool_renders_its_own_arguments(shout_tool: str) -> None:
    from planrun.plan.definition import Step
    from planrun.run.stepcall import call_args

    step = Step(id="s", tool=shout_tool, args={"say": "hi ${who}!", "n": "${n}"})
    assert call_args(step, {"who": "ann", "n": 3}) == {"say": "hi ANN!", "n": "3"}
    # The same template for a tool without its own rendering: plain (values as they are).
    plain = Step(id="p", tool="echo", args={"value": {"say": "hi ${who}!", "n": "${n}"}})
    assert call_args(plain, {"who": "ann", "n": 3}) == {"value": {"say": "hi ann!", "n": 3}}


def test_a_cmd_argument_of_another_tool_is_not_shell_quoted() -> None:
    from planrun.plan.definition import Step
    from planrun.run.stepcall import call_args

    step = Step(id="s", tool="echo", args={"cmd": "echo ${who}"})
    assert call_args(step, {"who": "a b; c"}) == {"cmd": "echo a b; c"}
    shell = Step(id="t", tool="shell", args={"cmd": "echo ${who}"})
    assert call_args(shell, {"who": "a b; c"}) == {
        "cmd": 'echo "${PLANRUN_V_0}"',
        "env": {"PLANRUN_V_0": "a b; c"},
    }


def test_the_plan_tool_is_an_ordinary_registered_tool() -> None:
    from planrun.executors.local import LocalExecutor
    from planrun.plan.builtin_args import builtin_schema

    spec = builtin_registry().get("plan")
    assert spec is not None
    assert builtin_schema("plan") == spec.input_schema
    # No sub-plan hook: the executor reaches `plan` the way it reaches every tool, and the
    # tool finds the run path in its context.
    ctx = ToolContext(step_id="s", cwd=".", env={})
    with pytest.raises(ToolFailed, match="only as a step of a plan run"):
        asyncio.run(LocalExecutor().call("plan", {"path": "x.yaml"}, ctx))


def test_a_tool_says_whether_it_takes_its_step_env_and_cwd(shout_tool: str) -> None:
    from planrun.plan.definition import Step
    from planrun.run.stepcall import call_args
    from planrun.tools.base import ToolSpec

    step = Step(id="s", tool=shout_tool, args={"x": "1"}, env={"A": "${a}"}, cwd="sub")
    assert call_args(step, {"a": "v"}) == {"x": "1"}  # takes neither
    registry = builtin_registry()
    spec = registry.get(shout_tool)
    assert spec is not None
    registry.register(spec._replace(step_env=True, step_cwd=True))
    assert call_args(step, {"a": "v"}) == {"x": "1", "env": {"A": "v"}, "cwd": "sub"}
    assert isinstance(spec, ToolSpec)


# ---- http ----------------------------------------------------------------------------------------


class _ContentTypeHandler(BaseHTTPRequestHandler):
    ROUTES: dict[str, tuple[int, str, str]] = {
        "/vendor": (200, "application/vnd.api+json; charset=utf-8", '{"data": [1]}'),
        "/upper": (200, "Application/JSON", '{"k": "v"}'),
        "/null": (200, "application/json", "null"),
        "/broken": (200, "application/problem+json", "{not json"),
        "/plain": (200, "text/plain", '{"k": "v"}'),
        "/none": (200, "", '{"k": "v"}'),
        "/odd": (399, "text/plain", "three-nine-nine"),
        "/bad": (400, "application/json", '{"why": "bad"}'),
        "/gone": (410, "text/plain", "gone"),
        "/nan": (200, "application/json", '{"v": NaN}'),
        "/infinity": (200, "application/json", "[-Infinity]"),
        "/overflow": (200, "application/json", "[1e999]"),
    }

    def do_GET(self) -> None:
        status, ctype, body = self.ROUTES[self.path]
        data = body.encode()
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def content_type_server() -> Iterator[str]:
    with serve_http(_ContentTypeHandler) as url:
        yield url


def test_http_json_or_text_by_content_type_and_failure_from_400(run, write, content_type_server):
    routes = ["vendor", "upper", "null", "broken", "plain", "none", "odd", "bad", "gone"]
    steps = "\n".join(
        f"  - {{id: '{name}', tool: http, args: {{url: '{content_type_server}/{name}'}}, on_failure: continue}}"
        for name in routes
    )
    write(
        "p.yaml",
        f"steps:\n{steps}\n"
        f"  - {{id: expected, tool: http, args: {{url: '{content_type_server}/gone', expect_status: 410}}}}\n",
    )
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 1, r
    s = steps_by_id(r.json)

    def body(name: str) -> dict[str, Any]:
        return {k: v for k, v in s[name]["result"].items() if k in ("json", "text")}

    assert body("vendor") == {"json": {"data": [1]}}
    assert body("upper") == {"json": {"k": "v"}}
    assert body("null") == {"json": None}  # JSON that parses, even to null
    assert body("broken") == {"text": "{not json"}
    assert body("plain") == {"text": '{"k": "v"}'}
    assert body("none") == {"text": '{"k": "v"}'}
    assert s["odd"]["status"] == "succeeded" and s["odd"]["result"]["status"] == 399
    for name, code in (("bad", 400), ("gone", 410)):
        assert s[name]["status"] == "failed" and str(code) in s[name]["error"], s[name]
    assert s["bad"]["result"]["json"] == {"why": "bad"}
    assert s["expected"]["status"] == "succeeded"
    assert s["expected"]["result"]["text"] == "gone"


def _strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: no NaN, no infinity (what jq and every other reader expects)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    def finite(number: str) -> float:
        value = float(number)
        if not math.isfinite(value):
            raise ValueError(f"{number} is not a JSON number a reader can hold")
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


def test_http_body_with_nan_or_infinity_is_text_not_json(run, write, content_type_server):
    # NaN, Infinity and 1e999 are not JSON: a body holding them does not parse, so the result
    # has `text`, and the run's JSON document stays JSON.
    routes = ["nan", "infinity", "overflow"]
    steps = "\n".join(
        f"  - {{id: '{name}', tool: http, args: {{url: '{content_type_server}/{name}'}}}}"
        for name in routes
    )
    write("p.yaml", f"steps:\n{steps}\n")
    r = run("run", "p.yaml", "--output", "json")
    assert r.code == 0, r
    s = steps_by_id(_strict_json(r.out))
    texts = {name: s[name]["result"].get("text") for name in routes}
    assert texts == {"nan": '{"v": NaN}', "infinity": "[-Infinity]", "overflow": "[1e999]"}
    assert all("json" not in s[name]["result"] for name in routes)
